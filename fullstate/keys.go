package fullstate

import (
	"net/netip"

	"github.com/proxysinks/proxysinks/dataplane/render"
)

// The Manager's diffstores are keyed by compact copies of the rendered
// objects that hold no pointers (a netip.Addr holds one, for its zone, and
// a SetEntry the set's name), so that the garbage collector does not scan
// the stores' maps and slabs, about 130,000 objects at 10,000 services, at
// every cycle, and keys hash as plain memory. The conversion is exact both
// ways: IPv4, IPv4-mapped IPv6, zones and invalid values all come back as
// they were rendered.

// addrKey is a netip.Addr without its pointer.
type addrKey struct {
	b [16]byte
	// kind is kindInvalid, kind4, kind6 or, for an IPv6 address with a
	// zone, kindZone plus the zone's number in the Manager's zone table.
	kind uint16
}

const (
	kindInvalid = iota
	kind4
	kind6
	kindZone
)

// vsKey is a render.VirtualServer.
type vsKey struct {
	addr  addrKey
	port  uint16
	proto uint16
}

// destKey is a render.Destination.
type destKey struct {
	vs   vsKey
	addr addrKey
	port uint16
}

// entryKey is a render.SetEntry; set is the set name's number in the
// Manager's name table and bits is the prefix length plus one (0: no
// prefix).
type entryKey struct {
	set   uint16
	addr  addrKey
	proto uint16
	port  uint16
	addr2 addrKey
	net   addrKey
	bits  uint16
}

// names numbers strings (zones, set names): the keys hold the number.
type names struct {
	index map[string]uint16
	list  []string
}

func (n *names) number(s string) uint16 {
	if i, ok := n.index[s]; ok {
		return i
	}
	if n.index == nil {
		n.index = map[string]uint16{}
	}
	i := uint16(len(n.list))
	n.index[s] = i
	n.list = append(n.list, s)
	return i
}

func (m *Manager) addrKey(a netip.Addr) addrKey {
	switch {
	case a.Is4():
		return addrKey{a.As16(), kind4}
	case !a.IsValid():
		return addrKey{}
	case a.Zone() == "":
		return addrKey{a.As16(), kind6}
	}
	return addrKey{a.As16(), kindZone + m.zones.number(a.Zone())}
}

func (m *Manager) addr(k addrKey) netip.Addr {
	switch k.kind {
	case kindInvalid:
		return netip.Addr{}
	case kind4:
		return netip.AddrFrom16(k.b).Unmap()
	case kind6:
		return netip.AddrFrom16(k.b)
	}
	return netip.AddrFrom16(k.b).WithZone(m.zones.list[k.kind-kindZone])
}

func (m *Manager) vsKey(vs render.VirtualServer) vsKey {
	return vsKey{m.addrKey(vs.Addr), vs.Port, uint16(vs.Protocol)}
}

func (m *Manager) vs(k vsKey) render.VirtualServer {
	return render.VirtualServer{Protocol: render.Protocol(k.proto), Addr: m.addr(k.addr), Port: k.port}
}

func (m *Manager) destKey(d render.Destination) destKey {
	return destKey{m.vsKey(d.Server), m.addrKey(d.Addr), d.Port}
}

func (m *Manager) dest(k destKey) render.Destination {
	return render.Destination{Server: m.vs(k.vs), Addr: m.addr(k.addr), Port: k.port}
}

func (m *Manager) entryKey(e render.SetEntry) entryKey {
	return entryKey{
		set: m.sets.number(e.Set), addr: m.addrKey(e.Addr), proto: uint16(e.Protocol), port: e.Port,
		addr2: m.addrKey(e.Addr2), net: m.addrKey(e.Net.Addr()), bits: uint16(e.Net.Bits() + 1),
	}
}

func (m *Manager) entry(k entryKey) render.SetEntry {
	e := render.SetEntry{Set: m.sets.list[k.set], Addr: m.addr(k.addr), Protocol: render.Protocol(k.proto),
		Port: k.port, Addr2: m.addr(k.addr2)}
	if net := m.addr(k.net); net.IsValid() {
		// A prefix keeps no zone; bits -1 is a prefix with an invalid length.
		e.Net = netip.PrefixFrom(net, int(k.bits)-1)
	}
	return e
}
