package dataplane

import (
	"net/netip"
	"slices"

	"github.com/proxysinks/proxysinks/dataplane/render"
)

// Server is a virtual server with its options.
type Server struct {
	VS   render.VirtualServer
	Opts render.ServerOptions
}

// Dest is a destination with its options.
type Dest struct {
	D    render.Destination
	Opts render.DestOptions
}

// Plan is one round of changes. Objects in Create lists are new to the
// kernel; in Update lists they exist with other options.
type Plan struct {
	CreateServers, UpdateServers []Server
	DeleteServers                []Server
	CreateDests, UpdateDests     []Dest
	DeleteDests                  []Dest
	Bind, Unbind                 []netip.Addr
	AddEntries, DelEntries       []render.SetEntry
	// RetryAll writes every quarantined object of the plan, due or not
	// (a resync: Applier.Quarantine).
	RetryAll bool
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool {
	return len(p.CreateServers)+len(p.UpdateServers)+len(p.DeleteServers)+len(p.CreateDests)+
		len(p.UpdateDests)+len(p.DeleteDests)+len(p.Bind)+len(p.Unbind)+len(p.AddEntries)+len(p.DelEntries) == 0
}

func cmpVS(a, b render.VirtualServer) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	return int(a.Protocol) - int(b.Protocol)
}

func cmpDest(a, b render.Destination) int {
	if c := cmpVS(a.Server, b.Server); c != 0 {
		return c
	}
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	return int(a.Port) - int(b.Port)
}

func cmpEntry(a, b render.SetEntry) int {
	if a.Set != b.Set {
		if a.Set < b.Set {
			return -1
		}
		return 1
	}
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	if a.Protocol != b.Protocol {
		return int(a.Protocol) - int(b.Protocol)
	}
	if c := a.Addr2.Compare(b.Addr2); c != 0 {
		return c
	}
	if c := a.Net.Addr().Compare(b.Net.Addr()); c != 0 {
		return c
	}
	return a.Net.Bits() - b.Net.Bits()
}

// sort puts every list in a stable order, so that writes (and a dry run's
// output) do not depend on map iteration.
func (p *Plan) sort() {
	servers := func(l []Server) { slices.SortFunc(l, func(a, b Server) int { return cmpVS(a.VS, b.VS) }) }
	dests := func(l []Dest) { slices.SortFunc(l, func(a, b Dest) int { return cmpDest(a.D, b.D) }) }
	servers(p.CreateServers)
	servers(p.UpdateServers)
	servers(p.DeleteServers)
	dests(p.CreateDests)
	dests(p.UpdateDests)
	dests(p.DeleteDests)
	slices.SortFunc(p.Bind, netip.Addr.Compare)
	slices.SortFunc(p.Unbind, netip.Addr.Compare)
	slices.SortFunc(p.AddEntries, cmpEntry)
	slices.SortFunc(p.DelEntries, cmpEntry)
}
