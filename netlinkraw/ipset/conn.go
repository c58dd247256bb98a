package ipset

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"

	"github.com/proxysinks/proxysinks/netlinkraw"
)

// Client is what the proxysinks data plane needs from ipset. *Conn
// implements it against the kernel, ipsettest.Fake in memory; both pass the
// same contract suite (ipsettest.Contract).
type Client interface {
	// Create creates a set. With Exist, an identical existing set is not an
	// error (a different one still is).
	Create(s Set, opts ...Option) error
	// Destroy destroys a set. With Exist, a missing set is not an error.
	Destroy(name string, opts ...Option) error
	// Flush removes every entry of a set.
	Flush(name string) error
	// Rename renames a set; the new name must be free.
	Rename(from, to string) error
	// Swap exchanges the contents (and names) of two sets of the same type
	// and family.
	Swap(a, b string) error
	// Header returns a set's description without its entries.
	Header(name string) (Header, error)
	// List returns a set's description and its entries.
	List(name string) (Header, []Entry, error)
	// ListNames returns the names of all sets.
	ListNames() ([]string, error)
	// Add adds entries. With Exist, present entries are not errors. Entries
	// that fail are reported in a *BatchError; the others are added.
	Add(set string, entries []Entry, opts ...Option) error
	// Del deletes entries. With Exist, absent entries are not errors.
	Del(set string, entries []Entry, opts ...Option) error
	// Test reports whether the set holds the entry.
	Test(set string, e Entry) (bool, error)
	// Close releases the client.
	Close() error
}

// Stats counts a Conn's traffic, like the IPVS Conn's counters.
type Stats struct {
	// Sendmsg and Recvmsg count system calls on the socket.
	Sendmsg, Recvmsg uint64
	// MessagesSent and MessagesReceived count netlink messages.
	MessagesSent, MessagesReceived uint64
	// BytesSent and BytesReceived count bytes on the socket.
	BytesSent, BytesReceived uint64
}

// transport moves raw netlink messages. The Linux one is a netlink socket;
// tests script a kernel with a function.
type transport interface {
	// send writes the messages in one sendmsg.
	send(msgs []netlink.Message, st *Stats) error
	// recv reads one datagram, without interpreting error messages,
	// waiting until deadline at most (the zero time: no limit); a passed
	// deadline is an error matching os.ErrDeadlineExceeded.
	recv(deadline time.Time, st *Stats) ([]message, error)
	close() error
}

// Config configures Dial.
type Config struct {
	// NetNS is a file descriptor of the network namespace to work in; 0
	// means the caller's.
	NetNS int
	// BatchBytes caps the bytes one sendmsg carries (default 4 MiB). The
	// socket buffers are sized from it.
	BatchBytes int
	// MaxProtocol caps the protocol version offered (default 7); tests use
	// it to exercise protocol 6.
	MaxProtocol uint8
	// ReplyTimeout bounds each wait for a reply datagram: a call whose
	// reply does not come within it (a lost reply) fails with an error
	// matching netlinkraw.ErrReplyTimeout instead of blocking forever; the
	// connection stays usable (late replies are skipped). Zero means
	// netlinkraw.DefaultReplyTimeout; negative, no limit.
	ReplyTimeout time.Duration

	// replyBudget is set by Dial from the socket's receive buffer.
	replyBudget int
}

const (
	// replyOverhead is what one answer costs the receive buffer beyond its
	// bytes (socket buffer bookkeeping), with a margin.
	replyOverhead = 1024

	defaultBatchBytes = 4 << 20
	// maxADTBytes caps one message's IPSET_ATTR_ADT so that its 16-bit
	// length cannot overflow.
	maxADTBytes = 60000
)

// Conn is an ipset client speaking nfnetlink. It is safe for concurrent use;
// calls are serialized.
type Conn struct {
	mu         sync.Mutex
	t          transport
	proto      uint8
	seq        uint32
	stats      Stats
	batchBytes int
	// replyBudget bounds the kernel's worst-case answers to one sendmsg (a
	// copy of every message that fails), so that they fit the socket's
	// receive buffer.
	replyBudget int
	revisions   map[revKey]uint8
	// types caches the type and family of sets this Conn created or read,
	// to check entries before sending them.
	types map[string]setKind
	// timeout bounds each wait for a reply datagram (0: none).
	timeout time.Duration
	// abandoned is the sequence number of a dump a call gave up on before
	// its answer ended (0: none); see finishAbandoned.
	abandoned uint32
}

