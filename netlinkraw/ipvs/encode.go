package ipvs

import (
	"encoding/binary"

	uapi "github.com/proxysinks/proxysinks/netlinkraw/internal/ipvsuapi"
	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// encodeService writes the IPVS_CMD_ATTR_SERVICE attribute of a checked
// service: the identifying attributes, and with full everything else.
func encodeService(e *nlcore.Encoder, s service, full bool) {
	nest := e.BeginNest(uapi.CmdAttrService)
	e.U16(uapi.SvcAttrAF, uint16(s.family))
	if s.FWMark != 0 {
		e.U32(uapi.SvcAttrFWMark, s.FWMark)
	} else {
		e.U16(uapi.SvcAttrProtocol, uint16(s.Protocol))
		e.InetAddr(uapi.SvcAttrAddr, s.Address)
		e.BE16(uapi.SvcAttrPort, s.Port)
	}
	if full {
		e.Str(uapi.SvcAttrSchedName, s.Scheduler)
		if s.PEName != "" {
			e.Str(uapi.SvcAttrPEName, s.PEName)
		}
		var fl [8]byte
		nlcore.Native.PutUint32(fl[0:], uint32(s.Flags))
		nlcore.Native.PutUint32(fl[4:], ^uint32(0))
		e.Attr(uapi.SvcAttrFlags, fl[:])
		e.U32(uapi.SvcAttrTimeout, s.Timeout)
		encodeNetmask(e, s.family, s.Netmask)
	}
	e.EndNest(nest)
}

// netmask writes IPVS_SVC_ATTR_NETMASK: for IPv4 the mask in network byte
// order, for IPv6 the prefix length as a host-order u32 (the kernel reads
// both with nla_get_be32 and treats the IPv6 value as a plain number).
func encodeNetmask(e *nlcore.Encoder, f Family, n uint8) {
	if n == 0 {
		n = uint8(f.bits())
	}
	var v [4]byte
	if f == IPv4 {
		binary.BigEndian.PutUint32(v[:], ^uint32(0)<<(32-uint(n)))
	} else {
		nlcore.Native.PutUint32(v[:], uint32(n))
	}
	e.Attr(uapi.SvcAttrNetmask, v[:])
}

// encodeDestination writes the IPVS_CMD_ATTR_DEST attribute of a checked
// destination: its key, and with full everything else.
func encodeDestination(e *nlcore.Encoder, d destination, full bool) {
	nest := e.BeginNest(uapi.CmdAttrDest)
	e.InetAddr(uapi.DestAttrAddr, d.Address)
	e.BE16(uapi.DestAttrPort, d.Port)
	e.U16(uapi.DestAttrAddrFamily, uint16(d.family))
	if full {
		e.U32(uapi.DestAttrFwdMethod, uint32(d.Forward))
		e.U32(uapi.DestAttrWeight, d.Weight)
		e.U32(uapi.DestAttrUThresh, d.UpperThreshold)
		e.U32(uapi.DestAttrLThresh, d.LowerThreshold)
		if d.TunnelType != 0 {
			e.U8(uapi.DestAttrTunType, uint8(d.TunnelType))
		}
		if d.TunnelPort != 0 {
			e.BE16(uapi.DestAttrTunPort, d.TunnelPort)
		}
		if d.TunnelFlags != 0 {
			e.U16(uapi.DestAttrTunFlags, uint16(d.TunnelFlags))
		}
	}
	e.EndNest(nest)
}
