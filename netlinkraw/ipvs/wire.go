package ipvs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"strings"
)

// Generic netlink protocol constants from linux/ip_vs.h.
const (
	genlName    = "IPVS"
	genlVersion = 1

	cmdNewService = 1
	cmdSetService = 2
	cmdDelService = 3
	cmdGetService = 4
	cmdNewDest    = 5
	cmdSetDest    = 6
	cmdDelDest    = 7
	cmdGetDest    = 8
	cmdSetConfig  = 12
	cmdGetConfig  = 13
	cmdSetInfo    = 14
	cmdGetInfo    = 15
	cmdZero       = 16
	cmdFlush      = 17

	cmdAttrService       = 1
	cmdAttrDest          = 2
	cmdAttrTimeoutTCP    = 4
	cmdAttrTimeoutTCPFin = 5
	cmdAttrTimeoutUDP    = 6

	svcAttrAF        = 1
	svcAttrProtocol  = 2
	svcAttrAddr      = 3
	svcAttrPort      = 4
	svcAttrFWMark    = 5
	svcAttrSchedName = 6
	svcAttrFlags     = 7
	svcAttrTimeout   = 8
	svcAttrNetmask   = 9
	svcAttrStats     = 10
	svcAttrPEName    = 11
	svcAttrStats64   = 12

	destAttrAddr         = 1
	destAttrPort         = 2
	destAttrFwdMethod    = 3
	destAttrWeight       = 4
	destAttrUThresh      = 5
	destAttrLThresh      = 6
	destAttrActiveConns  = 7
	destAttrInactConns   = 8
	destAttrPersistConns = 9
	destAttrStats        = 10
	destAttrAddrFamily   = 11
	destAttrStats64      = 12
	destAttrTunType      = 13
	destAttrTunPort      = 14
	destAttrTunFlags     = 15

	statsAttrConns    = 1
	statsAttrInPkts   = 2
	statsAttrOutPkts  = 3
	statsAttrInBytes  = 4
	statsAttrOutBytes = 5
	statsAttrCPS      = 6
	statsAttrInPPS    = 7
	statsAttrOutPPS   = 8
	statsAttrInBPS    = 9
	statsAttrOutBPS   = 10

	infoAttrVersion     = 1
	infoAttrConnTabSize = 2

	// schedNameMax and peNameMax are the longest names the kernel's
	// attribute policy accepts (IP_VS_SCHEDNAME_MAXLEN - 1 and
	// IP_VS_PENAME_MAXLEN).
	schedNameMax = 15
	peNameMax    = 16
)

// Netlink header constants.
const (
	nlmsgHdrLen  = 16
	genlHdrLen   = 4
	nlaHdrLen    = 4
	nlaTypeMask  = 0x3fff
	flagRequest  = 0x1
	flagMulti    = 0x2
	flagAck      = 0x4
	flagDumpIntr = 0x10
	flagDump     = 0x300
	typeNoop     = 0x1
	typeError    = 0x2
	typeDone     = 0x3
)

var native = binary.NativeEndian

// encoder appends netlink messages and attributes to a byte slice.
type encoder struct {
	b []byte
}

func align4(n int) int { return (n + 3) &^ 3 }

// pad extends b with zero bytes to a 4-byte boundary.
func (e *encoder) pad() {
	for len(e.b)%4 != 0 {
		e.b = append(e.b, 0)
	}
}

// beginMessage writes a netlink and generic netlink header whose length is
// fixed by endMessage, and returns the message's offset.
func (e *encoder) beginMessage(family uint16, flags uint16, seq uint32, cmd uint8) int {
	off := len(e.b)
	e.b = native.AppendUint32(e.b, 0)
	e.b = native.AppendUint16(e.b, family)
	e.b = native.AppendUint16(e.b, flags)
	e.b = native.AppendUint32(e.b, seq)
	e.b = native.AppendUint32(e.b, 0) // port ID: the kernel is 0
	e.b = append(e.b, cmd, genlVersion, 0, 0)
	return off
}