type setKind struct {
	t Type
	f Family
}

type revKey struct {
	t Type
	f Family
}

var _ Client = (*Conn)(nil)

// newConn negotiates the protocol over t.
func newConn(t transport, cfg Config) (*Conn, error) {
	c := &Conn{
		t:          t,
		seq:        1,
		batchBytes: cfg.BatchBytes,
		revisions:  map[revKey]uint8{},
		types:      map[string]setKind{},
		timeout:    netlinkraw.ReplyTimeout(cfg.ReplyTimeout),
	}
	if c.batchBytes <= 0 {
		c.batchBytes = defaultBatchBytes
	}
	c.replyBudget = cfg.replyBudget
	if c.replyBudget <= 0 {
		c.replyBudget = 4 * c.batchBytes
	}
	max := cfg.MaxProtocol
	if max == 0 || max > protocolMax {
		max = protocolMax
	}
	if err := c.negotiate(max); err != nil {
		t.close()
		return nil, err
	}
	return c, nil
}

// negotiate asks the kernel for its protocol version and settles on the
// highest both sides speak.
func (c *Conn) negotiate(offer uint8) error {
	for {
		a := cmdAttrs(offer)
		res, err := c.exchange([]netlink.Message{c.msg(cmdProtocol, 0, a)}, true)
		if err != nil {
			return &OpError{Op: "negotiate", Object: "protocol", Err: err}
		}
		r := res[0]
		if r.code != 0 {
			if offer > protocolMin && r.code == int(ErrProtocol) {
				offer--
				continue
			}
			return &OpError{Op: "negotiate", Object: "protocol", Err: errnoFromKernel(r.code, false)}
		}
		if len(r.data) == 0 {
			return &OpError{Op: "negotiate", Object: "protocol", Err: errors.New("no reply")}
		}
		p, err := decodeProtocol(r.data[0].Data)
		if err != nil {
			return &OpError{Op: "negotiate", Object: "protocol", Err: err}
		}
		v := min(p.Protocol, offer)
		if v < protocolMin || (p.Min != 0 && v < p.Min) {
			return &OpError{Op: "negotiate", Object: "protocol", Err: fmt.Errorf("kernel speaks protocol %d (min %d), this package %d..%d", p.Protocol, p.Min, protocolMin, offer)}
		}
		c.proto = v
		return nil
	}
}

// Protocol returns the negotiated protocol version (6 or 7).
func (c *Conn) Protocol() uint8 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proto
}

// Stats returns the traffic counters.
func (c *Conn) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Close closes the socket.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t.close()
}

// SetReplyTimeout changes the bound on each wait for a reply datagram
// (Config.ReplyTimeout: zero means netlinkraw.DefaultReplyTimeout, negative
// no limit).
func (c *Conn) SetReplyTimeout(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timeout = netlinkraw.ReplyTimeout(d)
}

// recv reads one datagram within the reply timeout. It notices the end
// of an abandoned dump's answer, whichever call reads it.
func (c *Conn) recv() ([]message, error) {
	ms, err := c.t.recv(netlinkraw.ReplyDeadline(c.timeout), &c.stats)
	if c.abandoned != 0 {
		for _, m := range ms {
			if m.Seq == c.abandoned && (m.Type == uint16(netlink.Done) || m.Type == uint16(netlink.Error)) {
				c.abandoned = 0
			}
		}
	}
	return ms, netlinkraw.ReplyError(err, c.timeout)
}

// finishAbandoned reads the rest of the answer to a dump that an earlier
// call gave up on (a reply timeout, a failed receive), skipping it, until
// its end: the kernel keeps producing such a dump for the socket, and
// refuses a new one with EBUSY until it is read. The kernel produces the
// rest as it is read, so this takes no longer than reading it. An end that
// does not come within the reply timeout is taken as lost and the caller
// goes on (a kernel still busy then answers EBUSY: an error, never a
// wrong answer); another failure fails the call and is retried by the next.
func (c *Conn) finishAbandoned() error {
	for c.abandoned != 0 {
		if _, err := c.recv(); err != nil {
			if errors.Is(err, netlinkraw.ErrReplyTimeout) {
				c.abandoned = 0
				return nil
			}
			return fmt.Errorf("finish reading the answer to an abandoned dump: %w", err)
		}
	}
	return nil
}

