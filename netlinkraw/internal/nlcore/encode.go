package nlcore

import (
	"encoding/binary"
	"net/netip"
)

// Netlink header sizes, message types and flags (linux/netlink.h).
const (
	HdrLen     = 16 // struct nlmsghdr
	AttrHdrLen = 4  // struct nlattr
	GenlHdrLen = 4  // struct genlmsghdr
	NfgenLen   = 4  // struct nfgenmsg

	TypeNoop    = 0x1 // NLMSG_NOOP
	TypeError   = 0x2 // NLMSG_ERROR
	TypeDone    = 0x3 // NLMSG_DONE
	TypeOverrun = 0x4 // NLMSG_OVERRUN

	FlagRequest  = 0x1   // NLM_F_REQUEST
	FlagMulti    = 0x2   // NLM_F_MULTI
	FlagAck      = 0x4   // NLM_F_ACK
	FlagDumpIntr = 0x10  // NLM_F_DUMP_INTR
	FlagDump     = 0x300 // NLM_F_DUMP (ROOT|MATCH)
	FlagReplace  = 0x100 // NLM_F_REPLACE
	FlagExcl     = 0x200 // NLM_F_EXCL
	FlagCreate   = 0x400 // NLM_F_CREATE

	// Flags of an NLMSG_ERROR message (NLM_F_CAPPED, NLM_F_ACK_TLVS).
	flagCapped  = 0x100
	flagAckTLVs = 0x200

	AttrNested       = 1 << 15 // NLA_F_NESTED
	AttrNetByteOrder = 1 << 14 // NLA_F_NET_BYTEORDER
	AttrTypeMask     = 0x3fff  // NLA_TYPE_MASK
)

// Native is the byte order of netlink headers and host-order attributes.
var Native = binary.NativeEndian

// align4 rounds n up to the 4-byte netlink alignment (NLMSG_ALIGN,
// NLA_ALIGN).
func align4(n int) int { return (n + 3) &^ 3 }

// Encoder appends netlink messages and attributes to B. Messages and nested
// attributes are opened with BeginMessage and BeginNest, which return an
// offset, and closed with EndMessage and EndNest, which fill in the length.
type Encoder struct {
	B []byte
}

// Reset empties the encoder, keeping its buffer.
func (e *Encoder) Reset() { e.B = e.B[:0] }

// pad extends B with zero bytes to a 4-byte boundary.
func (e *Encoder) pad() {
	for len(e.B)%4 != 0 {
		e.B = append(e.B, 0)
	}
}

// BeginMessage writes a netlink header whose length EndMessage fixes, and
// returns the message's offset. The port ID is 0 (the kernel).
func (e *Encoder) BeginMessage(typ, flags uint16, seq uint32) int {
	off := len(e.B)
	e.B = Native.AppendUint32(e.B, 0)
	e.B = Native.AppendUint16(e.B, typ)
	e.B = Native.AppendUint16(e.B, flags)
	e.B = Native.AppendUint32(e.B, seq)
	e.B = Native.AppendUint32(e.B, 0)
	return off
}

// EndMessage sets the length of the message begun at off.
func (e *Encoder) EndMessage(off int) {
	e.pad()
	Native.PutUint32(e.B[off:], uint32(len(e.B)-off))
}

// SetFlags replaces the flags of the message at off.
func (e *Encoder) SetFlags(off int, flags uint16) { Native.PutUint16(e.B[off+6:], flags) }

// Genl appends a generic netlink header (struct genlmsghdr).
func (e *Encoder) Genl(cmd, version uint8) { e.B = append(e.B, cmd, version, 0, 0) }

// Nfgen appends an nfnetlink header (struct nfgenmsg): the family,
// NFNETLINK_V0 and the resource id in network byte order.
func (e *Encoder) Nfgen(family uint8, resID uint16) {
	e.B = append(e.B, family, 0)
	e.B = binary.BigEndian.AppendUint16(e.B, resID)
}

