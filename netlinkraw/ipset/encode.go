package ipset

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// attrs appends netlink attributes to a buffer. Nested attributes are opened
// with begin and closed with end, which fills in the length.
type attrs struct {
	b []byte
}

func align4(n int) int { return (n + 3) &^ 3 }

// put appends one attribute with its payload, padded to 4 bytes.
func (a *attrs) put(typ uint16, data []byte) {
	l := 4 + len(data)
	a.b = binary.NativeEndian.AppendUint16(a.b, uint16(l))
	a.b = binary.NativeEndian.AppendUint16(a.b, typ)
	a.b = append(a.b, data...)
	for i := l; i < align4(l); i++ {
		a.b = append(a.b, 0)
	}
}

func (a *attrs) u8(typ uint16, v uint8) { a.put(typ, []byte{v}) }

// be16, be32 and be64 append network-order integers with the
// NLA_F_NET_BYTEORDER flag, which ipset requires on them.
func (a *attrs) be16(typ uint16, v uint16) {
	a.put(typ|nlaNetByteOrder, binary.BigEndian.AppendUint16(nil, v))
}

func (a *attrs) be32(typ uint16, v uint32) {
	a.put(typ|nlaNetByteOrder, binary.BigEndian.AppendUint32(nil, v))
}

func (a *attrs) be64(typ uint16, v uint64) {
	a.put(typ|nlaNetByteOrder, binary.BigEndian.AppendUint64(nil, v))
}

// ne32 appends a host-order u32 (LINENO is host order).
func (a *attrs) ne32(typ uint16, v uint32) {
	a.put(typ, binary.NativeEndian.AppendUint32(nil, v))
}

// str appends a NUL-terminated string.
func (a *attrs) str(typ uint16, s string) {
	a.put(typ, append([]byte(s), 0))
}

// begin opens a nested attribute and returns its offset for end.
func (a *attrs) begin(typ uint16) int {
	off := len(a.b)
	a.b = binary.NativeEndian.AppendUint16(a.b, 0)
	a.b = binary.NativeEndian.AppendUint16(a.b, typ|nlaNested)
	return off
}

// end closes the nested attribute opened at off.
func (a *attrs) end(off int) {
	binary.NativeEndian.PutUint16(a.b[off:], uint16(len(a.b)-off))
}

// ip appends an address nested as IPADDR_IPV4 or IPADDR_IPV6.
func (a *attrs) ip(typ uint16, addr netip.Addr) {
	off := a.begin(typ)
	if addr.Is4() {
		b := addr.As4()
		a.put(attrIPAddrIPv4|nlaNetByteOrder, b[:])
	} else {
		b := addr.As16()
		a.put(attrIPAddrIPv6|nlaNetByteOrder, b[:])
	}
	a.end(off)
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
func appendEntry(a *attrs, t Type, e Entry, lineno uint32) {
	off := a.begin(attrData)
	switch {
	case e.IP.IsValid():
		a.ip(attrIP, e.IP.Unmap())
	case e.Net.IsValid():
		a.ip(attrIP, e.Net.Addr().Unmap())
		a.u8(attrCIDR, uint8(e.Net.Bits()))
	}
	if t.HasPort() {
		a.be16(attrPort, e.Port)
	}
	if e.Proto != 0 {
		a.u8(attrProto, uint8(e.Proto))
	}
	if e.IP2.IsValid() {
		a.ip(attrIP2, e.IP2.Unmap())
	}
	if e.IP.IsValid() && e.Net.IsValid() {
		a.ip(attrIP2, e.Net.Addr().Unmap())
		a.u8(attrCIDR2, uint8(e.Net.Bits()))
	}
	if e.NoMatch {
		a.be32(attrCADTFlags, cadtNoMatch)
	}
	if e.Timeout != 0 {
		a.be32(attrTimeout, e.Timeout)
	}
	if e.Packets != 0 {
		a.be64(attrPackets, e.Packets)
	}
	if e.Bytes != 0 {
		a.be64(attrBytes, e.Bytes)
	}
	if e.Comment != "" {
		a.str(attrComment, e.Comment)
	}
	if lineno != 0 {
		a.ne32(attrCADTLine, lineno)
	}
	a.end(off)
}

// nfgenmsg returns the 4-byte nfgenmsg header that starts every ipset
// message (family, version 0, resource id 0).
func nfgenmsg() []byte { return []byte{nfprotoIPv4, 0, 0, 0} }

// cmdAttrs starts a command's payload: nfgenmsg and the protocol attribute.
func cmdAttrs(proto uint8) *attrs {
	a := &attrs{b: make([]byte, 0, 64)}
	a.b = append(a.b, nfgenmsg()...)
	a.u8(attrProtocol, proto)
	return a
}

// createData appends the IPSET_ATTR_DATA of a create command.
func createData(a *attrs, s Set) {
	off := a.begin(attrData)
	if s.Type.IsHash() {
		if s.HashSize != 0 {
			a.be32(attrHashSize, s.HashSize)
		}
		if s.MaxElem != 0 {
			a.be32(attrMaxElem, s.MaxElem)
		}
	}
	if s.Type == BitmapPort {
		a.be16(attrPort, s.PortFrom)
		a.be16(attrPortTo, s.PortTo)
	}
	if s.Timeout != 0 {
		a.be32(attrTimeout, s.Timeout)
	}
	var flags uint32
	if s.Counters {
		flags |= cadtWithCounters
	}
	if s.Comment {
		flags |= cadtWithComment
	}
	if flags != 0 {
		a.be32(attrCADTFlags, flags)
	}
	a.end(off)
}