// fence appends an NLMSG_NOOP that asks for an ACK: the kernel does
// nothing with it but acknowledge it, after answering the messages sent
// before it.
func (e *encoder) fence(seq uint32) {
	e.b = native.AppendUint32(e.b, nlmsgHdrLen)
	e.b = native.AppendUint16(e.b, typeNoop)
	e.b = native.AppendUint16(e.b, flagAck)
	e.b = native.AppendUint32(e.b, seq)
	e.b = native.AppendUint32(e.b, 0)
}

func (e *encoder) endMessage(off int) {
	native.PutUint32(e.b[off:], uint32(len(e.b)-off))
}

func (e *encoder) attr(typ uint16, v []byte) {
	e.b = native.AppendUint16(e.b, uint16(nlaHdrLen+len(v)))
	e.b = native.AppendUint16(e.b, typ)
	e.b = append(e.b, v...)
	e.pad()
}

func (e *encoder) u8(typ uint16, v uint8) { e.attr(typ, []byte{v}) }

func (e *encoder) u16(typ uint16, v uint16) {
	e.b = native.AppendUint16(e.b, nlaHdrLen+2)
	e.b = native.AppendUint16(e.b, typ)
	e.b = native.AppendUint16(e.b, v)
	e.b = append(e.b, 0, 0)
}

func (e *encoder) be16(typ uint16, v uint16) {
	e.b = native.AppendUint16(e.b, nlaHdrLen+2)
	e.b = native.AppendUint16(e.b, typ)
	e.b = binary.BigEndian.AppendUint16(e.b, v)
	e.b = append(e.b, 0, 0)
}

func (e *encoder) u32(typ uint16, v uint32) {
	e.b = native.AppendUint16(e.b, nlaHdrLen+4)
	e.b = native.AppendUint16(e.b, typ)
	e.b = native.AppendUint32(e.b, v)
}

// str writes a NUL-terminated string attribute.
func (e *encoder) str(typ uint16, s string) {
	e.b = native.AppendUint16(e.b, uint16(nlaHdrLen+len(s)+1))
	e.b = native.AppendUint16(e.b, typ)
	e.b = append(e.b, s...)
	e.b = append(e.b, 0)
	e.pad()
}

// addr writes a 16-byte nf_inet_addr attribute, as the kernel dumps it.
func (e *encoder) addr(typ uint16, a netip.Addr) {
	e.b = native.AppendUint16(e.b, nlaHdrLen+16)
	e.b = native.AppendUint16(e.b, typ)
	if a.Is4() {
		v := a.As4()
		e.b = append(e.b, v[:]...)
		e.b = append(e.b, make([]byte, 12)...)
		return
	}
	v := a.As16()
	e.b = append(e.b, v[:]...)
}

func (e *encoder) beginNest(typ uint16) int {
	off := len(e.b)
	e.b = native.AppendUint16(e.b, 0)
	e.b = native.AppendUint16(e.b, typ)
	return off
}

func (e *encoder) endNest(off int) {
	native.PutUint16(e.b[off:], uint16(len(e.b)-off))
}

// errInvalid marks client-side validation errors; they wrap EINVAL so that
// callers can treat them like the kernel's.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return "invalid argument: " + e.msg }

func invalidf(format string, a ...any) error {
	return &invalidError{fmt.Sprintf(format, a...)}
}

// Is makes errors.Is(err, unix.EINVAL) hold.
func (e *invalidError) Is(target error) bool { return target == errEINVAL }

// service is a validated service ready to encode: the service (not
// copied: encoding is on the hot path) and its family.
type service struct {
	*Service
	family Family
}

