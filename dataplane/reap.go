package dataplane

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
)

// Terminating returns how many destinations wait for their connections to end.
func (a *Applier) Terminating() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.terminating)
}

// IsTerminating reports whether d waits for its connections to end.
func (a *Applier) IsTerminating(d render.Destination) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.terminating[d]
	return ok
}

// Reap removes terminating destinations that have no active or inactive
// connections left, and returns how many it removed.
func (a *Applier) Reap() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.terminating) == 0 {
		return 0, nil
	}
	byServer := map[render.VirtualServer][]render.Destination{}
	for d := range a.terminating {
		byServer[d.Server] = append(byServer[d.Server], d)
	}
	var ops []ipvs.Op
	var dests []render.Destination
	for vs, ds := range byServer {
		svc := Service(vs, render.ServerOptions{})
		entries, err := a.W.Destinations(svc)
		if err != nil {
			return 0, fmt.Errorf("dataplane: read destinations of %s: %w", vs, err)
		}
		for _, d := range a.idle(ds, entries) {
			ops = append(ops, ipvs.Op{Kind: ipvs.OpRemoveDestination, Service: svc, Destination: Destination(d, render.DestOptions{})})
			dests = append(dests, d)
			if a.tracked != nil {
				put(&a.tracked.objs.Dests, d, true)
			}
		}
	}
	if len(ops) == 0 {
		return 0, nil
	}
	removed := 0
	var errs []error
	for i, err := range a.W.IPVS(ops) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		delete(a.terminating, dests[i])
		removed++
	}
	return removed, joinErrors(errs)
}

// idle returns the destinations of ds that the kernel's entries of their
// server show without connections; those the kernel no longer holds leave
// the terminating list. The caller holds a.mu.
func (a *Applier) idle(ds []render.Destination, entries []ipvs.DestinationEntry) []render.Destination {
	conns := map[netip.AddrPort]uint32{}
	present := map[netip.AddrPort]bool{}
	for _, e := range entries {
		ap := netip.AddrPortFrom(e.Destination.Address, e.Destination.Port)
		conns[ap] = e.ActiveConns + e.InactiveConns
		present[ap] = true
	}
	var out []render.Destination
	for _, d := range ds {
		ap := netip.AddrPortFrom(d.Addr, d.Port)
		if !present[ap] {
			delete(a.terminating, d) // gone already
			continue
		}
		if conns[ap] == 0 {
			out = append(out, d)
		}
	}
	return out
}

// ReapInto is Reap for a sync's stats: what it removed is counted in
// st.Writes and st.Reaped, its error joined to st.Err. The controllers log
// it with the sync, once the kernel is programmed.
func (a *Applier) ReapInto(st *SyncStats) {
	n, err := a.Reap()
	st.Writes += n
	st.Reaped += n
	st.Err = errors.Join(st.Err, err)
}
