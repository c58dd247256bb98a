package ipset

import (
	"fmt"
	"net/netip"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// putIP appends an address nested as IPADDR_IPV4 or IPADDR_IPV6.
func putIP(a *nlcore.Encoder, typ uint16, addr netip.Addr) {
	off := a.BeginNest(typ | nlcore.AttrNested)
	if addr.Is4() {
		b := addr.As4()
		a.Attr(attrIPAddrIPv4|nlcore.AttrNetByteOrder, b[:])
	} else {
		b := addr.As16()
		a.Attr(attrIPAddrIPv6|nlcore.AttrNetByteOrder, b[:])
	}
	a.EndNest(off)
}

// checkName validates a set name.
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("empty set name")
	}
	if len(name) >= maxNameLen {
		return fmt.Errorf("set name %q longer than %d bytes", name, maxNameLen-1)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return fmt.Errorf("set name %q contains a NUL byte", name)
		}
	}
	return nil
}

// checkEntry rejects entries the kernel would refuse for the whole message
// instead of for the entry alone (so one bad entry cannot sink its
// neighbours), and entries with no dimension at all.
func checkEntry(e Entry) error {
	if len(e.Comment) > maxCommentLen {
		return fmt.Errorf("comment longer than %d bytes", maxCommentLen)
	}
	for i := 0; i < len(e.Comment); i++ {
		if e.Comment[i] == 0 {
			return fmt.Errorf("comment contains a NUL byte")
		}
	}
	if e.IP.Zone() != "" || e.IP2.Zone() != "" {
		return fmt.Errorf("addresses with a zone cannot be stored")
	}
	return nil
}

// appendEntry appends one IPSET_ATTR_DATA holding e for a set of type t,
// tagged with lineno (0: none). The entry has passed CheckEntry.
func appendEntry(a *nlcore.Encoder, t Type, e Entry, lineno uint32) {
	off := a.BeginNest(attrData | nlcore.AttrNested)
	switch {
	case e.IP.IsValid():
		putIP(a, attrIP, e.IP.Unmap())
	case e.Net.IsValid():
		putIP(a, attrIP, e.Net.Addr().Unmap())
		a.U8(attrCIDR, uint8(e.Net.Bits()))
	}
	if t.HasPort() {
		a.BE16(attrPort|nlcore.AttrNetByteOrder, e.Port)
	}
	if e.Proto != 0 {
		a.U8(attrProto, uint8(e.Proto))
	}
	if e.IP2.IsValid() {
		putIP(a, attrIP2, e.IP2.Unmap())
	}
	if e.IP.IsValid() && e.Net.IsValid() {
		putIP(a, attrIP2, e.Net.Addr().Unmap())
		a.U8(attrCIDR2, uint8(e.Net.Bits()))
	}
	if e.NoMatch {
		a.BE32(attrCADTFlags|nlcore.AttrNetByteOrder, cadtNoMatch)
	}
	if e.Timeout != 0 {
		a.BE32(attrTimeout|nlcore.AttrNetByteOrder, e.Timeout)
	}
	if e.Packets != 0 {
		a.BE64(attrPackets|nlcore.AttrNetByteOrder, e.Packets)
	}
	if e.Bytes != 0 {
		a.BE64(attrBytes|nlcore.AttrNetByteOrder, e.Bytes)
	}
	if e.Comment != "" {
		a.Str(attrComment, e.Comment)
	}
	if lineno != 0 {
		a.U32(attrCADTLine, lineno)
	}
	a.EndNest(off)
}

// nfgenmsg returns the 4-byte nfgenmsg header that starts every ipset
// message (family, version 0, resource id 0).
func nfgenmsg() []byte { return []byte{nfprotoIPv4, 0, 0, 0} }

// cmdAttrs starts a command's payload: nfgenmsg and the protocol attribute.
func cmdAttrs(proto uint8) *nlcore.Encoder {
	a := &nlcore.Encoder{B: make([]byte, 0, 64)}
	a.B = append(a.B, nfgenmsg()...)
	a.U8(attrProtocol, proto)
	return a
}

// createData appends the IPSET_ATTR_DATA of a create command.
func createData(a *nlcore.Encoder, s Set) {
	off := a.BeginNest(attrData | nlcore.AttrNested)
	if s.Type.IsHash() {
		if s.HashSize != 0 {
			a.BE32(attrHashSize|nlcore.AttrNetByteOrder, s.HashSize)
		}
		if s.MaxElem != 0 {
			a.BE32(attrMaxElem|nlcore.AttrNetByteOrder, s.MaxElem)
		}
	}
	if s.Type == BitmapPort {
		a.BE16(attrPort|nlcore.AttrNetByteOrder, s.PortFrom)
		a.BE16(attrPortTo|nlcore.AttrNetByteOrder, s.PortTo)
	}
	if s.Timeout != 0 {
		a.BE32(attrTimeout|nlcore.AttrNetByteOrder, s.Timeout)
	}
	var flags uint32
	if s.Counters {
		flags |= cadtWithCounters
	}
	if s.Comment {
		flags |= cadtWithComment
	}
	if flags != 0 {
		a.BE32(attrCADTFlags|nlcore.AttrNetByteOrder, flags)
	}
	a.EndNest(off)
}
