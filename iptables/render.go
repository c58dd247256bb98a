package iptables

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// largeClusterEndpoints is kube-proxy's threshold: above this many endpoints
// (of one family, over all service ports) the per-endpoint comments are
// left out to shrink the ruleset.
const largeClusterEndpoints = 1000

// famConfig is what rendering needs to know about the node, for one family.
type famConfig struct {
	fam           xtables.Family
	mark          string       // "0x4000"
	masqueradeAll bool         // masquerade every packet to a cluster IP
	localCIDR     netip.Prefix // sources of local pods (Config.Local); invalid: none
	localIn       string       // input interface of local pods (Config.Local); "": none
	nodeIP        netip.Addr   // the node's address of the family, if known
	// acctInvalid and acctLocalhost: the nfacct objects the rules count
	// into exist (ensureAccounting; the localhost one only with localhost
	// node ports, IPv4)
	acctInvalid, acctLocalhost bool
	// scratch, when not nil, holds the slices render reuses from one
	// service to the next (renders of one famConfig are sequential).
	scratch *renderScratch
}

// renderScratch holds what render reuses from one service to the next:
// its working slices of endpoints, the strings of the port being rendered
// and the service's rendering, copied out at exact size when complete,
// with its writer (kept here, not on renderIn's stack: the port renderer
// holds a pointer to it, which would move it to the heap at every
// service).
type renderScratch struct {
	eps, cluster, local, reach []endpoint
	strs                       []byte   // the current port's strings, built
	frag                       []byte   // the current port's line fragments
	head                       []byte   // the current chain's rules' start
	r                          rendered // the service being rendered
	w                          writer   // the writer of r's text
	text                       []byte   // r's text
	cidr                       string   // famConfig.localCIDR as text
	arena                      *arena   // the arena being rendered into, if any
}

// str returns b as a string: carved from the arena being rendered into,
// if any.
func (sc *renderScratch) str(b []byte) string {
	if sc.arena == nil {
		return string(b)
	}
	return sc.arena.str(b)
}

// render writes the rules of one service for one family into r. large
// selects kube-proxy's large-cluster mode (no per-endpoint comments). A
// service without a cluster IP of the family renders nothing. On error r
// is left as it was.
func render(fc *famConfig, se *client.ServiceEndpoints, large bool, r *rendered) error {
	return renderIn(fc, nil, se, large, r)
}

// renderIn is render with the rendering carved from a (nil: its own
// allocations, exactly sized).
func renderIn(fc *famConfig, a *arena, se *client.ServiceEndpoints, large bool, r *rendered) error {
	sc := fc.scratch
	if sc == nil {
		sc = &renderScratch{}
	}
	out := &sc.r
	out.chains, out.tops, out.eps, out.lines = out.chains[:0], out.tops[:0], 0, 0
	sc.w = writer{r: out, buf: sc.text[:cap(sc.text)]}
	if a != nil {
		// Rendered straight into the arena's free text.
		sc.w.buf, sc.w.minGrow = a.text[:cap(a.text)], a.nextChunk()
	}
	sc.arena = a
	err := renderService(fc, sc, se, large)
	buf, n, grown := sc.w.buf, sc.w.n, sc.w.grown
	sc.arena, sc.w = nil, writer{} // the scratch keeps no arena chunk alive
	if a == nil {
		sc.text = buf[:n]
	}
	if err != nil {
		return err
	}
	*r = rendered{eps: out.eps, lines: out.lines, src: se, large: large}
	if a == nil {
		// One allocation for the text (no pointers: the garbage
		// collector does not scan it), one for each kind of span.
		r.buf, r.chains, r.tops = exact(sc.text), exact(out.chains), exact(out.tops)
		return nil
	}
	if n == 0 {
		return nil // no rules in this family: nothing carved
	}
	if grown {
		a.grew()
	}
	a.used += n
	r.buf = buf[:n:n]
	a.text = buf[n:n]
	r.chains, r.tops = carve(&a.chains, out.chains), carve(&a.tops, out.tops)
	r.gen = a.gen
	return nil
}

// protoName returns the protocol as iptables writes it, or "" when
// iptables has no match for it.
func protoName(p client.Protocol) string {
	switch p {
	case client.TCP:
		return "tcp"
	case client.UDP:
		return "udp"
	case client.SCTP:
		return "sctp"
	}
	return ""
}

// renderService renders every port of a service for the family, in the
// service's port order.
func renderService(fc *famConfig, sc *renderScratch, se *client.ServiceEndpoints, large bool) error {
	svc := se.Service
	v6 := fc.fam == xtables.IPv6
	cips := svc.ClusterIPs.Family(v6)
	if len(cips) == 0 {
		return nil
	}
	// The source ranges of the family; none (no range of the family, or
	// a zero-length one) leaves the load-balancer IPs open to every
	// client, as in kube-proxy.
	addrs := serviceAddrs{clusterIP: cips[0], extIPs: svc.ExternalIPs.Family(v6), lbIPs: svc.LoadBalancerIPs.Family(v6),
		ranges: svc.SourceRanges(v6)}
	if fc.localCIDR.IsValid() && sc.cidr == "" {
		sc.cidr = prefixText(fc.localCIDR)
	}
	eps := slices.Grow(sc.eps[:0], len(se.Endpoints))
	for _, p := range svc.Ports {
		if p.Port < 1 || p.Port > 65535 || p.NodePort < 0 || p.NodePort > 65535 {
			return fmt.Errorf("iptables: service %s port %q: port %d / node port %d out of range", svc.Key(), p.Name, p.Port, p.NodePort)
		}
		proto := protoName(p.Protocol)
		if proto == "" {
			return fmt.Errorf("iptables: service %s port %q: unknown protocol %q", svc.Key(), p.Name, p.Protocol)
		}
		pr := portRenderer{fc: fc, sc: sc, w: &sc.w, svc: svc, port: p, proto: proto, large: large, addrs: addrs}
		pr.b, pr.pnEnd, pr.eps = portStrings(sc.strs[:0], eps[:0], se, p, v6)
		eps = pr.eps
		sc.r.eps += len(eps)
		sc.strs = pr.render()[:0]
	}
	sc.eps = eps[:0]
	return nil
}

// rejectWith is the ICMP answer of a REJECT rule, as iptables-save prints it.
func rejectWith(f xtables.Family) string {
	if f == xtables.IPv6 {
		return "icmp6-port-unreachable"
	}
	return "icmp-port-unreachable"
}

// hostMask is the recent match's default mask, as iptables-save prints it.
func hostMask(f xtables.Family) string {
	if f == xtables.IPv6 {
		return "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
	}
	return "255.255.255.255"
}

// countEndpoints returns how many endpoints of the family serve each port
// of the service, summed: what kube-proxy's large-cluster threshold counts.
func countEndpoints(se *client.ServiceEndpoints, v6 bool) int {
	if len(se.Service.ClusterIPs.Family(v6)) == 0 {
		return 0
	}
	n := 0
	for _, p := range se.Service.Ports {
		for _, e := range se.Endpoints {
			if len(e.IPs.Family(v6)) > 0 {
				if _, ok := e.PortFor(p); ok {
					n++
				}
			}
		}
	}
	return n
}
