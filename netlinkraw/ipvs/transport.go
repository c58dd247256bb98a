package ipvs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// message is one received netlink message. For error/ACK messages errno
// holds the (positive) error number, 0 for an ACK, and ext the kernel's
// extended-ACK text if any. data is only valid until the next receive.
type message struct {
	typ   uint16
	flags uint16
	seq   uint32
	data  []byte
	errno int32
	ext   string
}

// transport moves pre-encoded messages to the kernel and replies back.
type transport interface {
	// send writes b, one or more complete netlink messages, in one
	// sendmsg.
	send(b []byte) error
	// receive reads the next reply unit: one datagram from a socket, or
	// one whole reply from a netlink.Conn that hides datagrams, waiting
	// until deadline at most (the zero time: no limit).
	receive(deadline time.Time) ([]message, error)
	// wholeDumps reports whether receive returns whole multi-part dumps
	// (with the final DONE message removed).
	wholeDumps() bool
	close() error
}

// rawTransport speaks to a real netlink socket with one system call per
// send and per received datagram, and counts them.
type rawTransport struct {
	nc   *netlink.Conn
	rc   syscall.RawConn
	buf  []byte
	msgs []message
	ctr  *Counters
}

// receiveBufferSize holds the largest datagram the kernel sends: dump
// datagrams are capped near 32 KiB.
const receiveBufferSize = 64 << 10

func (t *rawTransport) send(b []byte) error {
	var serr error
	err := t.rc.Write(func(fd uintptr) bool {
		t.ctr.Sendmsg++
		_, serr = unix.SendmsgN(int(fd), b, nil, nil, 0)
		return serr != unix.EAGAIN && serr != unix.EINTR
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return os.NewSyscallError("sendmsg", err)
	}
	t.ctr.BytesSent += uint64(len(b))
	return nil
}

func (t *rawTransport) receive(deadline time.Time) ([]message, error) {
	var (
		n, rflags int
		rerr      error
	)
	if err := t.nc.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	err := t.rc.Read(func(fd uintptr) bool {
		t.ctr.Recvmsg++
		n, _, rflags, _, rerr = unix.Recvmsg(int(fd), t.buf, nil, 0)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, os.NewSyscallError("recvmsg", err)
	}
	if rflags&unix.MSG_TRUNC != 0 {
		return nil, fmt.Errorf("recvmsg: datagram larger than %d bytes", len(t.buf))
	}
	t.ctr.BytesReceived += uint64(n)
	t.msgs = t.msgs[:0]
	t.msgs, err = parseMessages(t.msgs, t.buf[:n])
	t.ctr.MessagesReceived += uint64(len(t.msgs))
	return t.msgs, err
}

func (t *rawTransport) wholeDumps() bool { return false }

func (t *rawTransport) close() error { return t.nc.Close() }

// parseMessages splits a datagram into messages, appending to dst.
func parseMessages(dst []message, b []byte) ([]message, error) {
	for len(b) >= nlmsgHdrLen {
		l := int(native.Uint32(b))
		if l < nlmsgHdrLen || l > len(b) {
			return dst, fmt.Errorf("malformed netlink message: length %d of %d bytes", l, len(b))
		}
		m := message{
			typ:   native.Uint16(b[4:]),
			flags: native.Uint16(b[6:]),
			seq:   native.Uint32(b[8:]),
			data:  b[nlmsgHdrLen:l],
		}
		if m.typ == typeError {
			if len(m.data) < 4 {
				return dst, errors.New("netlink error message without an error number")
			}
			m.errno = -int32(native.Uint32(m.data))
			m.ext = extAckMessage(m)
		}
		dst = append(dst, m)
		if al := align4(l); al < len(b) {
			b = b[al:]
		} else {
			b = nil
		}
	}
	return dst, nil
}

// extAckMessage returns the NLMSGERR_ATTR_MSG text of an error message with
// extended ACK attributes.
func extAckMessage(m message) string {
	const (
		flagCapped  = 0x100
		flagAckTLVs = 0x200
	)
	if m.flags&flagAckTLVs == 0 || len(m.data) < 4+nlmsgHdrLen {
		return ""
	}
	off := 4 + nlmsgHdrLen
	if m.flags&flagCapped == 0 {
		// The request is echoed in full.
		off = 4 + int(native.Uint32(m.data[4:]))
	}
	if off > len(m.data) {
		return ""
	}
	var text string
	_ = forEachAttr(m.data[off:], func(typ uint16, v []byte) error {
		if typ == unix.NLMSGERR_ATTR_MSG {
			text = getString(v)
		}
		return nil
	})
	return text
}

// connTransport goes through a netlink.Conn that offers no system-call
// access, such as a fake from nltest. The messages and semantics are the
// same; netlink.Conn reassembles multi-part replies.
type connTransport struct {
	nc  *netlink.Conn
	ctr *Counters
}

func (t *connTransport) send(b []byte) error {
	var msgs []netlink.Message
	for len(b) >= nlmsgHdrLen {
		l := int(native.Uint32(b))
		msgs = append(msgs, netlink.Message{
			Header: netlink.Header{
				Length:   uint32(l),
				Type:     netlink.HeaderType(native.Uint16(b[4:])),
				Flags:    netlink.HeaderFlags(native.Uint16(b[6:])),
				Sequence: native.Uint32(b[8:]),
			},
			Data: append([]byte(nil), b[nlmsgHdrLen:l]...),
		})
		b = b[align4(l):]
	}
	t.ctr.Sendmsg++
	if _, err := t.nc.SendMessages(msgs); err != nil {
		return err
	}
	for _, m := range msgs {
		t.ctr.BytesSent += uint64(m.Header.Length)
	}
	return nil
}

func (t *connTransport) receive(deadline time.Time) ([]message, error) {
	t.ctr.Recvmsg++
	// A connection without deadlines (nltest) fails the call; its
	// receives do not block anyway.
	_ = t.nc.SetReadDeadline(deadline)
	msgs, err := t.nc.Receive()
	if err != nil {
		var oe *netlink.OpError
		var errno unix.Errno
		if errors.As(err, &oe) && oe.Sequence != 0 && errors.As(oe.Err, &errno) {
			t.ctr.MessagesReceived++
			return []message{{typ: typeError, seq: oe.Sequence, errno: int32(errno), ext: oe.Message}}, nil
		}
		return nil, err
	}
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		t.ctr.BytesReceived += uint64(nlmsgHdrLen + len(m.Data))
		mm := message{
			typ:   uint16(m.Header.Type),
			flags: uint16(m.Header.Flags),
			seq:   m.Header.Sequence,
			data:  m.Data,
		}
		if mm.typ == typeError {
			if len(mm.data) < 4 {
				return nil, errors.New("netlink error message without an error number")
			}
			mm.errno = -int32(native.Uint32(mm.data))
		}
		out = append(out, mm)
	}
	t.ctr.MessagesReceived += uint64(len(out))
	return out, nil
}

func (t *connTransport) wholeDumps() bool { return true }

func (t *connTransport) close() error { return t.nc.Close() }
