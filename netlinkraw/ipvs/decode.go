package ipvs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"

	uapi "github.com/proxysinks/proxysinks/netlinkraw/internal/ipvsuapi"
	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// getAddr builds an address of family f from an nf_inet_addr attribute.
func getAddr(what string, f Family, v []byte) (netip.Addr, error) {
	switch {
	case f == IPv4 && len(v) >= 4:
		return netip.AddrFrom4([4]byte(v[:4])), nil
	case f == IPv6 && len(v) == 16:
		return netip.AddrFrom16([16]byte(v)), nil
	}
	return netip.Addr{}, fmt.Errorf("attribute %s has %d bytes for %s", what, len(v), f)
}

// decodeStats reads a nested IPVS_*_ATTR_STATS or STATS64 attribute.
func decodeStats(b []byte) (Stats, error) {
	var s Stats
	err := nlcore.ForEachAttr(b, func(typ uint16, v []byte) error {
		var p *uint64
		switch typ {
		case uapi.StatsAttrConns:
			p = &s.Connections
		case uapi.StatsAttrInPkts:
			p = &s.PacketsIn
		case uapi.StatsAttrOutPkts:
			p = &s.PacketsOut
		case uapi.StatsAttrInBytes:
			p = &s.BytesIn
		case uapi.StatsAttrOutBytes:
			p = &s.BytesOut
		case uapi.StatsAttrCPS:
			p = &s.CPS
		case uapi.StatsAttrInPPS:
			p = &s.PPSIn
		case uapi.StatsAttrOutPPS:
			p = &s.PPSOut
		case uapi.StatsAttrInBPS:
			p = &s.BPSIn
		case uapi.StatsAttrOutBPS:
			p = &s.BPSOut
		default:
			return nil // IPVS_STATS_ATTR_PAD and future counters
		}
		var err error
		*p, err = nlcore.GetUint("stats counter", v)
		return err
	})
	return s, err
}

// decodeService reads the contents of an IPVS_CMD_ATTR_SERVICE attribute.
func decodeService(b []byte) (ServiceEntry, error) {
	var (
		e                  ServiceEntry
		addr, mask         []byte
		stats, stats64     []byte
		haveAF, haveStats6 bool
	)
	s := &e.Service
	err := nlcore.ForEachAttr(b, func(typ uint16, v []byte) error {
		var err error
		switch typ {
		case uapi.SvcAttrAF:
			var f uint16
			f, err = nlcore.GetU16("af", v)
			s.Family, haveAF = Family(f), true
		case uapi.SvcAttrProtocol:
			var p uint16
			p, err = nlcore.GetU16("protocol", v)
			s.Protocol = Protocol(p)
		case uapi.SvcAttrAddr:
			addr = v
		case uapi.SvcAttrPort:
			s.Port, err = nlcore.GetBE16("port", v)
		case uapi.SvcAttrFWMark:
			s.FWMark, err = nlcore.GetU32("fwmark", v)
		case uapi.SvcAttrSchedName:
			s.Scheduler = nlcore.GetString(v)
		case uapi.SvcAttrPEName:
			s.PEName = nlcore.GetString(v)
		case uapi.SvcAttrFlags:
			if len(v) != 8 {
				return nlcore.BadLen("flags", v)
			}
			s.Flags = ServiceFlags(nlcore.Native.Uint32(v) & nlcore.Native.Uint32(v[4:]))
		case uapi.SvcAttrTimeout:
			s.Timeout, err = nlcore.GetU32("timeout", v)
		case uapi.SvcAttrNetmask:
			if len(v) != 4 {
				return nlcore.BadLen("netmask", v)
			}
			mask = v
		case uapi.SvcAttrStats:
			stats = v
		case uapi.SvcAttrStats64:
			stats64, haveStats6 = v, true
		}
		return err
	})
	if err != nil {
		return e, err
	}
	if !haveAF {
		return e, errors.New("service without an address family")
	}
	if s.Family != IPv4 && s.Family != IPv6 {
		return e, fmt.Errorf("service with unknown %s", s.Family)
	}
	if addr != nil {
		if s.Address, err = getAddr("addr", s.Family, addr); err != nil {
			return e, err
		}
	}
	if mask != nil {
		if s.Netmask, err = decodeNetmask(s.Family, mask); err != nil {
			return e, err
		}
	}
	if haveStats6 {
		e.Stats, err = decodeStats(stats64)
	} else if stats != nil {
		e.Stats, err = decodeStats(stats)
	}
	return e, err
}

// decodeNetmask turns IPVS_SVC_ATTR_NETMASK into a prefix length.
func decodeNetmask(f Family, v []byte) (uint8, error) {
	if f == IPv6 {
		n := nlcore.Native.Uint32(v)
		if n > 128 {
			return 0, fmt.Errorf("IPv6 netmask /%d", n)
		}
		return uint8(n), nil
	}
	m := binary.BigEndian.Uint32(v)
	n := bits.LeadingZeros32(^m)
	if m<<uint(n) != 0 {
		return 0, fmt.Errorf("netmask %s is not a prefix", netip.AddrFrom4([4]byte(v)))
	}
	return uint8(n), nil
}