// checkService validates s. full is set for create and update, which send
// every attribute.
func checkService(s *Service, full bool) (service, error) {
	n := service{Service: s, family: s.Family}
	if s.FWMark != 0 {
		if s.Protocol != 0 || s.Address.IsValid() || s.Port != 0 {
			return n, invalidf("a firewall-mark service has no protocol, address or port")
		}
		if s.Family != IPv4 && s.Family != IPv6 {
			return n, invalidf("a firewall-mark service needs Family IPv4 or IPv6")
		}
	} else {
		if !s.Address.IsValid() {
			return n, invalidf("service has neither an address nor a firewall mark")
		}
		if s.Address.Zone() != "" {
			return n, invalidf("service address %s has a zone", s.Address)
		}
		af := familyOf(s.Address)
		if n.family == 0 {
			n.family = af
		}
		if n.family != af {
			return n, invalidf("service address %s is not %s", s.Address, n.family)
		}
	}
	if !full {
		return n, nil
	}
	if len(s.Scheduler) > schedNameMax || strings.IndexByte(s.Scheduler, 0) >= 0 {
		return n, invalidf("scheduler name %q longer than %d bytes or with a NUL", s.Scheduler, schedNameMax)
	}
	if len(s.PEName) > peNameMax || strings.IndexByte(s.PEName, 0) >= 0 {
		return n, invalidf("persistence engine name %q longer than %d bytes or with a NUL", s.PEName, peNameMax)
	}
	if int(s.Netmask) > n.family.bits() {
		return n, invalidf("netmask /%d longer than a %s address", s.Netmask, n.family)
	}
	return n, nil
}

// encodeServiceAttr writes the IPVS_CMD_ATTR_SERVICE attribute of a checked
// service: the identifying attributes, and with full everything else.
func (e *encoder) service(s service, full bool) {
	nest := e.beginNest(cmdAttrService)
	e.u16(svcAttrAF, uint16(s.family))
	if s.FWMark != 0 {
		e.u32(svcAttrFWMark, s.FWMark)
	} else {
		e.u16(svcAttrProtocol, uint16(s.Protocol))
		e.addr(svcAttrAddr, s.Address)
		e.be16(svcAttrPort, s.Port)
	}
	if full {
		e.str(svcAttrSchedName, s.Scheduler)
		if s.PEName != "" {
			e.str(svcAttrPEName, s.PEName)
		}
		var fl [8]byte
		native.PutUint32(fl[0:], uint32(s.Flags))
		native.PutUint32(fl[4:], ^uint32(0))
		e.attr(svcAttrFlags, fl[:])
		e.u32(svcAttrTimeout, s.Timeout)
		e.netmask(s.family, s.Netmask)
	}
	e.endNest(nest)
}

// netmask writes IPVS_SVC_ATTR_NETMASK: for IPv4 the mask in network byte
// order, for IPv6 the prefix length as a host-order u32 (the kernel reads
// both with nla_get_be32 and treats the IPv6 value as a plain number).
func (e *encoder) netmask(f Family, n uint8) {
	if n == 0 {
		n = uint8(f.bits())
	}
	var v [4]byte
	if f == IPv4 {
		binary.BigEndian.PutUint32(v[:], ^uint32(0)<<(32-uint(n)))
	} else {
		native.PutUint32(v[:], uint32(n))
	}
	e.attr(svcAttrNetmask, v[:])
}

// destination is a validated destination ready to encode.
type destination struct {
	*Destination
	family Family
}

func checkDestination(d *Destination) (destination, error) {
	n := destination{Destination: d, family: d.Family}
	if !d.Address.IsValid() {
		return n, invalidf("destination has no address")
	}
	if d.Address.Zone() != "" {
		return n, invalidf("destination address %s has a zone", d.Address)
	}
	af := familyOf(d.Address)
	if n.family == 0 {
		n.family = af
	}
	if n.family != af {
		return n, invalidf("destination address %s is not %s", d.Address, n.family)
	}
	return n, nil
}

