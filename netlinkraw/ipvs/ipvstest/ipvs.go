package ipvstest

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Commands and attributes of linux/ip_vs.h.
const (
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

	aService    = 1
	aDest       = 2
	aTimeoutTCP = 4
	aTimeoutFin = 5
	aTimeoutUDP = 6

	sAF       = 1
	sProtocol = 2
	sAddr     = 3
	sPort     = 4
	sFWMark   = 5
	sSched    = 6
	sFlags    = 7
	sTimeout  = 8
	sNetmask  = 9
	sStats    = 10
	sPEName   = 11
	sStats64  = 12

	dAddr    = 1
	dPort    = 2
	dFwd     = 3
	dWeight  = 4
	dUThresh = 5
	dLThresh = 6
	dActive  = 7
	dInact   = 8
	dPersist = 9
	dStats   = 10
	dAF      = 11
	dStats64 = 12
	dTunType = 13
	dTunPort = 14
	dTunFlag = 15

	flagHashed   = 0x2
	connFwdMask  = 0x7
	connFwdTun   = 0x2
	tunTypeGUE   = 1
	versionCode  = 0x010201
	connTabSize  = 4096
	hz           = 250 // CONFIG_HZ of Debian's kernels
	tcpProto     = 6
	schedNameMax = 15
	peNameMax    = 16
)

// service is the kernel's struct ip_vs_service, reduced to what netlink
// shows.
type service struct {
	af       uint16
	protocol uint16
	addr     [16]byte
	port     uint16 // host order
	fwmark   uint32
	sched    string // "" for none
	pe       string
	flags    uint32
	timeout  uint32
	netmask  [4]byte // as received (be32)
	dests    []*dest // newest first, like list_add_rcu
}

type dest struct {
	af       uint16
	addr     [16]byte
	port     uint16
	fwd      uint32
	weight   uint32
	uthresh  uint32
	lthresh  uint32
	tunType  uint8
	tunPort  uint16
	tunFlags uint16
}

// attrKind is an nla_policy type.
type attrKind int

const (
	kU8 attrKind = iota + 1
	kU16
	kU32
	kBinary
	kNested
	kNulString
)

type policy map[uint16]struct {
	kind attrKind
	max  int
}

var (
	cmdPolicy = policy{
		aService: {kNested, 0}, aDest: {kNested, 0}, 3: {kNested, 0},
		aTimeoutTCP: {kU32, 0}, aTimeoutFin: {kU32, 0}, aTimeoutUDP: {kU32, 0},
	}
	svcPolicy = policy{
		sAF: {kU16, 0}, sProtocol: {kU16, 0}, sAddr: {kBinary, 16}, sPort: {kU16, 0},
		sFWMark: {kU32, 0}, sSched: {kNulString, schedNameMax}, sPEName: {kNulString, peNameMax},
		sFlags: {kBinary, 8}, sTimeout: {kU32, 0}, sNetmask: {kU32, 0}, sStats: {kNested, 0},
	}
	destPolicy = policy{
		dAddr: {kBinary, 16}, dPort: {kU16, 0}, dFwd: {kU32, 0}, dWeight: {kU32, 0},
		dUThresh: {kU32, 0}, dLThresh: {kU32, 0}, dActive: {kU32, 0}, dInact: {kU32, 0},
		dPersist: {kU32, 0}, dStats: {kNested, 0}, dAF: {kU16, 0}, dTunType: {kU8, 0},
		dTunPort: {kU16, 0}, dTunFlag: {kU16, 0},
	}
)

