package ipvstest

import (
	"math"
	"slices"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	uapi "github.com/proxysinks/proxysinks/netlinkraw/internal/ipvsuapi"
)

// Values of the fake kernel.
const (
	versionCode = 0x010201
	connTabSize = 4096
	hz          = 250 // CONFIG_HZ of Debian's kernels
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
		case uapi.CmdGetService:
			var entries [][]byte
			for _, pass := range []bool{false, true} { // address table, then fwmark table
				for _, s := range k.services {
					if (s.fwmark != 0) == pass {
						entries = append(entries, fillService(s))
					}
				}
			}
			c.dump(m, uapi.CmdNewService, entries)
		case uapi.CmdGetDest:
			var entries [][]byte
			nla, ok := a[uapi.CmdAttrService]
			if _, svc, e := k.parseService(nla, ok, false); e == 0 && svc != nil {
				for _, d := range svc.dests {
					entries = append(entries, fillDest(d))
				}
			}
			c.dump(m, uapi.CmdNewDest, entries)
		default:
			return unix.EOPNOTSUPP
		}
		return 0
	}
	switch cmd {
	case uapi.CmdGetService:
		nla, ok := a[uapi.CmdAttrService]
		_, svc, e := k.parseService(nla, ok, false)
		if e != 0 {
			return e
		}
		if svc == nil {
			return unix.ESRCH
		}
		c.reply(m, uapi.CmdNewService, fillService(svc))
		return 0
	case uapi.CmdGetInfo:
		ae := netlink.NewAttributeEncoder()
		ae.Uint32(uapi.InfoAttrVersion, versionCode)
		ae.Uint32(uapi.InfoAttrConnTabSize, connTabSize)
		b, _ := ae.Encode()
		c.reply(m, uapi.CmdSetInfo, b)
		return 0
	case uapi.CmdGetConfig:
		ae := netlink.NewAttributeEncoder()
		ae.Uint32(uapi.CmdAttrTimeoutTCP, k.timeouts[0])
		ae.Uint32(uapi.CmdAttrTimeoutTCPFin, k.timeouts[1])
		ae.Uint32(uapi.CmdAttrTimeoutUDP, k.timeouts[2])
		b, _ := ae.Encode()
		c.reply(m, uapi.CmdSetConfig, b)
		return 0
	case uapi.CmdGetDest:
		return unix.EOPNOTSUPP // dump only
	case uapi.CmdNewService, uapi.CmdSetService, uapi.CmdDelService, uapi.CmdNewDest, uapi.CmdSetDest, uapi.CmdDelDest, uapi.CmdZero, uapi.CmdFlush, uapi.CmdSetConfig:
		return k.set(cmd, a)
	}
	return unix.EOPNOTSUPP
}

// set mirrors ip_vs_genl_set_cmd.
func (k *Kernel) set(cmd uint8, a map[uint16][]byte) unix.Errno {
	switch {
	case cmd == uapi.CmdFlush:
		k.services = nil
		return 0
	case cmd == uapi.CmdSetConfig:
		t := k.timeouts
		for i, typ := range []uint16{uapi.CmdAttrTimeoutTCP, uapi.CmdAttrTimeoutTCPFin, uapi.CmdAttrTimeoutUDP} {
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
	case cmd == uapi.CmdZero && a[uapi.CmdAttrService] == nil:
		return 0 // counters are always zero here
	}
	full := cmd == uapi.CmdNewService || cmd == uapi.CmdSetService
	nla, ok := a[uapi.CmdAttrService]
	u, svc, errno := k.parseService(nla, ok, full)
	if errno != 0 {
		return errno
	}
	if cmd != uapi.CmdNewService && svc == nil {
		return unix.ESRCH
	}
	var ud destArgs
	if cmd == uapi.CmdNewDest || cmd == uapi.CmdSetDest || cmd == uapi.CmdDelDest {
		nla, ok := a[uapi.CmdAttrDest]
		if ud, errno = parseDest(nla, ok, cmd != uapi.CmdDelDest); errno != 0 {
			return errno
		}
		if ud.af == 0 {
			ud.af = svc.af
		}
		if ud.af != unix.AF_INET && ud.af != unix.AF_INET6 {
			return unix.EAFNOSUPPORT
		}
		if ud.af != svc.af && cmd != uapi.CmdDelDest && ud.fwd != uapi.ConnFwdTunnel {
			return unix.EINVAL
		}
	}
	switch cmd {
	case uapi.CmdNewService:
		if svc != nil {
			return unix.EEXIST
		}
		return k.addService(u)
	case uapi.CmdSetService:
		return k.editService(svc, u)
	case uapi.CmdDelService:
		k.services = slices.DeleteFunc(k.services, func(s *service) bool { return s == svc })
		return 0
	case uapi.CmdNewDest:
		return addDest(svc, ud)
	case uapi.CmdSetDest:
		return editDest(svc, ud)
	case uapi.CmdDelDest:
		i := findDest(svc, ud)
		if i < 0 {
			return unix.ENOENT
		}
		svc.dests = slices.Delete(svc.dests, i, i+1)
		return 0
	case uapi.CmdZero:
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
		pe: u.pe, flags: u.flags&^uapi.SvcFlagHashed | uapi.SvcFlagHashed, timeout: u.timeout, netmask: u.netmask,
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
	s.flags = u.flags | uapi.SvcFlagHashed
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
	if u.tunType == uapi.TunTypeGUE && u.tunPort == 0 {
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
