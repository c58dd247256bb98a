//go:build linux

// Package link manages what the IPVS sinks need from rtnetlink: the dummy
// link that holds the virtual IPs (kube-ipvs0), the /32 and /128 addresses
// bound on it, and the listing of every link's addresses (host/addrwatch
// picks the node's among them and follows their changes). It is
// a thin layer over github.com/jsimonetti/rtnetlink/v2, working in a chosen
// network namespace.
package link

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw"
)

// DefaultDummy is the name kube-proxy gives the link holding the VIPs.
const DefaultDummy = "kube-ipvs0"

// Config configures Dial.
type Config struct {
	// NetNS is a file descriptor of the network namespace to work in; 0
	// means the caller's. Dial keeps its own duplicate.
	NetNS int
	// ReplyTimeout bounds each wait for a reply from the kernel: a call
	// whose reply does not come within it fails with an error matching
	// netlinkraw.ErrReplyTimeout, and the next call works on fresh
	// sockets. Zero means netlinkraw.DefaultReplyTimeout; negative, no
	// limit.
	ReplyTimeout time.Duration
}

// Conn is an rtnetlink connection in one network namespace. It is not safe
// for concurrent use.
type Conn struct {
	c *rtnetlink.Conn
	// netns is Dial's duplicate of Config.NetNS (0: the caller's
	// namespace), for dialing again.
	netns int
	// raw carries batches of address messages (rtnetlink's Conn sends one
	// request at a time); dialed on first use.
	raw     *netlink.Conn
	timeout time.Duration
	// sendmsg, messages and replies count the address batches' traffic
	// (Stats); atomic, so that Stats may run beside a batch.
	sendmsg, messages, replies atomic.Uint64
	// stale is set when a wait timed out: a late reply may still come on
	// the sockets, so they are replaced before the next call.
	stale bool
}

// Error is the error of one operation on one object.
type Error struct {
	// Op is the operation ("ensure dummy", "add address"...).
	Op string
	// Object names the link or address.
	Object string
	// Addr is the address an address operation failed on (the zero Addr
	// otherwise).
	Addr netip.Addr
	// Err is the cause, often a unix.Errno.
	Err error
}

