// Package objects is what both IPVS sinks share to track kernel objects:
// compact, pointer-free keys for the rendered objects, making a
// dataplane.Plan from the objects that changed, recording a Result, and
// reconciling tracked objects with what the kernel holds (adoption at
// start-up, drift repair on resync). How a sink decides what changed (a
// diffstore round, reference counts) is its own.
package objects

import (
	"net/netip"

	"github.com/proxysinks/proxysinks/dataplane/render"
)

// The keys are compact copies of the rendered objects that hold no
// pointers (a netip.Addr holds one, for its zone, and a SetEntry the set's
// name), so that the garbage collector does not scan the maps and slabs
// holding them, about 130,000 objects at 10,000 services, at every cycle,
// and keys hash as plain memory. The conversion is exact both ways: IPv4,
// IPv4-mapped IPv6, zones and invalid values all come back as they were
// rendered. Zones and set names are numbered in a Keys table, so keys are
// only meaningful with the table that made them.

// AddrKey is a netip.Addr without its pointer.
type AddrKey struct {
	b [16]byte
	// kind is kindInvalid, kind4, kind6 or, for an IPv6 address with a
	// zone, kindZone plus the zone's number in the table.
	kind uint16
}

const (
	kindInvalid = iota
	kind4
	kind6
	kindZone
)

// ServerKey is a render.VirtualServer.
type ServerKey struct {
	addr  AddrKey
	port  uint16
	proto uint16
}

// DestKey is a render.Destination.
type DestKey struct {
	vs   ServerKey
	addr AddrKey
	port uint16
}

// EntryKey is a render.SetEntry; set is the set name's number in the
// table and bits is the prefix length plus one (0: no prefix).
type EntryKey struct {
	set   uint16
	addr  AddrKey
	proto uint16
	port  uint16
	addr2 AddrKey
	net   AddrKey
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

// Keys converts rendered objects to keys and back. The zero value is ready
// to use. It is not safe for concurrent use.
type Keys struct {
	zones names // zones of IPv6 addresses
	sets  names // set names
}

// Addr returns a's key.
func (t *Keys) Addr(a netip.Addr) AddrKey {
	switch {
	case a.Is4():
		return AddrKey{a.As16(), kind4}
	case !a.IsValid():
		return AddrKey{}
	case a.Zone() == "":
		return AddrKey{a.As16(), kind6}
	}
	return AddrKey{a.As16(), kindZone + t.zones.number(a.Zone())}
}

// AddrOf returns the address of k.
func (t *Keys) AddrOf(k AddrKey) netip.Addr {
	switch k.kind {
	case kindInvalid:
		return netip.Addr{}
	case kind4:
		return netip.AddrFrom16(k.b).Unmap()
	case kind6:
		return netip.AddrFrom16(k.b)
	}
	return netip.AddrFrom16(k.b).WithZone(t.zones.list[k.kind-kindZone])
}

// Server returns vs's key.
func (t *Keys) Server(vs render.VirtualServer) ServerKey {
	return ServerKey{t.Addr(vs.Addr), vs.Port, uint16(vs.Protocol)}
}

// ServerOf returns the virtual server of k.
func (t *Keys) ServerOf(k ServerKey) render.VirtualServer {
	return render.VirtualServer{Protocol: render.Protocol(k.proto), Addr: t.AddrOf(k.addr), Port: k.port}
}

// Dest returns d's key.
func (t *Keys) Dest(d render.Destination) DestKey {
	return DestKey{t.Server(d.Server), t.Addr(d.Addr), d.Port}
}

// DestOf returns the destination of k.
func (t *Keys) DestOf(k DestKey) render.Destination {
	return render.Destination{Server: t.ServerOf(k.vs), Addr: t.AddrOf(k.addr), Port: k.port}
}

// Entry returns e's key.
func (t *Keys) Entry(e render.SetEntry) EntryKey {
	return EntryKey{
		set: t.sets.number(e.Set), addr: t.Addr(e.Addr), proto: uint16(e.Protocol), port: e.Port,
		addr2: t.Addr(e.Addr2), net: t.Addr(e.Net.Addr()), bits: uint16(e.Net.Bits() + 1),
	}
}

// EntryOf returns the set entry of k.
func (t *Keys) EntryOf(k EntryKey) render.SetEntry {
	e := render.SetEntry{Set: t.sets.list[k.set], Addr: t.AddrOf(k.addr), Protocol: render.Protocol(k.proto),
		Port: k.port, Addr2: t.AddrOf(k.addr2)}
	if net := t.AddrOf(k.net); net.IsValid() {
		// A prefix keeps no zone; bits -1 is a prefix with an invalid length.
		e.Net = netip.PrefixFrom(net, int(k.bits)-1)
	}
	return e
}