// Fence appends an NLMSG_NOOP that asks for an ACK: the kernel does nothing
// with it but acknowledge it, after answering the messages sent before it.
func (e *Encoder) Fence(seq uint32) {
	off := e.BeginMessage(TypeNoop, FlagRequest|FlagAck, seq)
	e.EndMessage(off)
}

// Attr appends one attribute with its payload, padded to 4 bytes.
func (e *Encoder) Attr(typ uint16, v []byte) {
	e.B = Native.AppendUint16(e.B, uint16(AttrHdrLen+len(v)))
	e.B = Native.AppendUint16(e.B, typ)
	e.B = append(e.B, v...)
	e.pad()
}

// U8 appends a one-byte attribute.
func (e *Encoder) U8(typ uint16, v uint8) { e.Attr(typ, []byte{v}) }

// U16 appends a host-order u16 attribute.
func (e *Encoder) U16(typ uint16, v uint16) {
	e.B = Native.AppendUint16(e.B, AttrHdrLen+2)
	e.B = Native.AppendUint16(e.B, typ)
	e.B = Native.AppendUint16(e.B, v)
	e.B = append(e.B, 0, 0)
}

// BE16 appends a network-order u16 attribute (typ carries any flag the
// family wants, such as AttrNetByteOrder).
func (e *Encoder) BE16(typ uint16, v uint16) {
	e.B = Native.AppendUint16(e.B, AttrHdrLen+2)
	e.B = Native.AppendUint16(e.B, typ)
	e.B = binary.BigEndian.AppendUint16(e.B, v)
	e.B = append(e.B, 0, 0)
}

// U32 appends a host-order u32 attribute.
func (e *Encoder) U32(typ uint16, v uint32) {
	e.B = Native.AppendUint16(e.B, AttrHdrLen+4)
	e.B = Native.AppendUint16(e.B, typ)
	e.B = Native.AppendUint32(e.B, v)
}

// BE32 appends a network-order u32 attribute.
func (e *Encoder) BE32(typ uint16, v uint32) {
	e.B = Native.AppendUint16(e.B, AttrHdrLen+4)
	e.B = Native.AppendUint16(e.B, typ)
	e.B = binary.BigEndian.AppendUint32(e.B, v)
}

// BE64 appends a network-order u64 attribute.
func (e *Encoder) BE64(typ uint16, v uint64) {
	e.B = Native.AppendUint16(e.B, AttrHdrLen+8)
	e.B = Native.AppendUint16(e.B, typ)
	e.B = binary.BigEndian.AppendUint64(e.B, v)
}

// Str appends a NUL-terminated string attribute.
func (e *Encoder) Str(typ uint16, s string) {
	e.B = Native.AppendUint16(e.B, uint16(AttrHdrLen+len(s)+1))
	e.B = Native.AppendUint16(e.B, typ)
	e.B = append(e.B, s...)
	e.B = append(e.B, 0)
	e.pad()
}

// InetAddr appends a 16-byte nf_inet_addr attribute (an IPv4 address in
// its first four bytes), as IPVS takes and dumps addresses.
func (e *Encoder) InetAddr(typ uint16, a netip.Addr) {
	e.B = Native.AppendUint16(e.B, AttrHdrLen+16)
	e.B = Native.AppendUint16(e.B, typ)
	if a.Is4() {
		v := a.As4()
		e.B = append(e.B, v[:]...)
		e.B = append(e.B, make([]byte, 12)...)
		return
	}
	v := a.As16()
	e.B = append(e.B, v[:]...)
}

// BeginNest opens a nested attribute of type typ (with AttrNested or not,
// as the family wants) and returns its offset for EndNest.
func (e *Encoder) BeginNest(typ uint16) int {
	off := len(e.B)
	e.B = Native.AppendUint16(e.B, 0)
	e.B = Native.AppendUint16(e.B, typ)
	return off
}

// EndNest closes the nested attribute opened at off.
func (e *Encoder) EndNest(off int) {
	Native.PutUint16(e.B[off:], uint16(len(e.B)-off))
}
