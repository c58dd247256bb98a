package nlcore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Message is one received netlink message. For an NLMSG_ERROR, Errno holds
// the (positive) error number, 0 for an ACK, and Ext the kernel's
// extended-ACK text if any; Data keeps the whole error payload (ipset reads
// the failing line from the request copy in it). Data points into the
// receive buffer: it is valid until the next receive.
type Message struct {
	Type  uint16
	Flags uint16
	Seq   uint32
	Data  []byte
	Errno int32
	Ext   string
	// BadAttr is the offset, from the start of the refused request's
	// netlink header, of the attribute the kernel blamed
	// (NLMSGERR_ATTR_OFFS, extended ACKs); 0 when it named none.
	BadAttr uint32
}

// Err returns the error an NLMSG_ERROR message carries (nil for an ACK),
// with the kernel's extended-ACK text if any.
func (m *Message) Err() error {
	if m.Errno == 0 {
		return nil
	}
	err := error(unix.Errno(m.Errno))
	if m.Ext != "" {
		return fmt.Errorf("%w: %s", err, m.Ext)
	}
	return err
}

// ParseMessages splits a datagram into messages, appending to dst. A
// datagram that does not end on a message boundary is an error.
func ParseMessages(dst []Message, b []byte) ([]Message, error) {
	for len(b) > 0 {
		if len(b) < HdrLen {
			return dst, fmt.Errorf("malformed netlink message: %d bytes left, less than a header", len(b))
		}
		l := int(Native.Uint32(b))
		if l < HdrLen || l > len(b) {
			return dst, fmt.Errorf("malformed netlink message: length %d of %d bytes", l, len(b))
		}
		m := Message{
			Type:  Native.Uint16(b[4:]),
			Flags: Native.Uint16(b[6:]),
			Seq:   Native.Uint32(b[8:]),
			Data:  b[HdrLen:l],
		}
		if m.Type == TypeError {
			if len(m.Data) < 4 {
				return dst, errors.New("netlink error message without an error number")
			}
			m.Errno = -int32(Native.Uint32(m.Data))
			m.Ext, m.BadAttr = extAck(m)
		}
		dst = append(dst, m)
		b = b[min(align4(l), len(b)):]
	}
	return dst, nil
}

// extAck returns the NLMSGERR_ATTR_MSG text and the NLMSGERR_ATTR_OFFS
// offset of an error message with extended ACK attributes.
func extAck(m Message) (text string, offs uint32) {
	if m.Flags&flagAckTLVs == 0 || len(m.Data) < 4+HdrLen {
		return "", 0
	}
	off := 4 + HdrLen
	if m.Flags&flagCapped == 0 {
		// The request is echoed in full.
		off = 4 + int(Native.Uint32(m.Data[4:]))
	}
	if off > len(m.Data) {
		return "", 0
	}
	_ = ForEachAttr(m.Data[off:], func(typ uint16, v []byte) error {
		switch typ {
		case unix.NLMSGERR_ATTR_MSG:
			text = GetString(v)
		case unix.NLMSGERR_ATTR_OFFS:
			if len(v) == 4 {
				offs = Native.Uint32(v)
			}
		}
		return nil
	})
	return text, offs
}

// ErrTruncated reports attributes that do not fit their buffer.
var ErrTruncated = errors.New("truncated netlink attribute")

// ForEachAttr calls fn for each attribute in b, with its type (flags
// masked) and payload. It fails on malformed attributes.
func ForEachAttr(b []byte, fn func(typ uint16, v []byte) error) error {
	for len(b) > 0 {
		if len(b) < AttrHdrLen {
			return ErrTruncated
		}
		l := int(Native.Uint16(b))
		if l < AttrHdrLen || l > len(b) {
			return ErrTruncated
		}
		if err := fn(Native.Uint16(b[2:])&AttrTypeMask, b[AttrHdrLen:l]); err != nil {
			return err
		}
		b = b[min(align4(l), len(b)):]
	}
	return nil
}

// FindAttr returns the payload of the first attribute typ in b.
func FindAttr(b []byte, typ uint16) ([]byte, bool, error) {
	var (
		found []byte
		ok    bool
	)
	err := ForEachAttr(b, func(t uint16, v []byte) error {
		if t == typ && !ok {
			found, ok = v, true
		}
		return nil
	})
	return found, ok, err
}

// BadLen is the error of an attribute whose payload has the wrong size.
func BadLen(what string, v []byte) error {
	return fmt.Errorf("attribute %s has %d bytes", what, len(v))
}

// GetU8 reads a one-byte attribute.
func GetU8(what string, v []byte) (uint8, error) {
	if len(v) != 1 {
		return 0, BadLen(what, v)
	}
	return v[0], nil
}

// GetU16 reads a host-order u16 attribute.
func GetU16(what string, v []byte) (uint16, error) {
	if len(v) != 2 {
		return 0, BadLen(what, v)
	}
	return Native.Uint16(v), nil
}

// GetBE16 reads a network-order u16 attribute.
func GetBE16(what string, v []byte) (uint16, error) {
	if len(v) != 2 {
		return 0, BadLen(what, v)
	}
	return binary.BigEndian.Uint16(v), nil
}

// GetU32 reads a host-order u32 attribute.
func GetU32(what string, v []byte) (uint32, error) {
	if len(v) != 4 {
		return 0, BadLen(what, v)
	}
	return Native.Uint32(v), nil
}

// GetBE32 reads a network-order u32 attribute.
func GetBE32(what string, v []byte) (uint32, error) {
	if len(v) != 4 {
		return 0, BadLen(what, v)
	}
	return binary.BigEndian.Uint32(v), nil
}

// GetBE64 reads a network-order u64 attribute.
func GetBE64(what string, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, BadLen(what, v)
	}
	return binary.BigEndian.Uint64(v), nil
}

// GetUint reads a 4- or 8-byte host-order counter.
func GetUint(what string, v []byte) (uint64, error) {
	switch len(v) {
	case 4:
		return uint64(Native.Uint32(v)), nil
	case 8:
		return Native.Uint64(v), nil
	}
	return 0, BadLen(what, v)
}

// GetString reads a string attribute, without its terminating NUL.
func GetString(v []byte) string {
	for i, c := range v {
		if c == 0 {
			return string(v[:i])
		}
	}
	return string(v)
}
