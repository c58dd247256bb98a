//go:build linux

package ipset

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Dial opens an nfnetlink socket in the configured namespace and negotiates
// the ipset protocol (7, or 6 on older kernels).
func Dial(cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	nc, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: cfg.NetNS})
	if err != nil {
		return nil, &OpError{Op: "dial", Object: "nfnetlink", Err: err}
	}
	batch := cfg.BatchBytes
	if batch <= 0 {
		batch = defaultBatchBytes
	}
	t, batch, budget, err := newSocketTransport(nc, batch)
	if err != nil {
		nc.Close()
		return nil, &OpError{Op: "dial", Object: "nfnetlink", Err: err}
	}
	c := *cfg
	c.BatchBytes = batch
	c.replyBudget = budget
	return newConn(t, c)
}

// socketTransport is a netlink socket: mdlayher/netlink sends many
// messages per sendmsg; receiving is a plain recvmsg on the same socket, so
// error messages keep their payload (the failing line number).
type socketTransport struct {
	c   *netlink.Conn
	rc  syscall.RawConn
	buf []byte
}

// recvBufSize holds any datagram the kernel sends ipset clients: dump
// datagrams are at most 32 KiB, copies of failed requests at most one
// message (maxADTBytes plus headers).
const recvBufSize = 256 << 10

// newSocketTransport sizes the socket buffers for batches of batch bytes
// and returns the batch size that fits. The receive buffer must hold the
// answers to a whole batch, which the kernel queues before sendmsg returns:
// at worst a copy of every message.
func newSocketTransport(nc *netlink.Conn, batch int) (*socketTransport, int, int, error) {
	rc, err := nc.SyscallConn()
	if err != nil {
		return nil, 0, 0, err
	}
	var budget int
	_ = nc.SetOption(netlink.CapAcknowledge, true)
	var serr error
	cerr := rc.Control(func(fd uintptr) {
		set := func(force, plain, v int) int {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, force, v) != nil {
				_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, plain, v)
			}
			got, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, plain)
			if err != nil {
				serr = err
			}
			return got
		}
		snd := set(unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, batch+batch/4)
		rcv := set(unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, 8*batch)
		// The kernel reports doubled values; keep a margin anyway.
		if limit := snd / 2; batch > limit {
			batch = limit
		}
		// The reported size counts socket buffer overhead (it is what
		// the kernel compares against); keep half of it as a margin.
		budget = rcv / 2
		if limit := budget / 2; batch > limit {
			batch = limit
		}
	})
	if cerr != nil {
		return nil, 0, 0, cerr
	}
	if serr != nil {
		return nil, 0, 0, serr
	}
	if batch < 64<<10 {
		batch = 64 << 10
	}
	return &socketTransport{c: nc, rc: rc, buf: make([]byte, recvBufSize)}, batch, budget, nil
}

func (t *socketTransport) send(msgs []netlink.Message, st *Stats) error {
	for i := range msgs {
		st.BytesSent += uint64(nlmsgHdrLen + align4(len(msgs[i].Data)))
	}
	st.Sendmsg++
	st.MessagesSent += uint64(len(msgs))
	_, err := t.c.SendMessages(msgs)
	return err
}

func (t *socketTransport) recv(deadline time.Time, st *Stats) ([]message, error) {
	var (
		n, flags int
		rerr     error
	)
	if err := t.c.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	err := t.rc.Read(func(fd uintptr) bool {
		st.Recvmsg++
		n, _, flags, _, rerr = unix.Recvmsg(int(fd), t.buf, nil, 0)
		return !errors.Is(rerr, unix.EAGAIN) && !errors.Is(rerr, unix.EINTR)
	})
	if err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	if rerr != nil {
		if errors.Is(rerr, unix.ENOBUFS) {
			return nil, fmt.Errorf("receive: kernel answers were lost (socket receive buffer overrun): %w", rerr)
		}
		return nil, fmt.Errorf("receive: %w", rerr)
	}
	if flags&unix.MSG_TRUNC != 0 {
		return nil, fmt.Errorf("receive: datagram larger than %d bytes truncated", len(t.buf))
	}
	st.BytesReceived += uint64(n)
	ms, err := parseMessages(t.buf[:n])
	st.MessagesReceived += uint64(len(ms))
	return ms, err
}

func (t *socketTransport) close() error { return t.c.Close() }
