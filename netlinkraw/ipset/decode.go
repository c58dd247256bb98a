package ipset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// message is one received netlink message (see nlcore.Message): an
// error reply keeps its payload (ipset puts the failing line number
// there).
type message = nlcore.Message

// ackInfo is what an NLMSG_ERROR payload says: the error code (0 for an
// acknowledgement) and, for ipset batch failures, the failing line number
// that the kernel wrote into the copy of the request.
type ackInfo struct {
	Code    int // positive errno, 0 for success
	Line    uint32
	HasLine bool
}

// decodeAck decodes an NLMSG_ERROR payload.
func decodeAck(data []byte) (ackInfo, error) {
	if len(data) < 4 {
		return ackInfo{}, fmt.Errorf("short error message: %d bytes", len(data))
	}
	code := int32(binary.NativeEndian.Uint32(data[0:4]))
	info := ackInfo{Code: -int(code)}
	if code == 0 {
		return info, nil
	}
	if info.Code < 0 {
		return ackInfo{}, fmt.Errorf("positive error code %d in error message", code)
	}
	// The copy of the request: nlmsghdr, nfgenmsg, command attributes.
	req := data[4:]
	if len(req) < nlcore.HdrLen+4 {
		return info, nil // capped acknowledgement: no request copy
	}
	l := int(binary.NativeEndian.Uint32(req[0:4]))
	if l > len(req) || l < nlcore.HdrLen+4 {
		return info, nil
	}
	// A malformed copy only loses the line number.
	_ = nlcore.ForEachAttr(req[nlcore.HdrLen+4:l], func(typ uint16, v []byte) error {
		if typ == attrLineNo && len(v) == 4 {
			info.Line, info.HasLine = binary.NativeEndian.Uint32(v), true
		}
		return nil
	})
	return info, nil
}

// attrsOf returns the attributes of an ipset message's payload, after its
// nfgenmsg header.
func attrsOf(data []byte) ([]byte, error) {
	if len(data) < nlcore.NfgenLen {
		return nil, fmt.Errorf("short nfnetlink message: %d bytes", len(data))
	}
	return data[nlcore.NfgenLen:], nil
}

// protocolReply is the answer to IPSET_CMD_PROTOCOL.
type protocolReply struct {
	Protocol, Min uint8
}

// decodeProtocol decodes the reply to IPSET_CMD_PROTOCOL (payload after the
// netlink header).
func decodeProtocol(data []byte) (protocolReply, error) {
	var r protocolReply
	b, err := attrsOf(data)
	if err != nil {
		return r, err
	}
	err = nlcore.ForEachAttr(b, func(typ uint16, v []byte) (err error) {
		switch typ {
		case attrProtocol:
			r.Protocol, err = nlcore.GetU8("protocol", v)
		case attrProtocolMin:
			r.Min, err = nlcore.GetU8("protocol min", v)
		}
		return err
	})
	if err != nil {
		return r, err
	}
	if r.Protocol == 0 {
		return r, errors.New("protocol reply without protocol attribute")
	}
	return r, nil
}

// typeReply is the answer to IPSET_CMD_TYPE.
type typeReply struct {
	Name          string
	Family        uint8
	Revision, Min uint8
}

// decodeType decodes the reply to IPSET_CMD_TYPE.
func decodeType(data []byte) (typeReply, error) {
	var r typeReply
	b, err := attrsOf(data)
	if err != nil {
		return r, err
	}
	var haveRev bool
	err = nlcore.ForEachAttr(b, func(typ uint16, v []byte) (err error) {
		switch typ {
		case attrTypeName:
			r.Name = nlcore.GetString(v)
		case attrFamily:
			r.Family, err = nlcore.GetU8("family", v)
		case attrRevision:
			r.Revision, err = nlcore.GetU8("revision", v)
			haveRev = true
		case attrRevisionMin:
			r.Min, err = nlcore.GetU8("revision min", v)
		}
		return err
	})
	if err != nil {
		return r, err
	}
	if !haveRev {
		return r, errors.New("type reply without revision")
	}
	return r, nil
}