// parse splits attributes like nla_parse_deprecated: the last of a type
// wins, unknown types are ignored, known ones are checked against the
// policy.
func parse(b []byte, p policy) (map[uint16][]byte, unix.Errno) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, unix.EINVAL
	}
	out := map[uint16][]byte{}
	for ad.Next() {
		t := ad.Type()
		v := ad.Bytes()
		if pol, ok := p[t]; ok {
			switch pol.kind {
			case kU8:
				if len(v) < 1 {
					return nil, unix.ERANGE
				}
			case kU16:
				if len(v) < 2 {
					return nil, unix.ERANGE
				}
			case kU32:
				if len(v) < 4 {
					return nil, unix.ERANGE
				}
			case kBinary:
				if pol.max > 0 && len(v) > pol.max {
					return nil, unix.ERANGE
				}
			case kNested:
				if len(v) != 0 && len(v) < 4 {
					return nil, unix.ERANGE
				}
			case kNulString:
				n := min(len(v), pol.max+1)
				if n == 0 || slices.Index(v[:n], 0) < 0 {
					return nil, unix.EINVAL
				}
			}
		}
		out[t] = v
	}
	if ad.Err() != nil {
		return nil, unix.EINVAL
	}
	return out, 0
}

func u16(v []byte) uint16  { return binary.NativeEndian.Uint16(v) }
func be16(v []byte) uint16 { return binary.BigEndian.Uint16(v) }
func u32(v []byte) uint32  { return binary.NativeEndian.Uint32(v) }
func cstr(v []byte) string {
	if i := slices.Index(v, 0); i >= 0 {
		v = v[:i]
	}
	return string(v)
}

// svcArgs is struct ip_vs_service_user_kern.
type svcArgs struct {
	af, protocol uint16
	addr         [16]byte
	port         uint16
	fwmark       uint32
	sched, pe    string
	flags        uint32
	timeout      uint32
	netmask      [4]byte
}

// parseService mirrors ip_vs_genl_parse_service.
func (k *Kernel) parseService(nla []byte, present, full bool) (svcArgs, *service, unix.Errno) {
	var u svcArgs
	if !present {
		return u, nil, unix.EINVAL
	}
	a, errno := parse(nla, svcPolicy)
	if errno != 0 {
		return u, nil, unix.EINVAL
	}
	af, fw := a[sAF], a[sFWMark]
	if af == nil || (fw == nil && (a[sPort] == nil || a[sProtocol] == nil || a[sAddr] == nil)) {
		return u, nil, unix.EINVAL
	}
	u.af = u16(af)
	if u.af != unix.AF_INET && u.af != unix.AF_INET6 {
		return u, nil, unix.EAFNOSUPPORT
	}
	if fw != nil {
		u.protocol = tcpProto
		u.fwmark = u32(fw)
	} else {
		u.protocol = u16(a[sProtocol])
		copy(u.addr[:], a[sAddr])
		u.port = be16(a[sPort])
	}
	svc := k.findService(u)
	if full {
		if a[sSched] == nil || a[sFlags] == nil || a[sTimeout] == nil || a[sNetmask] == nil {
			return u, svc, unix.EINVAL
		}
		var fl [8]byte
		copy(fl[:], a[sFlags])
		flags, mask := u32(fl[:]), u32(fl[4:])
		if svc != nil {
			u.flags = svc.flags
		}
		u.flags = u.flags&^mask | flags&mask
		u.sched = cstr(a[sSched])
		if a[sPEName] != nil {
			u.pe = cstr(a[sPEName])
		}
		u.timeout = u32(a[sTimeout])
		copy(u.netmask[:], a[sNetmask])
	}
	return u, svc, 0
}

func (k *Kernel) findService(u svcArgs) *service {
	for _, s := range k.services {
		if s.af != u.af {
			continue
		}
		if u.fwmark != 0 {
			if s.fwmark == u.fwmark {
				return s
			}
			continue
		}
		if s.fwmark == 0 && s.protocol == u.protocol && s.port == u.port && sameAddr(u.af, s.addr, u.addr) {
			return s
		}
	}
	return nil
}

// sameAddr compares addresses of family af as ip_vs_addr_equal does.
func sameAddr(af uint16, a, b [16]byte) bool {
	if af == unix.AF_INET6 {
		return a == b
	}
	return [4]byte(a[:4]) == [4]byte(b[:4])
}

// destArgs is struct ip_vs_dest_user_kern.
type destArgs struct {
	af       uint16
	addr     [16]byte
	port     uint16
	fwd      uint32
	weight   int32
	uthresh  uint32
	lthresh  uint32
	tunType  uint8
	tunPort  uint16
	tunFlags uint16
}

