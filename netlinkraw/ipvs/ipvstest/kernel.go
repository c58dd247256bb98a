// Package ipvstest is a fake kernel IPVS for unit tests: it speaks the
// generic netlink protocol of linux/ip_vs.h behind a netlink.Conn and
// keeps services and destinations with the kernel's semantics (EEXIST,
// ESRCH, ENOENT, ERANGE, flag and netmask handling, dump contents), so code
// that programs IPVS can be tested on any machine.
//
// The fake passes the same contract suite as the real kernel (see the ipvs
// package tests), which keeps the two from drifting apart. It parses and
// builds messages with its own code, independent of package ipvs's
// encoder, so a bug in one is not mirrored in the other.
//
// Like the kernel, the fake processes every message of a batch in order,
// queues one error reply per failed message carrying its sequence number,
// and an ACK only for messages that ask for one. Each reply is its own
// datagram, handed out one per receive; dumps come in datagrams of at most
// 32 KiB. A receive with nothing queued waits until the connection's read
// deadline, as a socket does, and fails at once when there is none instead
// of blocking forever.
//
// Faults can be injected for tests of error handling (see faults.go): a
// kernel error on the Nth operation, lost and delayed replies, failed
// receives (ENOBUFS), interrupted dumps.
//
// Not emulated: traffic (counters and connection counts stay zero), the
// sync daemon, the destination trash list, and address checks that need a
// routing table (IPv4 destinations are rejected only when zero-network,
// multicast or limited broadcast).
package ipvstest