// decodeHeaderData decodes the set-level IPSET_ATTR_DATA of a LIST reply.
func decodeHeaderData(b []byte, h *Header) error {
	return nlcore.ForEachAttr(b, func(typ uint16, v []byte) (err error) {
		switch typ {
		case attrHashSize:
			h.HashSize, err = nlcore.GetBE32("hashsize", v)
		case attrMaxElem:
			h.MaxElem, err = nlcore.GetBE32("maxelem", v)
		case attrBucketSize:
			h.BucketSize, err = nlcore.GetU8("bucketsize", v)
		case attrPort:
			h.PortFrom, err = nlcore.GetBE16("port", v)
		case attrPortTo:
			h.PortTo, err = nlcore.GetBE16("port to", v)
		case attrTimeout:
			h.Timeout, err = nlcore.GetBE32("timeout", v)
		case attrCADTFlags:
			var f uint32
			f, err = nlcore.GetBE32("cadt flags", v)
			h.Counters = f&cadtWithCounters != 0
			h.Comment = f&cadtWithComment != 0
		case attrElements:
			h.Elements, err = nlcore.GetBE32("elements", v)
		case attrReferences:
			h.References, err = nlcore.GetBE32("references", v)
		case attrMemSize:
			h.MemSize, err = nlcore.GetBE32("memsize", v)
		}
		return err
	})
}

// decodeIP decodes a nested IPADDR_IPV4/IPADDR_IPV6 attribute.
func decodeIP(b []byte) (netip.Addr, error) {
	var addr netip.Addr
	err := nlcore.ForEachAttr(b, func(typ uint16, v []byte) error {
		switch typ {
		case attrIPAddrIPv4:
			if len(v) != 4 {
				return fmt.Errorf("IPv4 address of %d bytes", len(v))
			}
			addr = netip.AddrFrom4([4]byte(v))
		case attrIPAddrIPv6:
			if len(v) != 16 {
				return fmt.Errorf("IPv6 address of %d bytes", len(v))
			}
			addr = netip.AddrFrom16([16]byte(v))
		}
		return nil
	})
	return addr, err
}

// entryAttrs are the raw dimensions of a listed element.
type entryAttrs struct {
	ip, ip2     netip.Addr
	cidr, cidr2 int
}

// decodeEntry decodes the IPSET_ATTR_DATA of one listed element.
func decodeEntry(b []byte, e *Entry) error {
	d := entryAttrs{cidr: -1, cidr2: -1}
	err := nlcore.ForEachAttr(b, func(typ uint16, v []byte) (err error) {
		var u8 uint8
		switch typ {
		case attrIP:
			d.ip, err = decodeIP(v)
		case attrIP2:
			d.ip2, err = decodeIP(v)
		case attrCIDR:
			u8, err = nlcore.GetU8("cidr", v)
			d.cidr = int(u8)
		case attrCIDR2:
			u8, err = nlcore.GetU8("cidr2", v)
			d.cidr2 = int(u8)
		case attrPort:
			e.Port, err = nlcore.GetBE16("port", v)
		case attrProto:
			u8, err = nlcore.GetU8("proto", v)
			e.Proto = Proto(u8)
		case attrCADTFlags:
			var f uint32
			f, err = nlcore.GetBE32("cadt flags", v)
			e.NoMatch = f&cadtNoMatch != 0
		case attrTimeout:
			e.Timeout, err = nlcore.GetBE32("timeout", v)
		case attrPackets:
			e.Packets, err = nlcore.GetBE64("packets", v)
		case attrBytes:
			e.Bytes, err = nlcore.GetBE64("bytes", v)
		case attrComment:
			e.Comment = nlcore.GetString(v)
		}
		return err
	})
	if err != nil {
		return err
	}
	return d.fill(e)
}

// fill sets e's addresses and networks from the raw dimensions.
func (d entryAttrs) fill(e *Entry) error {
	if d.cidr >= 0 && d.ip.IsValid() {
		p, err := d.ip.Prefix(d.cidr)
		if err != nil {
			return fmt.Errorf("bad CIDR %d for %s", d.cidr, d.ip)
		}
		e.Net = p
	} else {
		e.IP = d.ip
	}
	if d.cidr2 >= 0 && d.ip2.IsValid() {
		p, err := d.ip2.Prefix(d.cidr2)
		if err != nil {
			return fmt.Errorf("bad CIDR %d for %s", d.cidr2, d.ip2)
		}
		e.Net = p
	} else {
		e.IP2 = d.ip2
	}
	return nil
}