func (e *encoder) destination(d destination, full bool) {
	nest := e.beginNest(cmdAttrDest)
	e.addr(destAttrAddr, d.Address)
	e.be16(destAttrPort, d.Port)
	e.u16(destAttrAddrFamily, uint16(d.family))
	if full {
		e.u32(destAttrFwdMethod, uint32(d.Forward))
		e.u32(destAttrWeight, d.Weight)
		e.u32(destAttrUThresh, d.UpperThreshold)
		e.u32(destAttrLThresh, d.LowerThreshold)
		if d.TunnelType != 0 {
			e.u8(destAttrTunType, uint8(d.TunnelType))
		}
		if d.TunnelPort != 0 {
			e.be16(destAttrTunPort, d.TunnelPort)
		}
		if d.TunnelFlags != 0 {
			e.u16(destAttrTunFlags, uint16(d.TunnelFlags))
		}
	}
	e.endNest(nest)
}

// Decoding.

// errTruncated reports attributes that do not fit their buffer.
var errTruncated = errors.New("truncated netlink attribute")

// forEachAttr calls fn for each attribute in b, with its type (flags
// masked) and payload. It fails on malformed attributes.
func forEachAttr(b []byte, fn func(typ uint16, v []byte) error) error {
	for len(b) > 0 {
		if len(b) < nlaHdrLen {
			return errTruncated
		}
		l := int(native.Uint16(b))
		if l < nlaHdrLen || l > len(b) {
			return errTruncated
		}
		if err := fn(native.Uint16(b[2:])&nlaTypeMask, b[nlaHdrLen:l]); err != nil {
			return err
		}
		if al := align4(l); al < len(b) {
			b = b[al:]
		} else {
			b = nil
		}
	}
	return nil
}

func badLen(what string, v []byte) error {
	return fmt.Errorf("attribute %s has %d bytes", what, len(v))
}

func getU8(what string, v []byte) (uint8, error) {
	if len(v) != 1 {
		return 0, badLen(what, v)
	}
	return v[0], nil
}

func getU16(what string, v []byte) (uint16, error) {
	if len(v) != 2 {
		return 0, badLen(what, v)
	}
	return native.Uint16(v), nil
}

func getBE16(what string, v []byte) (uint16, error) {
	if len(v) != 2 {
		return 0, badLen(what, v)
	}
	return binary.BigEndian.Uint16(v), nil
}

func getU32(what string, v []byte) (uint32, error) {
	if len(v) != 4 {
		return 0, badLen(what, v)
	}
	return native.Uint32(v), nil
}

// getUint reads a 4- or 8-byte counter.
func getUint(what string, v []byte) (uint64, error) {
	switch len(v) {
	case 4:
		return uint64(native.Uint32(v)), nil
	case 8:
		return native.Uint64(v), nil
	}
	return 0, badLen(what, v)
}

// getString reads a string attribute, without its terminating NUL.
func getString(v []byte) string {
	if i := indexNUL(v); i >= 0 {
		v = v[:i]
	}
	return string(v)
}