// msg builds an ipset message.
func (c *Conn) msg(cmd uint8, flags netlink.HeaderFlags, a *attrs) netlink.Message {
	return netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(nfnlSubsysIPSet<<8 | uint16(cmd)),
			Flags: netlink.Request | flags,
		},
		Data: a.b,
	}
}

// result is the kernel's answer to one message.
type result struct {
	code    int // positive errno, 0 for success
	line    uint32
	hasLine bool
	data    []message
}

// exchange sends msgs, as few sendmsg calls as the batch size allows, and
// collects the answer to each. Only the last message of a sendmsg asks for
// an acknowledgement unless ackAll: the kernel answers failures anyway and
// handles the messages of one sendmsg in order, so the last answer closes the
// batch. The caller holds c.mu (or is newConn).
func (c *Conn) exchange(msgs []netlink.Message, ackAll bool) ([]result, error) {
	results := make([]result, len(msgs))
	for start := 0; start < len(msgs); {
		end, size, reply := start, 0, 0
		for end < len(msgs) {
			n := nlmsgHdrLen + align4(len(msgs[end].Data))
			r := n + replyOverhead
			if end > start && (size+n > c.batchBytes || reply+r > c.replyBudget) {
				break
			}
			size += n
			reply += r
			end++
		}
		group := msgs[start:end]
		if c.seq+uint32(len(group)) < c.seq {
			c.seq = 1 // keep the group's numbers contiguous across the wrap
		}
		first := c.seq
		for i := range group {
			group[i].Header.Sequence = c.seq
			c.seq++
			if ackAll || i == len(group)-1 {
				group[i].Header.Flags |= netlink.Acknowledge
			}
		}
		last := group[len(group)-1].Header.Sequence
		if err := c.t.send(group, &c.stats); err != nil {
			return nil, err
		}
		for done := false; !done; {
			ms, err := c.recv()
			if err != nil {
				return nil, err
			}
			for _, m := range ms {
				idx := int(m.Seq - first)
				if m.Seq-first >= uint32(len(group)) {
					continue // a stale answer to an earlier exchange
				}
				r := &results[start+idx]
				switch m.Type {
				case uint16(netlink.Error):
					info, err := decodeAck(m.Data)
					if err != nil {
						return nil, err
					}
					r.code, r.line, r.hasLine = info.Code, info.Line, info.HasLine
					if m.Seq == last {
						done = true
					}
				case uint16(netlink.Done), uint16(netlink.Noop), uint16(netlink.Overrun):
				default:
					r.data = append(r.data, m)
				}
			}
		}
		start = end
	}
	return results, nil
}

// dump runs a LIST dump and decodes it. A dump the kernel marks
// interrupted (NLM_F_DUMP_INTR: the sets changed while it was read) is run
// again, up to netlinkraw.MaxDumpAttempts times.
func (c *Conn) dump(a *attrs) (*listing, error) {
	for attempt := 1; ; attempt++ {
		l, intr, err := c.dumpOnce(a)
		if err != nil || !intr {
			return l, err
		}
		if attempt == netlinkraw.MaxDumpAttempts {
			return nil, fmt.Errorf("%w (%d times)", netlinkraw.ErrDumpInterrupted, attempt)
		}
	}
}

// dumpOnce runs one LIST dump; intr reports an inconsistent one.
func (c *Conn) dumpOnce(a *attrs) (_ *listing, intr bool, _ error) {
	if err := c.finishAbandoned(); err != nil {
		return nil, false, err
	}
	m := c.msg(cmdList, netlink.Dump, a)
	if c.seq == 0 {
		c.seq = 1
	}
	m.Header.Sequence = c.seq
	seq := c.seq
	c.seq++
	if err := c.t.send([]netlink.Message{m}, &c.stats); err != nil {
		return nil, false, err
	}
	l := newListing()
	var decodeErr error
	for {
		ms, err := c.recv()
		if err != nil {
			c.abandoned = seq
			return nil, false, err
		}
		for _, m := range ms {
			if m.Seq != seq {
				continue
			}
			if m.Flags&uint16(netlink.DumpInterrupted) != 0 {
				intr = true
			}
			switch m.Type {
			case uint16(netlink.Error), uint16(netlink.Done):
				code := 0
				if len(m.Data) >= 4 {
					info, err := decodeAck(m.Data)
					if err != nil {
						return nil, false, err
					}
					code = info.Code
				}
				if code != 0 {
					return nil, false, errnoFromKernel(code, false)
				}
				return l, intr, decodeErr
			default:
				if err := l.add(m.Data); err != nil && decodeErr == nil {
					decodeErr = err
				}
			}
		}
	}
}

