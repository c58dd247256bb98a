package dataplane

import (
	"fmt"
	"net/netip"

	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
)

// remove writes the plan's removals in reverse order of creation:
// destinations (a TCP one of a live server quiesced at weight 0), the
// servers deleted (with their destinations), then the bindings and the
// set entries. ops is a buffer for the IPVS operations.
func (a *Applier) remove(res *Result, p *Plan, deleted map[render.VirtualServer]bool, ops []ipvs.Op) {
	var dests []int32 // the destination of each operation, in p.DeleteDests
	for j, d := range p.DeleteDests {
		if deleted[d.D.Server] {
			continue // goes with its server
		}
		svc := Service(d.D.Server, render.ServerOptions{})
		if d.D.Server.Protocol == render.TCP {
			if d.Opts.Weight == 0 {
				// Already quiesced (found so at start-up): only wait.
				continue
			}
			// Quiesce: no new connections, existing ones finish.
			zero := d.Opts
			zero.Weight = 0
			ops = append(ops, ipvs.Op{Kind: ipvs.OpUpdateDestination, Service: svc, Destination: Destination(d.D, zero)})
			dests = append(dests, int32(j))
			continue
		}
		ops = append(ops, ipvs.Op{Kind: ipvs.OpRemoveDestination, Service: svc, Destination: Destination(d.D, d.Opts)})
		dests = append(dests, int32(j))
	}
	for _, s := range p.DeleteServers {
		ops = append(ops, ipvs.Op{Kind: ipvs.OpRemoveService, Service: Service(s.VS, s.Opts)})
	}
	a.ipvs(res, ops, func(i int, err error) {
		if i < len(dests) {
			put(&res.Failed.Dests, p.DeleteDests[dests[i]].D, err)
		} else {
			put(&res.Failed.Servers, p.DeleteServers[i-len(dests)].VS, err)
		}
	})
	// Destinations that were to go with a server that failed to go are
	// still there: they failed too, and are removed with it next time.
	if len(res.Failed.Servers) > 0 {
		for _, d := range p.DeleteDests {
			if deleted[d.D.Server] {
				if err, failed := res.Failed.Servers[d.D.Server]; failed {
					put(&res.Failed.Dests, d.D, fmt.Errorf("dataplane: remove destination %s: its virtual server stayed: %w", d.D, err))
				}
			}
		}
	}
	a.unbind(res, p)
	a.entries(res, entriesToDelete(res, p), a.W.DelEntries)
}

// terminate updates the graceful-termination list after the plan's
// removals: the TCP destinations quiesced join it; those of a removed
// server leave it.
func (a *Applier) terminate(res *Result, p *Plan, deleted map[render.VirtualServer]bool) {
	for _, d := range p.DeleteDests {
		if d.D.Server.Protocol == render.TCP && !deleted[d.D.Server] {
			if !res.Failed.Dest(d.D) {
				a.terminating[d.D] = Server{VS: d.D.Server}
			}
		}
	}
	for _, s := range p.DeleteServers {
		if res.Failed.Server(s.VS) {
			continue // its destinations still wait
		}
		for d := range a.terminating {
			if d.Server == s.VS {
				delete(a.terminating, d)
			}
		}
	}
}

// unbind removes addresses from the dummy link, after the virtual servers
// on them are gone. An address with a virtual server whose removal failed
// stays bound (and is reported failed, to be retried with it): the server
// is the sink's only while its address is bound, and an unbound one would
// be invisible to the next read and leak.
func (a *Applier) unbind(res *Result, p *Plan) {
	addrs := p.Unbind
	var keep map[netip.Addr]render.VirtualServer
	for _, s := range p.DeleteServers {
		if res.Failed.Server(s.VS) {
			if keep == nil {
				keep = map[netip.Addr]render.VirtualServer{}
			}
			keep[s.VS.Addr] = s.VS
		}
	}
	if keep != nil {
		addrs = make([]netip.Addr, 0, len(p.Unbind))
		for _, ad := range p.Unbind {
			if vs, ok := keep[ad.Unmap()]; ok {
				put(&res.Failed.Bindings, ad, fmt.Errorf("dataplane: unbind %s: kept while virtual server %s on it is not removed", ad, vs))
				continue
			}
			addrs = append(addrs, ad)
		}
	}
	for i, err := range a.W.Unbind(addrs) {
		if err != nil {
			put(&res.Failed.Bindings, addrs[i], err)
		}
	}
	res.Writes += len(addrs)
}

// entriesToDelete returns the entries of p.DelEntries to delete: all but
// the records (rules.SetVirtualServers) of virtual servers whose removal
// failed, which are reported failed instead: a server stays the sink's
// exactly as long as it is recorded.
func entriesToDelete(res *Result, p *Plan) []render.SetEntry {
	keep := false
	for _, s := range p.DeleteServers {
		if res.Failed.Server(s.VS) {
			keep = true
			break
		}
	}
	if !keep {
		return p.DelEntries
	}
	out := make([]render.SetEntry, 0, len(p.DelEntries))
	for _, e := range p.DelEntries {
		if e.Set == rules.SetVirtualServers || e.Set == rules.SetName(xtables.IPv6, rules.SetVirtualServers) {
			vs := render.VirtualServer{Protocol: e.Protocol, Addr: e.Addr, Port: e.Port}
			if err, failed := res.Failed.Servers[vs]; failed {
				put(&res.Failed.Entries, e, fmt.Errorf("dataplane: remove %s: kept while virtual server %s is not removed: %w", e, vs, err))
				continue
			}
		}
		out = append(out, e)
	}
	return out
}