import (
	"encoding/binary"
	"errors"
	"sync"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// FamilyID is the generic netlink family number the fake gives "IPVS".
const FamilyID = 0x1d

// DefaultSchedulers are the schedulers of a Debian kernel's IPVS modules.
var DefaultSchedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos"}

// Kernel is one fake network namespace's IPVS. Every connection dialed
// from it sees the same services. It is safe for concurrent use.
type Kernel struct {
	mu         sync.Mutex
	absent     bool
	schedulers map[string]bool
	services   []*service // creation order; dumps list address-keyed first
	timeouts   [3]uint32  // tcp, tcpfin, udp
	interrupt  int
	stats      Stats
	faults     faults
}

// Stats count what the fake received, so tests can assert how a client
// batches.
type Stats struct {
	Sends        int // SendMessages/Send calls (sendmsg)
	Messages     int // messages received
	AckRequested int // messages that carried NLM_F_ACK
	Errors       int // error replies queued
}

// Option configures New.
type Option func(*Kernel)

// WithoutIPVS makes the fake behave like a kernel without the ip_vs
// module: the generic netlink family "IPVS" does not exist.
func WithoutIPVS() Option { return func(k *Kernel) { k.absent = true } }

// WithSchedulers replaces the schedulers the fake knows.
func WithSchedulers(names ...string) Option {
	return func(k *Kernel) {
		k.schedulers = map[string]bool{}
		for _, n := range names {
			k.schedulers[n] = true
		}
	}
}

// New returns an empty fake IPVS with the kernel's default timeouts.
func New(opts ...Option) *Kernel {
	k := &Kernel{timeouts: [3]uint32{900, 120, 300}}
	WithSchedulers(DefaultSchedulers...)(k)
	for _, o := range opts {
		o(k)
	}
	return k
}

// Dial returns a new netlink connection to the fake, for ipvs.NewConn.
func (k *Kernel) Dial() *netlink.Conn {
	c := &conn{k: k, wake: make(chan struct{}, 1)}
	return netlink.NewConn(&socket{c: c}, socketPID)
}

// InterruptDumps marks the next n dumps as interrupted by concurrent
// changes (NLM_F_DUMP_INTR), as the kernel does when its tables change
// while a dump is read.
func (k *Kernel) InterruptDumps(n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.interrupt = n
}

// Stats returns the traffic counted so far.
func (k *Kernel) Stats() Stats {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stats
}

// conn is one connection's receive queue.
type conn struct {
	k     *Kernel
	mu    sync.Mutex
	queue []datagram // datagrams waiting to be received
	// wake is signalled when a datagram is queued.
	wake chan struct{}
}

// errWouldBlock is returned by a receive with no reply queued and no read
// deadline.
var errWouldBlock = errors.New("ipvstest: receive with no reply queued and no deadline (a real socket would block forever)")

// handle processes a batch of sent messages.
func (c *conn) handle(req []netlink.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.k.mu.Lock()
	defer c.k.mu.Unlock()
	c.k.stats.Sends++
	for _, m := range req {
		c.k.stats.Messages++
		if m.Header.Flags&netlink.Acknowledge != 0 {
			c.k.stats.AckRequested++
		}
		c.process(m)
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// process handles one message like netlink_rcv_skb: run it, then queue an
// error reply if it failed or an ACK if one was asked for.
func (c *conn) process(m netlink.Message) {
	var errno unix.Errno
	switch {
	case m.Header.Flags&netlink.Request == 0:
		// Not a request: the kernel skips it (and ACKs if asked).
	case m.Header.Type == unix.GENL_ID_CTRL:
		errno = c.ctrl(m)
	case m.Header.Type == FamilyID && !c.k.absent:
		if errno = c.k.faults.command(); errno == 0 {
			errno = c.ipvs(m)
		}
	default:
		errno = unix.ENOENT
	}
	if errno != 0 {
		c.k.stats.Errors++
	}
	if errno != 0 || m.Header.Flags&netlink.Acknowledge != 0 {
		c.push([]netlink.Message{ack(m, errno)})
	}
}

// ack builds an NLMSG_ERROR reply: the error code and the request's header
// (and, for a failure, its payload, as a socket without NETLINK_CAP_ACK
// gets).
func ack(req netlink.Message, errno unix.Errno) netlink.Message {
	b := make([]byte, 4, 4+16+len(req.Data))
	binary.NativeEndian.PutUint32(b, uint32(-int32(errno)))
	b = binary.NativeEndian.AppendUint32(b, req.Header.Length)
	b = binary.NativeEndian.AppendUint16(b, uint16(req.Header.Type))
	b = binary.NativeEndian.AppendUint16(b, uint16(req.Header.Flags))
	b = binary.NativeEndian.AppendUint32(b, req.Header.Sequence)
	b = binary.NativeEndian.AppendUint32(b, req.Header.PID)
	if errno != 0 {
		b = append(b, req.Data...)
	}
	return netlink.Message{
		Header: netlink.Header{Type: netlink.Error, Sequence: req.Header.Sequence, PID: req.Header.PID},
		Data:   b,
	}
}

// reply queues a single-message reply (a doit's answer).
func (c *conn) reply(req netlink.Message, cmd uint8, attrs []byte) {
	c.push([]netlink.Message{{
		Header: netlink.Header{Type: FamilyID, Sequence: req.Header.Sequence, PID: req.Header.PID},
		Data:   append([]byte{cmd, 1, 0, 0}, attrs...),
	}})
}

// maxDatagram is the size of the kernel's dump datagrams.
const maxDatagram = 32 << 10

// dump queues the entries of a dump in datagrams of at most 32 KiB, and
// the final NLMSG_DONE.
func (c *conn) dump(req netlink.Message, cmd uint8, entries [][]byte) {
	flags := netlink.Multi
	if c.k.interrupt > 0 {
		c.k.interrupt--
		flags |= netlink.DumpInterrupted
	}
	var (
		cur  []netlink.Message
		size int
	)
	for _, e := range entries {
		m := netlink.Message{
			Header: netlink.Header{Type: FamilyID, Flags: flags, Sequence: req.Header.Sequence, PID: req.Header.PID},
			Data:   append([]byte{cmd, 1, 0, 0}, e...),
		}
		l := 16 + len(m.Data)
		if size+l > maxDatagram && len(cur) > 0 {
			c.push(cur)
			cur, size = nil, 0
		}
		cur = append(cur, m)
		size += l
	}
	done := netlink.Message{
		Header: netlink.Header{Type: netlink.Done, Flags: flags, Sequence: req.Header.Sequence, PID: req.Header.PID},
		Data:   make([]byte, 4),
	}
	if size+20 > maxDatagram && len(cur) > 0 {
		c.push(cur)
		cur = nil
	}
	c.push(append(cur, done))
}

// ctrl answers CTRL_CMD_GETFAMILY for "IPVS".
func (c *conn) ctrl(m netlink.Message) unix.Errno {
	if len(m.Data) < 4 || m.Data[0] != unix.CTRL_CMD_GETFAMILY {
		return unix.EOPNOTSUPP
	}
	if m.Header.Flags&netlink.Dump == netlink.Dump {
		return unix.EOPNOTSUPP
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return unix.EINVAL
	}
	var name string
	for ad.Next() {
		if ad.Type() == unix.CTRL_ATTR_FAMILY_NAME {
			name = ad.String()
		}
	}
	if ad.Err() != nil {
		return unix.EINVAL
	}
	if name != "IPVS" || c.k.absent {
		return unix.ENOENT
	}
	ae := netlink.NewAttributeEncoder()
	ae.Uint16(unix.CTRL_ATTR_FAMILY_ID, FamilyID)
	ae.String(unix.CTRL_ATTR_FAMILY_NAME, "IPVS")
	ae.Uint32(unix.CTRL_ATTR_VERSION, 1)
	ae.Uint32(unix.CTRL_ATTR_HDRSIZE, 0)
	ae.Uint32(unix.CTRL_ATTR_MAXATTR, 6)
	b, _ := ae.Encode()
	c.push([]netlink.Message{{
		Header: netlink.Header{Type: unix.GENL_ID_CTRL, Sequence: m.Header.Sequence, PID: m.Header.PID},
		Data:   append([]byte{unix.CTRL_CMD_NEWFAMILY, 2, 0, 0}, b...),
	}})
	return 0
}