// parseDest mirrors ip_vs_genl_parse_dest.
func parseDest(nla []byte, present, full bool) (destArgs, unix.Errno) {
	var u destArgs
	if !present {
		return u, unix.EINVAL
	}
	a, errno := parse(nla, destPolicy)
	if errno != 0 {
		return u, unix.EINVAL
	}
	if a[dAddr] == nil || a[dPort] == nil {
		return u, unix.EINVAL
	}
	copy(u.addr[:], a[dAddr])
	u.port = be16(a[dPort])
	if v := a[dAF]; v != nil {
		u.af = u16(v)
	}
	if full {
		if a[dFwd] == nil || a[dWeight] == nil || a[dUThresh] == nil || a[dLThresh] == nil {
			return u, unix.EINVAL
		}
		u.fwd = u32(a[dFwd]) & connFwdMask
		u.weight = int32(u32(a[dWeight]))
		u.uthresh = u32(a[dUThresh])
		u.lthresh = u32(a[dLThresh])
		if v := a[dTunType]; v != nil {
			u.tunType = v[0]
		}
		if v := a[dTunPort]; v != nil {
			u.tunPort = be16(v)
		}
		if v := a[dTunFlag]; v != nil {
			u.tunFlags = u16(v)
		}
	}
	return u, 0
}

// ipvs runs one IPVS request, like ip_vs_genl_set_cmd, ip_vs_genl_get_cmd
// and the dump functions.
func (c *conn) ipvs(m netlink.Message) unix.Errno {
	if len(m.Data) < 4 {
		return unix.EINVAL
	}
	cmd := m.Data[0]
	a, errno := parse(m.Data[4:], cmdPolicy)
	if errno != 0 {
		return errno
	}
	k := c.k
	if m.Header.Flags&netlink.Dump == netlink.Dump {
		switch cmd {
		case cmdGetService:
			var entries [][]byte
			for _, pass := range []bool{false, true} { // address table, then fwmark table
				for _, s := range k.services {
					if (s.fwmark != 0) == pass {
						entries = append(entries, fillService(s))
					}
				}
			}
			c.dump(m, cmdNewService, entries)
		case cmdGetDest:
			var entries [][]byte
			nla, ok := a[aService]
			if _, svc, e := k.parseService(nla, ok, false); e == 0 && svc != nil {
				for _, d := range svc.dests {
					entries = append(entries, fillDest(d))
				}
			}
			c.dump(m, cmdNewDest, entries)
		default:
			return unix.EOPNOTSUPP
		}
		return 0
	}
	switch cmd {
	case cmdGetService:
		nla, ok := a[aService]
		_, svc, e := k.parseService(nla, ok, false)
		if e != 0 {
			return e
		}
		if svc == nil {
			return unix.ESRCH
		}
		c.reply(m, cmdNewService, fillService(svc))
		return 0
	case cmdGetInfo:
		ae := netlink.NewAttributeEncoder()
		ae.Uint32(1, versionCode)
		ae.Uint32(2, connTabSize)
		b, _ := ae.Encode()
		c.reply(m, cmdSetInfo, b)
		return 0
	case cmdGetConfig:
		ae := netlink.NewAttributeEncoder()
		ae.Uint32(aTimeoutTCP, k.timeouts[0])
		ae.Uint32(aTimeoutFin, k.timeouts[1])
		ae.Uint32(aTimeoutUDP, k.timeouts[2])
		b, _ := ae.Encode()
		c.reply(m, cmdSetConfig, b)
		return 0
	case cmdGetDest:
		return unix.EOPNOTSUPP // dump only
	case cmdNewService, cmdSetService, cmdDelService, cmdNewDest, cmdSetDest, cmdDelDest, cmdZero, cmdFlush, cmdSetConfig:
		return k.set(cmd, a)
	}
	return unix.EOPNOTSUPP
}