// simple sends one command and returns its error.
func (c *Conn) simple(cmd uint8, flags netlink.HeaderFlags, a *attrs) error {
	res, err := c.exchange([]netlink.Message{c.msg(cmd, flags, a)}, true)
	if err != nil {
		return err
	}
	if res[0].code != 0 {
		return errnoFromKernel(res[0].code, false)
	}
	return nil
}

// revision returns the highest revision of a set type the kernel has.
func (c *Conn) revision(t Type, f Family) (uint8, error) {
	k := revKey{t, f}
	if r, ok := c.revisions[k]; ok {
		return r, nil
	}
	a := cmdAttrs(c.proto)
	a.str(attrTypeName, string(t))
	a.u8(attrFamily, uint8(f))
	res, err := c.exchange([]netlink.Message{c.msg(cmdType, 0, a)}, true)
	if err != nil {
		return 0, err
	}
	if res[0].code != 0 {
		return 0, errnoFromKernel(res[0].code, false)
	}
	if len(res[0].data) == 0 {
		return 0, errors.New("no reply to type query")
	}
	r, err := decodeType(res[0].data[0].Data)
	if err != nil {
		return 0, err
	}
	c.revisions[k] = r.Revision
	return r.Revision, nil
}

// checkSet validates a set description before it is sent.
func checkSet(s Set) error {
	if err := checkName(s.Name); err != nil {
		return err
	}
	if !s.Type.supported() {
		return fmt.Errorf("%w: %q", ErrFindType, s.Type)
	}
	if s.Type == BitmapPort {
		if s.PortFrom > s.PortTo {
			return fmt.Errorf("bitmap:port range %d-%d is reversed", s.PortFrom, s.PortTo)
		}
		return nil
	}
	if s.Family != INET && s.Family != INET6 {
		return fmt.Errorf("%w: family %s for %s", ErrInvalidFamily, s.Family, s.Type)
	}
	return nil
}

// Create creates a set.
func (c *Conn) Create(s Set, opts ...Option) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := checkSet(s); err != nil {
		return &OpError{Op: "create", Object: "set " + s.Name, Err: err}
	}
	f := s.Family
	if s.Type == BitmapPort {
		f = Unspec
	}
	rev, err := c.revision(s.Type, f)
	if err != nil {
		return &OpError{Op: "create", Object: "set " + s.Name + " of type " + string(s.Type), Err: err}
	}
	a := cmdAttrs(c.proto)
	a.str(attrSetName, s.Name)
	a.str(attrTypeName, string(s.Type))
	a.u8(attrRevision, rev)
	a.u8(attrFamily, uint8(f))
	createData(a, s)
	var flags netlink.HeaderFlags = netlink.Create
	if !hasExist(opts) {
		flags |= netlink.Excl
	}
	if err := c.simple(cmdCreate, flags, a); err != nil {
		return &OpError{Op: "create", Object: "set " + s.Name, Err: err}
	}
	c.types[s.Name] = setKind{s.Type, f}
	return nil
}

// Destroy destroys a set.
func (c *Conn) Destroy(name string, opts ...Option) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := checkName(name); err != nil {
		return &OpError{Op: "destroy", Object: "set " + name, Err: err}
	}
	a := cmdAttrs(c.proto)
	a.str(attrSetName, name)
	var flags netlink.HeaderFlags
	if !hasExist(opts) {
		flags = netlink.Excl
	}
	err := c.simple(cmdDestroy, flags, a)
	if errors.Is(err, syscall.ENOENT) && hasExist(opts) {
		err = nil
	}
	if err != nil {
		return &OpError{Op: "destroy", Object: "set " + name, Err: err}
	}
	delete(c.types, name)
	return nil
}

// Flush removes every entry of a set.
func (c *Conn) Flush(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := checkName(name); err != nil {
		return &OpError{Op: "flush", Object: "set " + name, Err: err}
	}
	a := cmdAttrs(c.proto)
	a.str(attrSetName, name)
	if err := c.simple(cmdFlush, 0, a); err != nil {
		return &OpError{Op: "flush", Object: "set " + name, Err: err}
	}
	return nil
}

