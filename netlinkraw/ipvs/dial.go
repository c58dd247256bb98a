package ipvs

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	uapi "github.com/proxysinks/proxysinks/netlinkraw/internal/ipvsuapi"
	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// Options configure Dial. The zero value dials into the calling thread's
// network namespace with 4 MiB socket buffers.
type Options struct {
	// NetNS is a file descriptor of the network namespace to program (for
	// example from /proc/PID/ns/net or nstest). Zero means the current one.
	NetNS int
	// NetNSPath is a path that opens the namespace (e.g.
	// /var/run/netns/NAME); used when NetNS is zero.
	NetNSPath string
	// SendBuffer and ReceiveBuffer are the socket buffer sizes to ask for,
	// in bytes (default 4 MiB each; the kernel doubles them). They are
	// forced past the sysctl limits when the process has CAP_NET_ADMIN.
	// A larger send buffer allows larger batches per sendmsg; the receive
	// buffer must hold the error replies of a batch in which everything
	// fails.
	SendBuffer, ReceiveBuffer int
	// ReplyTimeout bounds the wait for each reply datagram: a kernel that
	// does not answer within it (a lost reply) fails the call with an
	// error matching netlinkraw.ErrReplyTimeout instead of blocking it
	// forever. Zero means netlinkraw.DefaultReplyTimeout; negative
	// disables it (netlinkraw.ReplyTimeout).
	ReplyTimeout time.Duration
}

const defaultBuffer = 4 << 20

// Dial opens a connection to IPVS in the namespace the options name, or
// the current one. It returns an error matching ErrNotSupported when the
// kernel has no IPVS.
func Dial(o *Options) (*Conn, error) {
	if o == nil {
		o = &Options{}
	}
	ns := o.NetNS
	if ns == 0 && o.NetNSPath != "" {
		fd, err := unix.Open(o.NetNSPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("ipvs: dial: open network namespace %s: %w", o.NetNSPath, err)
		}
		defer unix.Close(fd)
		ns = fd
	}
	nc, err := netlink.Dial(unix.NETLINK_GENERIC, &netlink.Config{NetNS: ns})
	if err != nil {
		return nil, fmt.Errorf("ipvs: dial generic netlink: %w", err)
	}
	return newConn(nc, o)
}

// NewConn makes a Conn of an open generic netlink connection, which it
// takes over (Close closes it). Over a real socket it sends and receives
// with its own system calls; over a connection without one (a fake from
// nltest, or ipvstest's socket) it goes through nc's Send and Receive.
func NewConn(nc *netlink.Conn) (*Conn, error) {
	return newConn(nc, &Options{})
}

func newConn(nc *netlink.Conn, o *Options) (*Conn, error) {
	fam, err := genetlink.NewConn(nc).GetFamily(uapi.GenlName)
	if err != nil {
		nc.Close()
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: generic netlink family %q: %w", ErrNotSupported, uapi.GenlName, err)
		}
		return nil, fmt.Errorf("ipvs: look up generic netlink family %q: %w", uapi.GenlName, err)
	}
	c := &Conn{family: fam.ID}
	s, err := nlcore.NewSocket(nc, receiveBufferSize)
	if err != nil {
		// No socket underneath (a test fake): fixed, modest batches.
		c.nl = nlcore.NewConn(&nlcore.ConnTransport{NC: nc}, o.ReplyTimeout)
		c.maxMsgs, c.maxBytes = 1024, 1<<20
		return c, nil
	}
	c.nl = nlcore.NewConn(s, o.ReplyTimeout)
	if err := setBuffers(c.nl, s, o); err != nil {
		nc.Close()
		return nil, fmt.Errorf("ipvs: dial: %w", err)
	}
	c.setLimits(c.nl.SendBuf, c.nl.RecvBuf)
	return c, nil
}

// receiveBufferSize holds the largest datagram the kernel sends: dump
// datagrams are capped near 32 KiB.
const receiveBufferSize = 64 << 10

// setBuffers sizes the socket buffers (default 4 MiB each) and batches, and
// turns on capped and extended ACKs.
func setBuffers(nl *nlcore.Conn, s *nlcore.Socket, o *Options) error {
	want := func(v int) int {
		if v <= 0 {
			return defaultBuffer
		}
		return v
	}
	snd, rcv, err := s.SetBuffers(want(o.SendBuffer), want(o.ReceiveBuffer))
	if err != nil {
		return err
	}
	nl.SendBuf, nl.RecvBuf = snd, rcv
	return s.SetAcks(true)
}

// ackTruesize is a generous estimate of the receive-buffer memory one
// queued error or ACK takes (the socket buffer overhead dominates).
const ackTruesize = 2048

// setLimits sizes batches: one sendmsg must fit the send buffer (the
// kernel refuses more than sk_sndbuf-32 bytes), and the replies of a batch
// that fails entirely must fit the receive buffer, or the kernel drops
// them.
func (c *Conn) setLimits(snd, rcv int) {
	c.maxBytes = snd - 32 - 4096
	if c.maxBytes < 4096 {
		c.maxBytes = 4096
	}
	c.maxMsgs = rcv / ackTruesize
	if c.maxMsgs < 16 {
		c.maxMsgs = 16
	}
}
