package ipset

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/netfilter"

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
	ad, err := netfilter.NewAttributeDecoder(req[nlcore.HdrLen+4 : l])
	if err != nil {
		return info, nil
	}
	for ad.Next() {
		if ad.Type() == attrLineNo && len(ad.Bytes()) == 4 {
			info.Line = binary.NativeEndian.Uint32(ad.Bytes())
			info.HasLine = true
		}
	}
	return info, nil
}

// protocolReply is the answer to IPSET_CMD_PROTOCOL.
type protocolReply struct {
	Protocol, Min uint8
}

// decodeProtocol decodes the reply to IPSET_CMD_PROTOCOL (payload after the
// netlink header).
func decodeProtocol(data []byte) (protocolReply, error) {
	var r protocolReply
	ad, err := decoder(data)
	if err != nil {
		return r, err
	}
	for ad.Next() {
		switch ad.Type() {
		case attrProtocol:
			r.Protocol = ad.Uint8()
		case attrProtocolMin:
			r.Min = ad.Uint8()
		}
	}
	if err := ad.Err(); err != nil {
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
	ad, err := decoder(data)
	if err != nil {
		return r, err
	}
	var haveRev bool
	for ad.Next() {
		switch ad.Type() {
		case attrTypeName:
			r.Name = ad.String()
		case attrFamily:
			r.Family = ad.Uint8()
		case attrRevision:
			r.Revision = ad.Uint8()
			haveRev = true
		case attrRevisionMin:
			r.Min = ad.Uint8()
		}
	}
	if err := ad.Err(); err != nil {
		return r, err
	}
	if !haveRev {
		return r, errors.New("type reply without revision")
	}
	return r, nil
}

// decoder skips the nfgenmsg header and returns a big-endian attribute
// decoder (ti-mo/netfilter's) over the rest.
func decoder(data []byte) (*netlink.AttributeDecoder, error) {
	if len(data) < 4 {
		return nil, fmt.Errorf("short nfnetlink message: %d bytes", len(data))
	}
	return netfilter.NewAttributeDecoder(data[4:])
}

// listing accumulates the sets of a LIST dump, which may span many
// messages per set.
type listing struct {
	order []string
	sets  map[string]*listed
}

type listed struct {
	Header  Header
	HaveHdr bool
	Entries []Entry
}

func newListing() *listing { return &listing{sets: map[string]*listed{}} }

// add decodes one LIST message (payload after the netlink header).
func (l *listing) add(data []byte) error {
	ad, err := decoder(data)
	if err != nil {
		return err
	}
	var (
		cur      *listed
		name     string
		typ      string
		family   uint8
		revision uint8
		haveType bool
	)
	get := func() (*listed, error) {
		if cur != nil {
			return cur, nil
		}
		if name == "" {
			return nil, errors.New("set data before set name")
		}
		s, ok := l.sets[name]
		if !ok {
			s = &listed{}
			l.sets[name] = s
			l.order = append(l.order, name)
		}
		cur = s
		return s, nil
	}
	for ad.Next() {
		switch ad.Type() {
		case attrSetName:
			name = ad.String()
			if name == "" {
				return errors.New("empty set name in list reply")
			}
			if _, err := get(); err != nil {
				return err
			}
		case attrTypeName:
			typ = ad.String()
			haveType = true
		case attrFamily:
			family = ad.Uint8()
		case attrRevision:
			revision = ad.Uint8()
		case attrData:
			s, err := get()
			if err != nil {
				return err
			}
			h := &s.Header
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				return decodeHeaderData(nad, h)
			})
			s.HaveHdr = true
			if s.Entries == nil && h.Elements > 0 && h.Elements <= 1<<17 {
				// One allocation for the whole set (a hint: the kernel
				// counts expired entries too).
				s.Entries = make([]Entry, 0, h.Elements)
			}
		case attrADT:
			s, err := get()
			if err != nil {
				return err
			}
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					if nad.Type() != attrData {
						continue
					}
					var e Entry
					nad.Nested(func(ead *netlink.AttributeDecoder) error {
						return decodeEntry(ead, &e)
					})
					s.Entries = append(s.Entries, e)
				}
				return nil
			})
		}
	}
	if err := ad.Err(); err != nil {
		return err
	}
	if haveType {
		s, err := get()
		if err != nil {
			return err
		}
		s.Header.Name = name
		s.Header.Type = Type(typ)
		s.Header.Family = Family(family)
		s.Header.Revision = revision
		if s.Header.Type == BitmapPort {
			s.Header.Family = Unspec
		}
		s.HaveHdr = true
	} else if cur != nil && cur.Header.Name == "" {
		cur.Header.Name = name
	}
	return nil
}