// Error formats the error as "link: OP OBJECT: CAUSE".
func (e *Error) Error() string { return "link: " + e.Op + " " + e.Object + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrNotDummy reports that a link with the dummy's name exists but is of
// another kind.
var ErrNotDummy = errors.New("link exists and is not a dummy link")

// Dial opens an rtnetlink socket in the configured namespace.
func Dial(cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	ns := 0
	if cfg.NetNS != 0 {
		fd, err := unix.FcntlInt(uintptr(cfg.NetNS), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, &Error{Op: "dial", Object: "rtnetlink", Err: fmt.Errorf("duplicate the namespace descriptor: %w", err)}
		}
		ns = fd
	}
	c, err := rtnetlink.Dial(socketConfig(ns))
	if err != nil {
		if ns != 0 {
			unix.Close(ns)
		}
		return nil, &Error{Op: "dial", Object: "rtnetlink", Err: err}
	}
	return &Conn{c: c, netns: ns, timeout: netlinkraw.ReplyTimeout(cfg.ReplyTimeout)}, nil
}

// messageBuffer holds the largest datagram the kernel sends (dump datagrams
// are capped near 32 KiB). With a fixed buffer, mdlayher/netlink reads each
// datagram with one recvmsg instead of peeking at its size first.
const messageBuffer = 64 << 10

func socketConfig(netns int) *netlink.Config {
	return &netlink.Config{NetNS: netns, MessageBufferSize: messageBuffer}
}

// Close closes the sockets.
func (c *Conn) Close() error {
	if c.raw != nil {
		c.raw.Close()
	}
	if c.netns != 0 {
		unix.Close(c.netns)
		c.netns = 0
	}
	if c.c == nil {
		return nil
	}
	return c.c.Close()
}

// call runs f, one request on the rtnetlink socket, within the reply
// timeout.
func (c *Conn) call(f func() error) error {
	if err := c.fresh(); err != nil {
		return err
	}
	if err := c.c.SetReadDeadline(netlinkraw.ReplyDeadline(c.timeout)); err != nil {
		return err
	}
	return c.timedOut(f())
}

// timedOut returns err as the caller sees it, and marks the sockets stale
// when it is a timeout.
func (c *Conn) timedOut(err error) error {
	err = netlinkraw.ReplyError(err, c.timeout)
	if errors.Is(err, netlinkraw.ErrReplyTimeout) {
		c.stale = true
	}
	return err
}

// fresh replaces the sockets after a timeout, so that a late reply to an
// abandoned request cannot be taken for the answer to a new one.
func (c *Conn) fresh() error {
	if !c.stale {
		return nil
	}
	if c.raw != nil {
		c.raw.Close()
		c.raw = nil
	}
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
	nc, err := rtnetlink.Dial(socketConfig(c.netns))
	if err != nil {
		return &Error{Op: "dial", Object: "rtnetlink", Err: err}
	}
	c.c, c.stale = nc, false
	return nil
}

// Link is a network interface as this package reports it.
type Link struct {
	Index    uint32
	Name     string
	Kind     string // driver kind ("dummy", "veth"...), "" for physical links
	Up       bool   // administratively up (IFF_UP)
	Loopback bool
}

// Links lists the namespace's links.
func (c *Conn) Links() ([]Link, error) {
	var ms []rtnetlink.LinkMessage
	err := c.call(func() (err error) { ms, err = c.c.Link.List(); return err })
	if err != nil {
		return nil, &Error{Op: "list", Object: "links", Err: err}
	}
	out := make([]Link, 0, len(ms))
	for _, m := range ms {
		out = append(out, toLink(m))
	}
	return out, nil
}

func toLink(m rtnetlink.LinkMessage) Link {
	l := Link{Index: m.Index, Up: m.Flags&unix.IFF_UP != 0, Loopback: m.Flags&unix.IFF_LOOPBACK != 0}
	if m.Attributes != nil {
		l.Name = m.Attributes.Name
		if m.Attributes.Info != nil {
			l.Kind = m.Attributes.Info.Kind
		}
	}
	return l
}

// LinkByName returns the link named name; the error wraps unix.ENODEV when
// there is none.
func (c *Conn) LinkByName(name string) (Link, error) {
	links, err := c.Links()
	if err != nil {
		return Link{}, err
	}
	for _, l := range links {
		if l.Name == name {
			return l, nil
		}
	}
	return Link{}, &Error{Op: "find", Object: "link " + name, Err: unix.ENODEV}
}

// EnsureDummy makes sure a dummy link named name exists and returns it. A
// new link is left down, as kube-proxy leaves kube-ipvs0: addresses on a
// down link are still local to the node. An existing link of another kind
// is an error wrapping ErrNotDummy.
func (c *Conn) EnsureDummy(name string) (Link, error) {
	l, err := c.LinkByName(name)
	if err == nil {
		if l.Kind != "dummy" {
			return Link{}, &Error{Op: "ensure dummy", Object: name, Err: fmt.Errorf("%w (kind %q)", ErrNotDummy, l.Kind)}
		}
		return l, nil
	}
	if !errors.Is(err, unix.ENODEV) {
		return Link{}, err
	}
	err = c.call(func() error {
		return c.c.Link.New(&rtnetlink.LinkMessage{
			Family:     unix.AF_UNSPEC,
			Attributes: &rtnetlink.LinkAttributes{Name: name, Info: &rtnetlink.LinkInfo{Kind: "dummy"}},
		})
	})
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return Link{}, &Error{Op: "ensure dummy", Object: name, Err: err}
	}
	return c.LinkByName(name)
}

// DeleteLink deletes the link named name. A missing link is not an error.
func (c *Conn) DeleteLink(name string) error {
	l, err := c.LinkByName(name)
	if errors.Is(err, unix.ENODEV) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.call(func() error { return c.c.Link.Delete(l.Index) }); err != nil && !errors.Is(err, unix.ENODEV) {
		return &Error{Op: "delete", Object: "link " + name, Err: err}
	}
	return nil
}