// set mirrors ip_vs_genl_set_cmd.
func (k *Kernel) set(cmd uint8, a map[uint16][]byte) unix.Errno {
	switch {
	case cmd == cmdFlush:
		k.services = nil
		return 0
	case cmd == cmdSetConfig:
		t := k.timeouts
		for i, typ := range []uint16{aTimeoutTCP, aTimeoutFin, aTimeoutUDP} {
			if v := a[typ]; v != nil {
				t[i] = u32(v)
			}
		}
		for _, v := range t {
			if int32(v) < 0 || v > math.MaxInt32/hz {
				return unix.EINVAL
			}
		}
		for i, v := range t {
			if v != 0 {
				k.timeouts[i] = v
			}
		}
		return 0
	case cmd == cmdZero && a[aService] == nil:
		return 0 // counters are always zero here
	}
	full := cmd == cmdNewService || cmd == cmdSetService
	nla, ok := a[aService]
	u, svc, errno := k.parseService(nla, ok, full)
	if errno != 0 {
		return errno
	}
	if cmd != cmdNewService && svc == nil {
		return unix.ESRCH
	}
	var ud destArgs
	if cmd == cmdNewDest || cmd == cmdSetDest || cmd == cmdDelDest {
		nla, ok := a[aDest]
		if ud, errno = parseDest(nla, ok, cmd != cmdDelDest); errno != 0 {
			return errno
		}
		if ud.af == 0 {
			ud.af = svc.af
		}
		if ud.af != unix.AF_INET && ud.af != unix.AF_INET6 {
			return unix.EAFNOSUPPORT
		}
		if ud.af != svc.af && cmd != cmdDelDest && ud.fwd != connFwdTun {
			return unix.EINVAL
		}
	}
	switch cmd {
	case cmdNewService:
		if svc != nil {
			return unix.EEXIST
		}
		return k.addService(u)
	case cmdSetService:
		return k.editService(svc, u)
	case cmdDelService:
		k.services = slices.DeleteFunc(k.services, func(s *service) bool { return s == svc })
		return 0
	case cmdNewDest:
		return addDest(svc, ud)
	case cmdSetDest:
		return editDest(svc, ud)
	case cmdDelDest:
		i := findDest(svc, ud)
		if i < 0 {
			return unix.ENOENT
		}
		svc.dests = slices.Delete(svc.dests, i, i+1)
		return 0
	case cmdZero:
		return 0
	}
	return unix.EINVAL
}

// checkNames mirrors the scheduler, persistence engine and IPv6 prefix
// checks of ip_vs_add_service and ip_vs_edit_service.
func (k *Kernel) checkNames(u svcArgs) unix.Errno {
	if u.sched != "none" && !k.schedulers[u.sched] {
		return unix.ENOENT
	}
	if u.pe != "" && u.pe != "sip" {
		return unix.ENOENT
	}
	if u.af == unix.AF_INET6 {
		if plen := u32(u.netmask[:]); plen < 1 || plen > 128 {
			return unix.EINVAL
		}
	}
	return 0
}

func (k *Kernel) addService(u svcArgs) unix.Errno {
	if e := k.checkNames(u); e != 0 {
		return e
	}
	s := &service{
		af: u.af, protocol: u.protocol, addr: u.addr, port: u.port, fwmark: u.fwmark,
		pe: u.pe, flags: u.flags&^flagHashed | flagHashed, timeout: u.timeout, netmask: u.netmask,
	}
	if u.af == unix.AF_INET {
		clear(s.addr[4:])
	}
	if u.sched != "none" {
		s.sched = u.sched
	}
	k.services = append(k.services, s)
	return 0
}

func (k *Kernel) editService(s *service, u svcArgs) unix.Errno {
	if e := k.checkNames(u); e != 0 {
		return e
	}
	s.sched = ""
	if u.sched != "none" {
		s.sched = u.sched
	}
	s.flags = u.flags | flagHashed
	s.timeout = u.timeout
	s.netmask = u.netmask
	s.pe = u.pe
	return 0
}

func findDest(s *service, u destArgs) int {
	for i, d := range s.dests {
		if d.af == u.af && d.port == u.port && sameAddr(u.af, d.addr, u.addr) {
			return i
		}
	}
	return -1
}

// checkDest mirrors the argument checks of ip_vs_add_dest/ip_vs_edit_dest.
func checkDest(u destArgs) unix.Errno {
	if u.weight < 0 || u.lthresh > u.uthresh {
		return unix.ERANGE
	}
	if u.tunType == tunTypeGUE && u.tunPort == 0 {
		return unix.EINVAL
	}
	return 0
}