// decodeDestination reads the contents of an IPVS_CMD_ATTR_DEST attribute.
// svcFamily is used when the kernel reports no address family (before 4.x).
func decodeDestination(b []byte, svcFamily Family) (DestinationEntry, error) {
	var (
		e              DestinationEntry
		addr           []byte
		stats, stats64 []byte
		have64         bool
	)
	d := &e.Destination
	err := nlcore.ForEachAttr(b, func(typ uint16, v []byte) error {
		var err error
		switch typ {
		case uapi.DestAttrAddr:
			addr = v
		case uapi.DestAttrPort:
			d.Port, err = nlcore.GetBE16("port", v)
		case uapi.DestAttrFwdMethod:
			var m uint32
			m, err = nlcore.GetU32("fwd_method", v)
			d.Forward = ForwardMethod(m)
		case uapi.DestAttrWeight:
			d.Weight, err = nlcore.GetU32("weight", v)
		case uapi.DestAttrUThresh:
			d.UpperThreshold, err = nlcore.GetU32("u_thresh", v)
		case uapi.DestAttrLThresh:
			d.LowerThreshold, err = nlcore.GetU32("l_thresh", v)
		case uapi.DestAttrActiveConns:
			e.ActiveConns, err = nlcore.GetU32("activeconns", v)
		case uapi.DestAttrInactConns:
			e.InactiveConns, err = nlcore.GetU32("inactconns", v)
		case uapi.DestAttrPersistConns:
			e.PersistentConns, err = nlcore.GetU32("persistconns", v)
		case uapi.DestAttrAddrFamily:
			var f uint16
			f, err = nlcore.GetU16("addr_family", v)
			d.Family = Family(f)
		case uapi.DestAttrTunType:
			var t uint8
			t, err = nlcore.GetU8("tun_type", v)
			d.TunnelType = TunnelType(t)
		case uapi.DestAttrTunPort:
			d.TunnelPort, err = nlcore.GetBE16("tun_port", v)
		case uapi.DestAttrTunFlags:
			var f uint16
			f, err = nlcore.GetU16("tun_flags", v)
			d.TunnelFlags = TunnelFlags(f)
		case uapi.DestAttrStats:
			stats = v
		case uapi.DestAttrStats64:
			stats64, have64 = v, true
		}
		return err
	})
	if err != nil {
		return e, err
	}
	if d.Family == 0 {
		d.Family = svcFamily
	}
	if d.Family != IPv4 && d.Family != IPv6 {
		return e, fmt.Errorf("destination with unknown %s", d.Family)
	}
	if addr == nil {
		return e, errors.New("destination without an address")
	}
	if d.Address, err = getAddr("addr", d.Family, addr); err != nil {
		return e, err
	}
	if have64 {
		e.Stats, err = decodeStats(stats64)
	} else if stats != nil {
		e.Stats, err = decodeStats(stats)
	}
	return e, err
}

// genlPayload strips the generic netlink header of a message payload.
func genlPayload(data []byte) ([]byte, error) {
	if len(data) < nlcore.GenlHdrLen {
		return nil, errors.New("message shorter than a generic netlink header")
	}
	return data[nlcore.GenlHdrLen:], nil
}

// decodeServiceMessage decodes one service message of a dump or GET reply
// (generic netlink header included).
func decodeServiceMessage(data []byte) (ServiceEntry, error) {
	p, err := genlPayload(data)
	if err != nil {
		return ServiceEntry{}, err
	}
	v, ok, err := nlcore.FindAttr(p, uapi.CmdAttrService)
	if err != nil {
		return ServiceEntry{}, err
	}
	if !ok {
		return ServiceEntry{}, errors.New("message without a service attribute")
	}
	return decodeService(v)
}

// decodeDestinationMessage decodes one message of a destination dump.
func decodeDestinationMessage(data []byte, svcFamily Family) (DestinationEntry, error) {
	p, err := genlPayload(data)
	if err != nil {
		return DestinationEntry{}, err
	}
	v, ok, err := nlcore.FindAttr(p, uapi.CmdAttrDest)
	if err != nil {
		return DestinationEntry{}, err
	}
	if !ok {
		return DestinationEntry{}, errors.New("message without a destination attribute")
	}
	return decodeDestination(v, svcFamily)
}

// decodeInfo decodes the reply to IPVS_CMD_GET_INFO.
func decodeInfo(data []byte) (Info, error) {
	var i Info
	p, err := genlPayload(data)
	if err != nil {
		return i, err
	}
	err = nlcore.ForEachAttr(p, func(typ uint16, v []byte) error {
		var err error
		switch typ {
		case uapi.InfoAttrVersion:
			i.Version, err = nlcore.GetU32("version", v)
		case uapi.InfoAttrConnTabSize:
			i.ConnTableSize, err = nlcore.GetU32("conn_tab_size", v)
		}
		return err
	})
	return i, err
}

// decodeConfig decodes the reply to IPVS_CMD_GET_CONFIG.
func decodeConfig(data []byte) (Config, error) {
	var c Config
	p, err := genlPayload(data)
	if err != nil {
		return c, err
	}
	err = nlcore.ForEachAttr(p, func(typ uint16, v []byte) error {
		var err error
		switch typ {
		case uapi.CmdAttrTimeoutTCP:
			c.TCP, err = nlcore.GetU32("timeout_tcp", v)
		case uapi.CmdAttrTimeoutTCPFin:
			c.TCPFin, err = nlcore.GetU32("timeout_tcp_fin", v)
		case uapi.CmdAttrTimeoutUDP:
			c.UDP, err = nlcore.GetU32("timeout_udp", v)
		}
		return err
	})
	return c, err
}
