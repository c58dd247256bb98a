package ipvstest

import (
	"encoding/binary"
	"slices"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	uapi "github.com/proxysinks/proxysinks/netlinkraw/internal/ipvsuapi"
)

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
		uapi.CmdAttrService: {kNested, 0}, uapi.CmdAttrDest: {kNested, 0}, uapi.CmdAttrDaemon: {kNested, 0},
		uapi.CmdAttrTimeoutTCP: {kU32, 0}, uapi.CmdAttrTimeoutTCPFin: {kU32, 0}, uapi.CmdAttrTimeoutUDP: {kU32, 0},
	}
	svcPolicy = policy{
		uapi.SvcAttrAF: {kU16, 0}, uapi.SvcAttrProtocol: {kU16, 0}, uapi.SvcAttrAddr: {kBinary, 16}, uapi.SvcAttrPort: {kU16, 0},
		uapi.SvcAttrFWMark: {kU32, 0}, uapi.SvcAttrSchedName: {kNulString, uapi.SchedNameMax}, uapi.SvcAttrPEName: {kNulString, uapi.PENameMax},
		uapi.SvcAttrFlags: {kBinary, 8}, uapi.SvcAttrTimeout: {kU32, 0}, uapi.SvcAttrNetmask: {kU32, 0}, uapi.SvcAttrStats: {kNested, 0},
	}
	destPolicy = policy{
		uapi.DestAttrAddr: {kBinary, 16}, uapi.DestAttrPort: {kU16, 0}, uapi.DestAttrFwdMethod: {kU32, 0}, uapi.DestAttrWeight: {kU32, 0},
		uapi.DestAttrUThresh: {kU32, 0}, uapi.DestAttrLThresh: {kU32, 0}, uapi.DestAttrActiveConns: {kU32, 0}, uapi.DestAttrInactConns: {kU32, 0},
		uapi.DestAttrPersistConns: {kU32, 0}, uapi.DestAttrStats: {kNested, 0}, uapi.DestAttrAddrFamily: {kU16, 0}, uapi.DestAttrTunType: {kU8, 0},
		uapi.DestAttrTunPort: {kU16, 0}, uapi.DestAttrTunFlags: {kU16, 0},
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
	af, fw := a[uapi.SvcAttrAF], a[uapi.SvcAttrFWMark]
	if af == nil || (fw == nil && (a[uapi.SvcAttrPort] == nil || a[uapi.SvcAttrProtocol] == nil || a[uapi.SvcAttrAddr] == nil)) {
		return u, nil, unix.EINVAL
	}
	u.af = u16(af)
	if u.af != unix.AF_INET && u.af != unix.AF_INET6 {
		return u, nil, unix.EAFNOSUPPORT
	}
	if fw != nil {
		u.protocol = unix.IPPROTO_TCP
		u.fwmark = u32(fw)
	} else {
		u.protocol = u16(a[uapi.SvcAttrProtocol])
		copy(u.addr[:], a[uapi.SvcAttrAddr])
		u.port = be16(a[uapi.SvcAttrPort])
	}
	svc := k.findService(u)
	if full {
		if a[uapi.SvcAttrSchedName] == nil || a[uapi.SvcAttrFlags] == nil || a[uapi.SvcAttrTimeout] == nil || a[uapi.SvcAttrNetmask] == nil {
			return u, svc, unix.EINVAL
		}
		var fl [8]byte
		copy(fl[:], a[uapi.SvcAttrFlags])
		flags, mask := u32(fl[:]), u32(fl[4:])
		if svc != nil {
			u.flags = svc.flags
		}
		u.flags = u.flags&^mask | flags&mask
		u.sched = cstr(a[uapi.SvcAttrSchedName])
		if a[uapi.SvcAttrPEName] != nil {
			u.pe = cstr(a[uapi.SvcAttrPEName])
		}
		u.timeout = u32(a[uapi.SvcAttrTimeout])
		copy(u.netmask[:], a[uapi.SvcAttrNetmask])
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
	if a[uapi.DestAttrAddr] == nil || a[uapi.DestAttrPort] == nil {
		return u, unix.EINVAL
	}
	copy(u.addr[:], a[uapi.DestAttrAddr])
	u.port = be16(a[uapi.DestAttrPort])
	if v := a[uapi.DestAttrAddrFamily]; v != nil {
		u.af = u16(v)
	}
	if full {
		if a[uapi.DestAttrFwdMethod] == nil || a[uapi.DestAttrWeight] == nil || a[uapi.DestAttrUThresh] == nil || a[uapi.DestAttrLThresh] == nil {
			return u, unix.EINVAL
		}
		u.fwd = u32(a[uapi.DestAttrFwdMethod]) & uapi.ConnFwdMask
		u.weight = int32(u32(a[uapi.DestAttrWeight]))
		u.uthresh = u32(a[uapi.DestAttrUThresh])
		u.lthresh = u32(a[uapi.DestAttrLThresh])
		if v := a[uapi.DestAttrTunType]; v != nil {
			u.tunType = v[0]
		}
		if v := a[uapi.DestAttrTunPort]; v != nil {
			u.tunPort = be16(v)
		}
		if v := a[uapi.DestAttrTunFlags]; v != nil {
			u.tunFlags = u16(v)
		}
	}
	return u, 0
}