func indexNUL(v []byte) int {
	for i, c := range v {
		if c == 0 {
			return i
		}
	}
	return -1
}

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
	err := forEachAttr(b, func(typ uint16, v []byte) error {
		var p *uint64
		switch typ {
		case statsAttrConns:
			p = &s.Connections
		case statsAttrInPkts:
			p = &s.PacketsIn
		case statsAttrOutPkts:
			p = &s.PacketsOut
		case statsAttrInBytes:
			p = &s.BytesIn
		case statsAttrOutBytes:
			p = &s.BytesOut
		case statsAttrCPS:
			p = &s.CPS
		case statsAttrInPPS:
			p = &s.PPSIn
		case statsAttrOutPPS:
			p = &s.PPSOut
		case statsAttrInBPS:
			p = &s.BPSIn
		case statsAttrOutBPS:
			p = &s.BPSOut
		default:
			return nil // IPVS_STATS_ATTR_PAD and future counters
		}
		var err error
		*p, err = getUint("stats counter", v)
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
	err := forEachAttr(b, func(typ uint16, v []byte) error {
		var err error
		switch typ {
		case svcAttrAF:
			var f uint16
			f, err = getU16("af", v)
			s.Family, haveAF = Family(f), true
		case svcAttrProtocol:
			var p uint16
			p, err = getU16("protocol", v)
			s.Protocol = Protocol(p)
		case svcAttrAddr:
			addr = v
		case svcAttrPort:
			s.Port, err = getBE16("port", v)
		case svcAttrFWMark:
			s.FWMark, err = getU32("fwmark", v)
		case svcAttrSchedName:
			s.Scheduler = getString(v)
		case svcAttrPEName:
			s.PEName = getString(v)
		case svcAttrFlags:
			if len(v) != 8 {
				return badLen("flags", v)
			}
			s.Flags = ServiceFlags(native.Uint32(v) & native.Uint32(v[4:]))
		case svcAttrTimeout:
			s.Timeout, err = getU32("timeout", v)
		case svcAttrNetmask:
			if len(v) != 4 {
				return badLen("netmask", v)
			}
			mask = v
		case svcAttrStats:
			stats = v
		case svcAttrStats64:
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
		n := native.Uint32(v)
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
	err := forEachAttr(b, func(typ uint16, v []byte) error {
		var err error
		switch typ {
		case destAttrAddr:
			addr = v
		case destAttrPort:
			d.Port, err = getBE16("port", v)
		case destAttrFwdMethod:
			var m uint32
			m, err = getU32("fwd_method", v)
			d.Forward = ForwardMethod(m)
		case destAttrWeight:
			d.Weight, err = getU32("weight", v)
		case destAttrUThresh:
			d.UpperThreshold, err = getU32("u_thresh", v)
		case destAttrLThresh:
			d.LowerThreshold, err = getU32("l_thresh", v)
		case destAttrActiveConns:
			e.ActiveConns, err = getU32("activeconns", v)
		case destAttrInactConns:
			e.InactiveConns, err = getU32("inactconns", v)
		case destAttrPersistConns:
			e.PersistentConns, err = getU32("persistconns", v)
		case destAttrAddrFamily:
			var f uint16
			f, err = getU16("addr_family", v)
			d.Family = Family(f)
		case destAttrTunType:
			var t uint8
			t, err = getU8("tun_type", v)
			d.TunnelType = TunnelType(t)
		case destAttrTunPort:
			d.TunnelPort, err = getBE16("tun_port", v)
		case destAttrTunFlags:
			var f uint16
			f, err = getU16("tun_flags", v)
			d.TunnelFlags = TunnelFlags(f)
		case destAttrStats:
			stats = v
		case destAttrStats64:
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
	if len(data) < genlHdrLen {
		return nil, errors.New("message shorter than a generic netlink header")
	}
	return data[genlHdrLen:], nil
}

// findAttr returns the payload of the first top-level attribute typ.
func findAttr(b []byte, typ uint16) ([]byte, bool, error) {
	var (
		found []byte
		ok    bool
	)
	err := forEachAttr(b, func(t uint16, v []byte) error {
		if t == typ && !ok {
			found, ok = v, true
		}
		return nil
	})
	return found, ok, err
}

// decodeServiceMessage decodes one service message of a dump or GET reply
// (generic netlink header included).
func decodeServiceMessage(data []byte) (ServiceEntry, error) {
	p, err := genlPayload(data)
	if err != nil {
		return ServiceEntry{}, err
	}
	v, ok, err := findAttr(p, cmdAttrService)
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
	v, ok, err := findAttr(p, cmdAttrDest)
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
	err = forEachAttr(p, func(typ uint16, v []byte) error {
		var err error
		switch typ {
		case infoAttrVersion:
			i.Version, err = getU32("version", v)
		case infoAttrConnTabSize:
			i.ConnTableSize, err = getU32("conn_tab_size", v)
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
	err = forEachAttr(p, func(typ uint16, v []byte) error {
		var err error
		switch typ {
		case cmdAttrTimeoutTCP:
			c.TCP, err = getU32("timeout_tcp", v)
		case cmdAttrTimeoutTCPFin:
			c.TCPFin, err = getU32("timeout_tcp_fin", v)
		case cmdAttrTimeoutUDP:
			c.UDP, err = getU32("timeout_udp", v)
		}
		return err
	})
	return c, err
}
