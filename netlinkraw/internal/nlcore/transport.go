package nlcore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Counters count the traffic of a connection, for benchmarks and metrics.
type Counters struct {
	Sendmsg          uint64 // send system calls (batches and requests)
	Recvmsg          uint64 // receive system calls
	MessagesSent     uint64 // netlink messages sent
	MessagesReceived uint64 // netlink messages received (replies, ACKs, errors)
	BytesSent        uint64
	BytesReceived    uint64
}

// Transport moves pre-encoded messages to the kernel and replies back,
// counting its system calls and bytes in ctr.
type Transport interface {
	// Send writes b, one or more complete netlink messages, in one
	// sendmsg.
	Send(b []byte, ctr *Counters) error
	// Receive reads the next reply unit: one datagram from a socket, or
	// one whole reply from a netlink.Conn that hides datagrams, waiting
	// until deadline at most (the zero time: no limit). A passed deadline
	// is an error matching os.ErrDeadlineExceeded.
	Receive(deadline time.Time, ctr *Counters) ([]Message, error)
	// WholeDumps reports whether Receive returns whole multi-part dumps
	// (with the final DONE message removed).
	WholeDumps() bool
	// Close closes the connection.
	Close() error
}

// Socket is a Transport over a real netlink socket: one system call per
// send and per received datagram.
type Socket struct {
	nc   *netlink.Conn
	rc   syscall.RawConn
	buf  []byte
	msgs []Message
}

// NewSocket makes a Socket of an open netlink connection that has a
// socket underneath, with a receive buffer of bufSize bytes (the largest
// datagram the family sends). It fails when nc has no socket (a fake).
func NewSocket(nc *netlink.Conn, bufSize int) (*Socket, error) {
	rc, err := nc.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &Socket{nc: nc, rc: rc, buf: make([]byte, bufSize)}, nil
}

// Send implements Transport.
func (t *Socket) Send(b []byte, ctr *Counters) error {
	var serr error
	err := t.rc.Write(func(fd uintptr) bool {
		ctr.Sendmsg++
		_, serr = unix.SendmsgN(int(fd), b, nil, nil, 0)
		return serr != unix.EAGAIN && serr != unix.EINTR
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return os.NewSyscallError("sendmsg", err)
	}
	ctr.BytesSent += uint64(len(b))
	return nil
}

// Receive implements Transport.
func (t *Socket) Receive(deadline time.Time, ctr *Counters) ([]Message, error) {
	var (
		n, rflags int
		rerr      error
	)
	if err := t.nc.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	err := t.rc.Read(func(fd uintptr) bool {
		ctr.Recvmsg++
		n, _, rflags, _, rerr = unix.Recvmsg(int(fd), t.buf, nil, 0)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, ReceiveError(err)
	}
	if rflags&unix.MSG_TRUNC != 0 {
		return nil, fmt.Errorf("recvmsg: datagram larger than %d bytes", len(t.buf))
	}
	ctr.BytesReceived += uint64(n)
	t.msgs, err = ParseMessages(t.msgs[:0], t.buf[:n])
	return t.msgs, err
}

// ReceiveError is the error of a failed recvmsg: ENOBUFS says the kernel
// dropped answers because the socket's receive buffer was full.
func ReceiveError(err error) error {
	err = os.NewSyscallError("recvmsg", err)
	if errors.Is(err, unix.ENOBUFS) {
		return fmt.Errorf("kernel answers were lost (socket receive buffer overrun): %w", err)
	}
	return err
}

// WholeDumps implements Transport: a socket returns datagrams.
func (t *Socket) WholeDumps() bool { return false }

// Close implements Transport.
func (t *Socket) Close() error { return t.nc.Close() }

// SetBuffers asks for socket buffers of snd and rcv bytes, forced past the
// sysctl limits where the process may (SO_SNDBUFFORCE, SO_RCVBUFFORCE, with
// CAP_NET_ADMIN), else within them (SO_SNDBUF, SO_RCVBUF); a size of 0
// leaves that buffer alone. It returns the sizes the kernel granted, as
// getsockopt reports them (doubled).
func (t *Socket) SetBuffers(snd, rcv int) (gotSnd, gotRcv int, err error) {
	var serr error
	cerr := t.rc.Control(func(fd uintptr) {
		f := int(fd)
		for _, b := range []struct{ force, plain, size int }{
			{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, snd},
			{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, rcv},
		} {
			if b.size <= 0 {
				continue
			}
			if unix.SetsockoptInt(f, unix.SOL_SOCKET, b.force, b.size) != nil {
				if err := unix.SetsockoptInt(f, unix.SOL_SOCKET, b.plain, b.size); err != nil {
					serr = fmt.Errorf("set socket buffer: %w", err)
					return
				}
			}
		}
		gotSnd, serr = unix.GetsockoptInt(f, unix.SOL_SOCKET, unix.SO_SNDBUF)
		if serr != nil {
			return
		}
		gotRcv, serr = unix.GetsockoptInt(f, unix.SOL_SOCKET, unix.SO_RCVBUF)
	})
	if cerr != nil {
		return 0, 0, cerr
	}
	return gotSnd, gotRcv, serr
}

// SetAcks turns on capped ACKs (errors carry no copy of the request's
// payload) and, with ext, extended ACKs (errors may carry the kernel's
// explanation). Both are optional: old kernels lack them.
func (t *Socket) SetAcks(ext bool) error {
	return t.rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
		if ext {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
		}
	})
}