// usableAddr approximates ip_vs_new_dest's address type check.
func usableAddr(u destArgs) bool {
	a := u.addr
	if u.af == unix.AF_INET6 {
		switch {
		case a == [16]byte{}: // unspecified
			return false
		case a[0] == 0xff: // multicast
			return false
		case a[0] == 0xfe && a[1]&0xc0 == 0x80: // link-local
			return false
		case [12]byte(a[:12]) == [12]byte{10: 0xff, 11: 0xff}: // IPv4-mapped
			return false
		}
		return true
	}
	switch {
	case a[0] == 0: // 0.0.0.0/8
		return false
	case a[0] >= 224 && a[0] < 240: // multicast
		return false
	case [4]byte(a[:4]) == [4]byte{255, 255, 255, 255}:
		return false
	}
	return true
}

func addDest(s *service, u destArgs) unix.Errno {
	if e := checkDest(u); e != 0 {
		return e
	}
	if findDest(s, u) >= 0 {
		return unix.EEXIST
	}
	if !usableAddr(u) {
		return unix.EINVAL
	}
	d := &dest{af: u.af, addr: u.addr, port: u.port}
	if u.af == unix.AF_INET {
		clear(d.addr[4:])
	}
	updateDest(d, u)
	s.dests = slices.Insert(s.dests, 0, d)
	return 0
}

func editDest(s *service, u destArgs) unix.Errno {
	if e := checkDest(u); e != 0 {
		return e
	}
	i := findDest(s, u)
	if i < 0 {
		return unix.ENOENT
	}
	updateDest(s.dests[i], u)
	return 0
}

func updateDest(d *dest, u destArgs) {
	d.fwd = u.fwd
	d.weight = uint32(u.weight)
	d.uthresh = u.uthresh
	d.lthresh = u.lthresh
	d.tunType = u.tunType
	d.tunPort = u.tunPort
	d.tunFlags = u.tunFlags
}

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
	nest(ae, aService, func(e *netlink.AttributeEncoder) {
		e.Uint16(sAF, s.af)
		if s.fwmark != 0 {
			e.Uint32(sFWMark, s.fwmark)
		} else {
			e.Uint16(sProtocol, s.protocol)
			e.Bytes(sAddr, s.addr[:])
			e.Bytes(sPort, be16Bytes(s.port))
		}
		sched := s.sched
		if sched == "" {
			sched = "none"
		}
		e.String(sSched, sched)
		if s.pe != "" {
			e.String(sPEName, s.pe)
		}
		fl := binary.NativeEndian.AppendUint32(nil, s.flags)
		fl = binary.NativeEndian.AppendUint32(fl, math.MaxUint32)
		e.Bytes(sFlags, fl)
		e.Uint32(sTimeout, s.timeout)
		e.Bytes(sNetmask, s.netmask[:])
		stats(e, sStats, false)
		stats(e, sStats64, true)
	})
	b, _ := ae.Encode()
	return b
}

// fillDest mirrors ip_vs_genl_fill_dest.
func fillDest(d *dest) []byte {
	ae := netlink.NewAttributeEncoder()
	nest(ae, aDest, func(e *netlink.AttributeEncoder) {
		e.Bytes(dAddr, d.addr[:])
		e.Bytes(dPort, be16Bytes(d.port))
		e.Uint32(dFwd, d.fwd&connFwdMask)
		e.Uint32(dWeight, d.weight)
		e.Uint8(dTunType, d.tunType)
		e.Bytes(dTunPort, be16Bytes(d.tunPort))
		e.Uint16(dTunFlag, d.tunFlags)
		e.Uint32(dUThresh, d.uthresh)
		e.Uint32(dLThresh, d.lthresh)
		e.Uint32(dActive, 0)
		e.Uint32(dInact, 0)
		e.Uint32(dPersist, 0)
		e.Uint16(dAF, d.af)
		stats(e, dStats, false)
		stats(e, dStats64, true)
	})
	b, _ := ae.Encode()
	return b
}
