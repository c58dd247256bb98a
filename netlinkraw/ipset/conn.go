package ipset

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw"
	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
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

// Stats counts a Conn's traffic, like the IPVS Conn's counters: sendmsg
// and recvmsg calls, netlink messages and bytes each way.
type Stats = nlcore.Counters

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
	defaultBatchBytes = 4 << 20
	// maxADTBytes caps one message's IPSET_ATTR_ADT so that its 16-bit
	// length cannot overflow.
	maxADTBytes = 60000
)

// Conn is an ipset client speaking nfnetlink. It is safe for concurrent use;
// calls are serialized.
type Conn struct {
	mu         sync.Mutex
	nl         *nlcore.Conn
	proto      uint8
	batchBytes int
	// replyBudget bounds the kernel's worst-case answers to one sendmsg (a
	// copy of every message that fails), so that they fit the socket's
	// receive buffer.
	replyBudget int
	revisions   map[revKey]uint8
	// types caches the type and family of sets this Conn created or read,
	// to check entries before sending them.
	types map[string]setKind
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
func newConn(t nlcore.Transport, cfg Config) (*Conn, error) {
	c := &Conn{
		nl:         nlcore.NewConn(t, cfg.ReplyTimeout),
		batchBytes: cfg.BatchBytes,
		revisions:  map[revKey]uint8{},
		types:      map[string]setKind{},
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
		t.Close()
		return nil, err
	}
	return c, nil
}

// negotiate asks the kernel for its protocol version and settles on the
// highest both sides speak.
func (c *Conn) negotiate(offer uint8) error {
	for {
		a := cmdAttrs(offer)
		res, err := c.exchange([]nlcore.Request{c.msg(cmdProtocol, 0, a)}, true)
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
	return c.nl.Ctr
}

// Close closes the socket.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nl.T.Close()
}

// SetReplyTimeout changes the bound on each wait for a reply datagram
// (Config.ReplyTimeout: zero means netlinkraw.DefaultReplyTimeout, negative
// no limit).
func (c *Conn) SetReplyTimeout(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nl.Timeout = netlinkraw.ReplyTimeout(d)
}

// msg builds an ipset message.
func (c *Conn) msg(cmd uint8, flags uint16, a *nlcore.Encoder) nlcore.Request {
	return nlcore.Request{Type: nlcore.NfnlType(nlcore.NfnlSubsysIPSet, cmd), Flags: flags, Payload: a.B}
}

// result is the kernel's answer to one message.
type result struct {
	code    int // positive errno, 0 for success
	line    uint32
	hasLine bool
	data    []message
}

// exchange sends msgs, as few sendmsg calls as the batch size and the
// receive buffer allow, and collects the answer to each (see
// nlcore.Conn.Exchange). The caller holds c.mu (or is newConn).
func (c *Conn) exchange(msgs []nlcore.Request, ackAll bool) ([]result, error) {
	answers, err := c.nl.Exchange(msgs, ackAll, nlcore.Limits{Bytes: c.batchBytes, Replies: c.replyBudget})
	if err != nil {
		return nil, err
	}
	results := make([]result, len(answers))
	for i, a := range answers {
		r := &results[i]
		r.data = a.Replies
		if a.Error == nil {
			continue
		}
		info, err := decodeAck(a.Error)
		if err != nil {
			return nil, err
		}
		r.code, r.line, r.hasLine = info.Code, info.Line, info.HasLine
	}
	return results, nil
}

// dump runs a LIST dump and decodes it. A dump the kernel marks
// interrupted (NLM_F_DUMP_INTR: the sets changed while it was read) is run
// again, up to netlinkraw.MaxDumpAttempts times.
func (c *Conn) dump(a *nlcore.Encoder) (*listing, error) {
	var l *listing
	err := c.nl.Dump(nlcore.DumpRequest{
		Type:    nlcore.NfnlType(nlcore.NfnlSubsysIPSet, cmdList),
		Payload: func(e *nlcore.Encoder) { e.B = append(e.B, a.B...) },
		Reset:   func() { l = newListing() },
		Each:    func(m *nlcore.Message) error { return l.add(m.Data) },
	})
	if errno, ok := err.(unix.Errno); ok {
		// The kernel's answer: ipset's own error numbers have names.
		return nil, errnoFromKernel(int(errno), false)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// simple sends one command and returns its error.
func (c *Conn) simple(cmd uint8, flags uint16, a *nlcore.Encoder) error {
	res, err := c.exchange([]nlcore.Request{c.msg(cmd, flags, a)}, true)
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
	a.Str(attrTypeName, string(t))
	a.U8(attrFamily, uint8(f))
	res, err := c.exchange([]nlcore.Request{c.msg(cmdType, 0, a)}, true)
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