// ConnTransport goes through a netlink.Conn that offers no system-call
// access, such as a fake from nltest or ipvstest. The messages and
// semantics are the same; netlink.Conn reassembles multi-part replies.
type ConnTransport struct {
	NC *netlink.Conn
}

// Send implements Transport.
func (t *ConnTransport) Send(b []byte, ctr *Counters) error {
	var msgs []netlink.Message
	for len(b) >= HdrLen {
		l := int(Native.Uint32(b))
		msgs = append(msgs, netlink.Message{
			Header: netlink.Header{
				Length:   uint32(l),
				Type:     netlink.HeaderType(Native.Uint16(b[4:])),
				Flags:    netlink.HeaderFlags(Native.Uint16(b[6:])),
				Sequence: Native.Uint32(b[8:]),
			},
			Data: append([]byte(nil), b[HdrLen:l]...),
		})
		b = b[min(align4(l), len(b)):]
	}
	ctr.Sendmsg++
	if _, err := t.NC.SendMessages(msgs); err != nil {
		return err
	}
	for _, m := range msgs {
		ctr.BytesSent += uint64(m.Header.Length)
	}
	return nil
}

// Receive implements Transport.
func (t *ConnTransport) Receive(deadline time.Time, ctr *Counters) ([]Message, error) {
	ctr.Recvmsg++
	// A connection without deadlines (nltest) fails the call; its
	// receives do not block anyway.
	_ = t.NC.SetReadDeadline(deadline)
	msgs, err := t.NC.Receive()
	if err != nil {
		var oe *netlink.OpError
		var errno unix.Errno
		if errors.As(err, &oe) && oe.Sequence != 0 && errors.As(oe.Err, &errno) {
			return []Message{{Type: TypeError, Seq: oe.Sequence, Errno: int32(errno), Ext: oe.Message}}, nil
		}
		return nil, err
	}
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		ctr.BytesReceived += uint64(HdrLen + len(m.Data))
		mm := Message{
			Type:  uint16(m.Header.Type),
			Flags: uint16(m.Header.Flags),
			Seq:   m.Header.Sequence,
			Data:  m.Data,
		}
		if mm.Type == TypeError {
			if len(mm.Data) < 4 {
				return nil, errors.New("netlink error message without an error number")
			}
			mm.Errno = -int32(Native.Uint32(mm.Data))
		}
		out = append(out, mm)
	}
	return out, nil
}

// WholeDumps implements Transport: netlink.Conn reassembles dumps.
func (t *ConnTransport) WholeDumps() bool { return true }

// Close implements Transport.
func (t *ConnTransport) Close() error { return t.NC.Close() }

// DialSocket opens a netlink socket of protocol proto (unix.NETLINK_*) in
// the network namespace netns (a file descriptor; 0: the current one),
// with a receive buffer for datagrams of up to bufSize bytes.
func DialSocket(proto, netns, bufSize int) (*netlink.Conn, *Socket, error) {
	nc, err := netlink.Dial(proto, &netlink.Config{NetNS: netns})
	if err != nil {
		return nil, nil, err
	}
	s, err := NewSocket(nc, bufSize)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, s, nil
}