// decodeHeaderData decodes the set-level IPSET_ATTR_DATA of a LIST reply.
func decodeHeaderData(ad *netlink.AttributeDecoder, h *Header) error {
	for ad.Next() {
		switch ad.Type() {
		case attrHashSize:
			h.HashSize = ad.Uint32()
		case attrMaxElem:
			h.MaxElem = ad.Uint32()
		case attrBucketSize:
			h.BucketSize = ad.Uint8()
		case attrPort:
			h.PortFrom = ad.Uint16()
		case attrPortTo:
			h.PortTo = ad.Uint16()
		case attrTimeout:
			h.Timeout = ad.Uint32()
		case attrCADTFlags:
			f := ad.Uint32()
			h.Counters = f&cadtWithCounters != 0
			h.Comment = f&cadtWithComment != 0
		case attrElements:
			h.Elements = ad.Uint32()
		case attrReferences:
			h.References = ad.Uint32()
		case attrMemSize:
			h.MemSize = ad.Uint32()
		}
	}
	return nil
}

// decodeIP decodes a nested IPADDR_IPV4/IPADDR_IPV6 attribute.
func decodeIP(ad *netlink.AttributeDecoder) netip.Addr {
	var addr netip.Addr
	ad.Nested(func(nad *netlink.AttributeDecoder) error {
		for nad.Next() {
			b := nad.Bytes()
			switch nad.Type() {
			case attrIPAddrIPv4:
				if len(b) != 4 {
					return fmt.Errorf("IPv4 address of %d bytes", len(b))
				}
				addr = netip.AddrFrom4([4]byte(b))
			case attrIPAddrIPv6:
				if len(b) != 16 {
					return fmt.Errorf("IPv6 address of %d bytes", len(b))
				}
				addr = netip.AddrFrom16([16]byte(b))
			}
		}
		return nil
	})
	return addr
}

// decodeEntry decodes the IPSET_ATTR_DATA of one listed element.
func decodeEntry(ad *netlink.AttributeDecoder, e *Entry) error {
	var (
		ip, ip2     netip.Addr
		cidr, cidr2 int = -1, -1
	)
	for ad.Next() {
		switch ad.Type() {
		case attrIP:
			ip = decodeIP(ad)
		case attrIP2:
			ip2 = decodeIP(ad)
		case attrCIDR:
			cidr = int(ad.Uint8())
		case attrCIDR2:
			cidr2 = int(ad.Uint8())
		case attrPort:
			e.Port = ad.Uint16()
		case attrProto:
			e.Proto = Proto(ad.Uint8())
		case attrCADTFlags:
			e.NoMatch = ad.Uint32()&cadtNoMatch != 0
		case attrTimeout:
			e.Timeout = ad.Uint32()
		case attrPackets:
			e.Packets = ad.Uint64()
		case attrBytes:
			e.Bytes = ad.Uint64()
		case attrComment:
			e.Comment = ad.String()
		}
	}
	if err := ad.Err(); err != nil {
		return err
	}
	if cidr >= 0 && ip.IsValid() {
		p, err := ip.Prefix(cidr)
		if err != nil {
			return fmt.Errorf("bad CIDR %d for %s", cidr, ip)
		}
		e.Net = p
	} else {
		e.IP = ip
	}
	if cidr2 >= 0 && ip2.IsValid() {
		p, err := ip2.Prefix(cidr2)
		if err != nil {
			return fmt.Errorf("bad CIDR %d for %s", cidr2, ip2)
		}
		e.Net = p
	} else {
		e.IP2 = ip2
	}
	return nil
}