// addrMessage builds the message binding addr as a host address (/32 or
// /128) on link index.
func addrMessage(index uint32, addr netip.Addr) *rtnetlink.AddressMessage {
	family, bits := uint8(unix.AF_INET), uint8(32)
	var flags uint32
	if addr.Is6() {
		family, bits = unix.AF_INET6, 128
		flags = unix.IFA_F_NODAD // usable at once, no duplicate detection
	}
	ip := net.IP(addr.AsSlice())
	return &rtnetlink.AddressMessage{
		Family:       family,
		PrefixLength: bits,
		Scope:        unix.RT_SCOPE_UNIVERSE,
		Index:        index,
		Attributes:   &rtnetlink.AddressAttributes{Address: ip, Local: ip, Flags: flags},
	}
}

// AddAddresses binds each address as /32 or /128 on the link named name.
// Addresses already bound are not errors (EEXIST). The requests go in
// batches, many per sendmsg; every other failure is reported, naming the
// first failed address, and the other addresses are still bound.
func (c *Conn) AddAddresses(name string, addrs []netip.Addr) error {
	l, err := c.LinkByName(name)
	if err != nil {
		return err
	}
	if err := checkAddrs("add address", name, addrs); err != nil {
		return err
	}
	return c.batch("add address", name, unix.RTM_NEWADDR, netlink.Create|netlink.Excl, addrs, addrEncoder(l.Index), unix.EEXIST)
}

// DelAddresses unbinds each /32 or /128 address from the link named name.
// Addresses not bound are not errors (EADDRNOTAVAIL). Like AddAddresses, it
// sends batches and goes on past failures.
func (c *Conn) DelAddresses(name string, addrs []netip.Addr) error {
	l, err := c.LinkByName(name)
	if err != nil {
		return err
	}
	return c.batch("delete address", name, unix.RTM_DELADDR, 0, addrs, addrEncoder(l.Index), unix.EADDRNOTAVAIL)
}

// batchSize bounds the requests of one sendmsg. Only the last asks for an
// ACK, but every failed one is answered with its own error datagram, and
// all of them must fit the receive buffer.
const batchSize = 64

// addrEncoder encodes the address messages of link index for batch.
func addrEncoder(index uint32) func(netip.Addr) ([]byte, error) {
	return func(a netip.Addr) ([]byte, error) { return addrMessage(index, a).MarshalBinary() }
}

// batch sends one message per address (encoded by encode, of type typ),
// batchSize per sendmsg, and reads their answers. As the IPVS client
// does, only the last message of a sendmsg asks for an acknowledgement: the kernel handles the messages of
// one sendmsg in order, answers each failed one with an error carrying its
// sequence number, and answers the last one either way, so the answer to
// the last message ends the batch and proves the others without an error
// succeeded. With nothing failing, a batch costs one sendmsg and one reply.
func (c *Conn) batch(op, name string, typ netlink.HeaderType, flags netlink.HeaderFlags, addrs []netip.Addr, encode func(netip.Addr) ([]byte, error), tolerate unix.Errno) error {
	if len(addrs) == 0 {
		return nil
	}
	if err := c.fresh(); err != nil {
		return err
	}
	if c.raw == nil {
		raw, err := netlink.Dial(unix.NETLINK_ROUTE, socketConfig(c.netns))
		if err != nil {
			return &Error{Op: "dial", Object: "rtnetlink", Err: err}
		}
		c.raw = raw
	}
	var failed []error
	msgs := make([]netlink.Message, 0, batchSize)
	for start := 0; start < len(addrs); start += batchSize {
		chunk := addrs[start:min(start+batchSize, len(addrs))]
		msgs = msgs[:0]
		for i, a := range chunk {
			data, err := encode(a.Unmap())
			if err != nil {
				return &Error{Op: op, Object: a.String() + " on " + name, Err: err}
			}
			f := netlink.Request | flags
			if i == len(chunk)-1 {
				f |= netlink.Acknowledge
			}
			msgs = append(msgs, netlink.Message{Header: netlink.Header{Type: typ, Flags: f}, Data: data})
		}
		batchErr := func(err error) error {
			return joinFailed(&Error{Op: op, Object: fmt.Sprintf("%d addresses on %s (not answered: each may or may not be done)", len(chunk), name), Err: err}, failed)
		}
		sent, err := c.raw.SendMessages(msgs)
		if err != nil {
			return batchErr(err)
		}
		c.sendmsg.Add(1)
		c.messages.Add(uint64(len(sent)))
		first, last := sent[0].Header.Sequence, sent[len(sent)-1].Header.Sequence
		if err := c.raw.SetReadDeadline(netlinkraw.ReplyDeadline(c.timeout)); err != nil {
			return batchErr(err)
		}
		for {
			replies, err := c.raw.Receive()
			c.replies.Add(1)
			var seq uint32
			switch {
			case err == nil:
				// An acknowledgement (the last message succeeded), or an
				// answer to no message of this batch.
				if len(replies) == 0 {
					continue
				}
				seq = replies[len(replies)-1].Header.Sequence
			default:
				var oe *netlink.OpError
				var errno unix.Errno
				if !errors.As(err, &oe) || !errors.As(err, &errno) || oe.Sequence == 0 {
					// A transport failure (a timeout, a closed socket): the
					// answers not read are lost.
					return batchErr(c.timedOut(err))
				}
				seq = oe.Sequence
				if i := seq - first; i <= last-first && errno != tolerate {
					a := chunk[i].Unmap()
					failed = append(failed, &Error{Op: op, Object: a.String() + " on " + name, Addr: a, Err: errno})
				}
			}
			if seq == last {
				break
			}
		}
	}
	if len(failed) > 0 {
		return &BatchError{Errors: failed}
	}
	return nil
}

