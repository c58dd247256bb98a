package iptables

import (
	"net/netip"
	"slices"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/conntrack"
)

// staleFlows returns the conntrack targets of a full sync: every service
// compared with what the family last programmed.
func (f *family) staleFlows(svcs map[client.ServiceKey]*rendered) []conntrack.Target {
	// Only services with UDP ports, before or now, can leave UDP flows
	// stale.
	var keys []client.ServiceKey
	for k, r := range svcs {
		if old := f.svcs[k]; len(r.udp) > 0 || old != nil && len(old.udp) > 0 {
			keys = append(keys, k)
		}
	}
	for k, old := range f.svcs {
		if svcs[k] == nil && len(old.udp) > 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, client.ServiceKey.Compare)
	var out []conntrack.Target
	for _, k := range keys {
		out = append(out, udpTargets(f.svcs[k], svcs[k])...)
	}
	return out
}

// udpTargets returns the UDP flows a service change leaves stale: flows to
// endpoints that are gone, and every flow to a UDP port that gains its
// first endpoint (datagrams sent while it had none were not DNAT'd).
func udpTargets(old, new *rendered) []conntrack.Target {
	var out []conntrack.Target
	find := func(r *rendered, name string) *udpPort {
		if r == nil {
			return nil
		}
		for i := range r.udp {
			if r.udp[i].name == name {
				return &r.udp[i]
			}
		}
		return nil
	}
	if old != nil {
		for _, op := range old.udp {
			np := find(new, op.name)
			for _, ep := range op.eps {
				if np != nil && slices.Contains(np.eps, ep) {
					continue
				}
				for _, vip := range op.vips {
					out = append(out, conntrack.Target{Service: netip.AddrPortFrom(vip, op.port), Backend: ep})
				}
			}
		}
	}
	if new != nil {
		for _, np := range new.udp {
			op := find(old, np.name)
			if len(np.eps) == 0 || op != nil && len(op.eps) > 0 {
				continue
			}
			for _, vip := range np.vips {
				out = append(out, conntrack.Target{Service: netip.AddrPortFrom(vip, np.port)})
			}
		}
	}
	return out
}
