package ipvstest

import (
	"encoding/binary"
	"math"

	"github.com/mdlayher/netlink"

	uapi "github.com/proxysinks/proxysinks/netlinkraw/internal/ipvsuapi"
)

// nest encodes attributes for a nested attribute without NLA_F_NESTED, as
// the kernel's nla_nest_start_noflag does.
func nest(ae *netlink.AttributeEncoder, typ uint16, fn func(*netlink.AttributeEncoder)) {
	inner := netlink.NewAttributeEncoder()
	fn(inner)
	b, _ := inner.Encode()
	ae.Bytes(typ, b)
}

func be16Bytes(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// stats writes zero counters the way ip_vs_genl_fill_stats(64) do.
func stats(ae *netlink.AttributeEncoder, typ uint16, wide bool) {
	nest(ae, typ, func(s *netlink.AttributeEncoder) {
		for t := uint16(1); t <= 10; t++ {
			if wide || t == 4 || t == 5 {
				s.Uint64(t, 0)
			} else {
				s.Uint32(t, 0)
			}
		}
	})
}

// fillService mirrors ip_vs_genl_fill_service.
func fillService(s *service) []byte {
	ae := netlink.NewAttributeEncoder()
	nest(ae, uapi.CmdAttrService, func(e *netlink.AttributeEncoder) {
		e.Uint16(uapi.SvcAttrAF, s.af)
		if s.fwmark != 0 {
			e.Uint32(uapi.SvcAttrFWMark, s.fwmark)
		} else {
			e.Uint16(uapi.SvcAttrProtocol, s.protocol)
			e.Bytes(uapi.SvcAttrAddr, s.addr[:])
			e.Bytes(uapi.SvcAttrPort, be16Bytes(s.port))
		}
		sched := s.sched
		if sched == "" {
			sched = "none"
		}
		e.String(uapi.SvcAttrSchedName, sched)
		if s.pe != "" {
			e.String(uapi.SvcAttrPEName, s.pe)
		}
		fl := binary.NativeEndian.AppendUint32(nil, s.flags)
		fl = binary.NativeEndian.AppendUint32(fl, math.MaxUint32)
		e.Bytes(uapi.SvcAttrFlags, fl)
		e.Uint32(uapi.SvcAttrTimeout, s.timeout)
		e.Bytes(uapi.SvcAttrNetmask, s.netmask[:])
		stats(e, uapi.SvcAttrStats, false)
		stats(e, uapi.SvcAttrStats64, true)
	})
	b, _ := ae.Encode()
	return b
}

// fillDest mirrors ip_vs_genl_fill_dest.
func fillDest(d *dest) []byte {
	ae := netlink.NewAttributeEncoder()
	nest(ae, uapi.CmdAttrDest, func(e *netlink.AttributeEncoder) {
		e.Bytes(uapi.DestAttrAddr, d.addr[:])
		e.Bytes(uapi.DestAttrPort, be16Bytes(d.port))
		e.Uint32(uapi.DestAttrFwdMethod, d.fwd&uapi.ConnFwdMask)
		e.Uint32(uapi.DestAttrWeight, d.weight)
		e.Uint8(uapi.DestAttrTunType, d.tunType)
		e.Bytes(uapi.DestAttrTunPort, be16Bytes(d.tunPort))
		e.Uint16(uapi.DestAttrTunFlags, d.tunFlags)
		e.Uint32(uapi.DestAttrUThresh, d.uthresh)
		e.Uint32(uapi.DestAttrLThresh, d.lthresh)
		e.Uint32(uapi.DestAttrActiveConns, 0)
		e.Uint32(uapi.DestAttrInactConns, 0)
		e.Uint32(uapi.DestAttrPersistConns, 0)
		e.Uint16(uapi.DestAttrAddrFamily, d.af)
		stats(e, uapi.DestAttrStats, false)
		stats(e, uapi.DestAttrStats64, true)
	})
	b, _ := ae.Encode()
	return b
}