// Stats counts the address batches' traffic on a connection.
type Stats struct {
	// Sendmsg counts the batches sent, one sendmsg each; Messages the
	// address messages they carried.
	Sendmsg, Messages uint64
	// Replies counts the answers read, one recvmsg each: one per batch
	// and one per failed address.
	Replies uint64
}

// Stats returns the counts so far. Unlike the other methods, it may be
// called while another goroutine uses the connection.
func (c *Conn) Stats() Stats {
	return Stats{Sendmsg: c.sendmsg.Load(), Messages: c.messages.Load(), Replies: c.replies.Load()}
}

// BatchError is the error of AddAddresses or DelAddresses when some
// addresses failed: one *Error per failed address (with its Addr), the
// other addresses done. errors.Is and errors.As see every one.
type BatchError struct {
	Errors []error
}

// Error shows the first failure and how many more there are.
func (e *BatchError) Error() string {
	if len(e.Errors) == 1 {
		return e.Errors[0].Error()
	}
	return fmt.Sprintf("%v (and %d more addresses failed)", e.Errors[0], len(e.Errors)-1)
}

// Unwrap returns every failure.
func (e *BatchError) Unwrap() []error { return e.Errors }

// joinFailed is a transport error, with the address failures read before
// it.
func joinFailed(err error, failed []error) error {
	if len(failed) == 0 {
		return err
	}
	return errors.Join(err, &BatchError{Errors: failed})
}

// Addr is an address bound on a link.
type Addr struct {
	Prefix netip.Prefix // the address and its prefix length
	Index  uint32       // the link's index
}

// ListAddresses returns every address bound on every link of the
// namespace, with its link's index, in the kernel's order.
func (c *Conn) ListAddresses() ([]Addr, error) { return c.addresses() }

func (c *Conn) addresses() ([]Addr, error) {
	var ms []rtnetlink.AddressMessage
	err := c.call(func() (err error) { ms, err = c.c.Address.List(); return err })
	if err != nil {
		return nil, &Error{Op: "list", Object: "addresses", Err: err}
	}
	out := make([]Addr, 0, len(ms))
	for _, m := range ms {
		if m.Attributes == nil {
			continue
		}
		ip := m.Attributes.Local
		if ip == nil {
			ip = m.Attributes.Address
		}
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			continue
		}
		if m.Family == unix.AF_INET {
			a = a.Unmap()
		}
		p, err := a.Prefix(int(m.PrefixLength))
		if err != nil {
			continue
		}
		out = append(out, Addr{Prefix: netip.PrefixFrom(a, p.Bits()), Index: m.Index})
	}
	return out, nil
}

// Addresses returns the addresses bound on the link named name, sorted.
func (c *Conn) Addresses(name string) ([]netip.Addr, error) {
	l, err := c.LinkByName(name)
	if err != nil {
		return nil, err
	}
	all, err := c.addresses()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range all {
		if a.Index == l.Index {
			out = append(out, a.Prefix.Addr())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
}