// twoNames runs rename or swap.
func (c *Conn) twoNames(cmd uint8, op, from, to string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	obj := "set " + from + " to " + to
	if op == "swap" {
		obj = "sets " + from + " and " + to
	}
	if err := checkName(from); err != nil {
		return &OpError{Op: op, Object: obj, Err: err}
	}
	if err := checkName(to); err != nil {
		return &OpError{Op: op, Object: obj, Err: err}
	}
	a := cmdAttrs(c.proto)
	a.str(attrSetName, from)
	a.str(attrSetName2, to)
	if err := c.simple(cmd, 0, a); err != nil {
		return &OpError{Op: op, Object: obj, Err: err}
	}
	kf, okf := c.types[from]
	kt, okt := c.types[to]
	delete(c.types, from)
	delete(c.types, to)
	if op == "swap" {
		if okt {
			c.types[from] = kt
		}
		if okf {
			c.types[to] = kf
		}
	} else if okf {
		c.types[to] = kf
	}
	return nil
}

// Rename renames a set.
func (c *Conn) Rename(from, to string) error { return c.twoNames(cmdRename, "rename", from, to) }

// Swap swaps two sets.
func (c *Conn) Swap(a, b string) error { return c.twoNames(cmdSwap, "swap", a, b) }

// list runs a LIST dump of one set.
func (c *Conn) list(op, name string, flags uint32) (*listed, error) {
	if err := checkName(name); err != nil {
		return nil, &OpError{Op: op, Object: "set " + name, Err: err}
	}
	a := cmdAttrs(c.proto)
	a.str(attrSetName, name)
	if flags != 0 {
		a.be32(attrFlags, flags)
	}
	l, err := c.dump(a)
	if err != nil {
		return nil, &OpError{Op: op, Object: "set " + name, Err: err}
	}
	s, ok := l.sets[name]
	if !ok || !s.HaveHdr {
		return nil, &OpError{Op: op, Object: "set " + name, Err: errors.New("no header in the kernel's reply")}
	}
	c.types[name] = setKind{s.Header.Type, s.Header.Family}
	return s, nil
}

// Header returns a set's description.
func (c *Conn) Header(name string) (Header, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.list("header", name, flagListHeader)
	if err != nil {
		return Header{}, err
	}
	return s.Header, nil
}

// List returns a set's description and entries.
func (c *Conn) List(name string) (Header, []Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.list("list", name, 0)
	if err != nil {
		return Header{}, nil, err
	}
	return s.Header, s.Entries, nil
}

// ListNames returns the names of all sets in the namespace.
func (c *Conn) ListNames() ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := cmdAttrs(c.proto)
	a.be32(attrFlags, flagListSetName)
	l, err := c.dump(a)
	if err != nil {
		return nil, &OpError{Op: "list", Object: "set names", Err: err}
	}
	return slices.Clone(l.order), nil
}

// Test reports whether set holds e.
func (c *Conn) Test(set string, e Entry) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	obj := e.String() + " in " + set
	if err := checkName(set); err != nil {
		return false, &OpError{Op: "test", Object: obj, Err: err}
	}
	k, err := c.kind(set)
	if err != nil {
		return false, &OpError{Op: "test", Object: obj, Err: err}
	}
	if err := CheckEntry(k.t, k.f, e); err != nil {
		return false, &OpError{Op: "test", Object: obj, Err: err}
	}
	a := cmdAttrs(c.proto)
	a.str(attrSetName, set)
	appendEntry(a, k.t, e, 0)
	res, err := c.exchange([]netlink.Message{c.msg(cmdTest, 0, a)}, true)
	if err != nil {
		return false, &OpError{Op: "test", Object: obj, Err: err}
	}
	switch res[0].code {
	case 0:
		return true, nil
	case int(ErrExist):
		return false, nil
	}
	return false, &OpError{Op: "test", Object: obj, Err: errnoFromKernel(res[0].code, k.t == BitmapPort)}
}

// kind returns the type and family of a set, from the cache or, the first
// time, from the kernel (one header dump).
func (c *Conn) kind(set string) (setKind, error) {
	if k, ok := c.types[set]; ok {
		return k, nil
	}
	a := cmdAttrs(c.proto)
	a.str(attrSetName, set)
	a.be32(attrFlags, flagListHeader)
	l, err := c.dump(a)
	if err != nil {
		return setKind{}, err
	}
	s, ok := l.sets[set]
	if !ok || !s.HaveHdr {
		return setKind{}, errors.New("no header in the kernel's reply")
	}
	k := setKind{s.Header.Type, s.Header.Family}
	c.types[set] = k
	return k, nil
}

// Add adds entries to set.
func (c *Conn) Add(set string, entries []Entry, opts ...Option) error {
	return c.adt(cmdAdd, "add", set, entries, opts)
}

// Del deletes entries from set.
func (c *Conn) Del(set string, entries []Entry, opts ...Option) error {
	return c.adt(cmdDel, "del", set, entries, opts)
}

// adtMsg is one ADD/DEL message and the entries it carries.
type adtMsg struct {
	idx    []int // entry index of each line
	perMsg int   // the entry limit it was built with
}

// run is a sequence of entries to send, at most perMsg per message.
type run struct {
	idx    []int
	perMsg int
}

// maxEntriesPerMsg bounds the entries of one message (the byte limit
// usually comes first).
const maxEntriesPerMsg = 1 << 16

// adt adds or deletes entries in batches: many entries per message (ADT
// with line numbers), many messages per sendmsg. The kernel stops a message
// at its first failing line and reports the line; the entries after it are
// sent again in the next round.
func (c *Conn) adt(cmd uint8, op, set string, entries []Entry, opts []Option) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := checkName(set); err != nil {
		return &OpError{Op: op, Object: "set " + set, Err: err}
	}
	var flags netlink.HeaderFlags
	if !hasExist(opts) {
		flags |= netlink.Excl
	}
	k, err := c.kind(set)
	if err != nil {
		return &OpError{Op: op, Object: "entries of set " + set, Err: err}
	}
	bitmap := k.t == BitmapPort
	var failed []EntryError
	first := run{perMsg: maxEntriesPerMsg}
	for i, e := range entries {
		if err := CheckEntry(k.t, k.f, e); err != nil {
			failed = append(failed, EntryError{Index: i, Entry: e, Err: err})
			continue
		}
		first.idx = append(first.idx, i)
	}
	todo := []run{first}
	for len(todo) > 0 {
		var (
			msgs  []netlink.Message
			metas []adtMsg
			a     *attrs
			meta  adtMsg
			adt   int
		)
		flush := func() {
			if a == nil {
				return
			}
			a.end(adt)
			msgs = append(msgs, c.msg(cmd, flags, a))
			metas = append(metas, meta)
			a = nil
		}
		for _, r := range todo {
			for _, i := range r.idx {
				if a != nil && (len(a.b)-adt > maxADTBytes || len(meta.idx) >= r.perMsg) {
					flush()
				}
				if a == nil {
					a = cmdAttrs(c.proto)
					a.str(attrSetName, set)
					a.ne32(attrLineNo, 0)
					adt = a.begin(attrADT)
					meta = adtMsg{perMsg: r.perMsg}
				}
				meta.idx = append(meta.idx, i)
				appendEntry(a, k.t, entries[i], uint32(len(meta.idx)))
			}
			flush()
		}
		res, err := c.exchange(msgs, false)
		if err != nil {
			err = &OpError{Op: op, Object: "entries of set " + set + " (the unanswered ones may or may not be done)", Err: err}
			if len(failed) > 0 {
				slices.SortFunc(failed, func(x, y EntryError) int { return x.Index - y.Index })
				return errors.Join(err, &BatchError{Op: op, Set: set, Failed: failed})
			}
			return err
		}
		todo = todo[:0]
		for j, r := range res {
			if r.code == 0 {
				continue
			}
			cause := errnoFromKernel(r.code, bitmap)
			if cmd == cmdDel && r.code == int(ErrExist) {
				cause = ErrNotFound
			}
			m := metas[j]
			if !r.hasLine || r.line < 1 || int(r.line) > len(m.idx) {
				// The whole message was refused (no such set, ...). The
				// set may have changed behind our back: forget its kind.
				delete(c.types, set)
				return &OpError{Op: op, Object: fmt.Sprintf("%d entries of set %s", len(entries), set), Err: cause}
			}
			bad := m.idx[r.line-1]
			failed = append(failed, EntryError{Index: bad, Entry: entries[bad], Err: cause})
			if rest := m.idx[r.line:]; len(rest) > 0 {
				// Failures cluster (a batch re-adding what exists): resend
				// the rest in smaller messages, so that every failure
				// costs the kernel a smaller copy and a batch of failures
				// takes a few rounds, not one round per failure.
				todo = append(todo, run{idx: rest, perMsg: max(1, len(m.idx)/8)})
			}
		}
	}
	if len(failed) == 0 {
		return nil
	}
	slices.SortFunc(failed, func(x, y EntryError) int { return x.Index - y.Index })
	return &BatchError{Op: op, Set: set, Failed: failed}
}
