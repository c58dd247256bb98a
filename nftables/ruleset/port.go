package ruleset

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxysinks/proxysinks/client"
)

// endpoint is one endpoint of a service port in the family being
// rendered.
type endpoint struct {
	ap netip.AddrPort
	// s0 and s1 locate the endpoint's "ip:port" ("[ip]:port"),
	// kube-proxy's endpoint string, in the renderer's epText
	s0, s1 int32
	// ready, serving, terminating, local, internal, external, cluster
	// are client.Endpoint's
	e *client.Endpoint
	// inCluster and inLocal: among the port's cluster or local
	// endpoints (kube-proxy's CategorizeEndpoints)
	inCluster, inLocal bool
	// base is the endpoint's chain and affinity set name base (set
	// when session affinity needs them)
	base string
}

// host returns the endpoint's address as its string has it (without the
// brackets of an IPv6 one).
func (e *endpoint) host(text []byte) []byte {
	s := e.str(text)
	h := s[:bytes.LastIndexByte(s, ':')]
	if e.ap.Addr().Is6() {
		h = h[1 : len(h)-1]
	}
	return h
}

// str returns the endpoint's "ip:port" in text (the renderer's epText).
func (e *endpoint) str(text []byte) []byte { return text[e.s0:e.s1] }

// usable reports whether the endpoint can receive traffic at all.
func (e *endpoint) usable() bool { return e.e.Ready || e.e.Serving && e.e.Terminating }

// affinityFlags are the affinity sets' flags (shared: rulesets are
// read-only).
var affinityFlags = []string{"dynamic", "timeout"}

// protoName returns the protocol as nft writes it, or "".
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

// service renders every port of a service with a cluster IP of the
// family.
func (r *renderer) service(se *client.ServiceEndpoints) error {
	svc := se.Service
	v6 := r.ft.v6
	cips := svc.ClusterIPs.Family(v6)
	if len(cips) == 0 {
		return nil
	}
	var errs []error
	for _, p := range svc.Ports {
		proto := protoName(p.Protocol)
		if proto == "" || p.Port < 1 || p.Port > 65535 || p.NodePort < 0 || p.NodePort > 65535 {
			errs = append(errs, fmt.Errorf("nftables ruleset: service %s port %q (%s %d, node port %d): not renderable, left out", svc.Key(), p.Name, p.Protocol, p.Port, p.NodePort))
			continue
		}
		pr := portRenderer{r: r, svc: svc, port: p, proto: proto, clusterIP: cips[0],
			extIPs: svc.ExternalIPs.Family(v6), lbIPs: svc.LoadBalancerIPs.Family(v6), ranges: svc.SourceRanges(v6)}
		pr.endpoints(se)
		pr.render()
	}
	return errors.Join(errs...)
}

// portRenderer renders one service port.
type portRenderer struct {
	r         *renderer
	svc       *client.Service
	port      client.Port
	proto     string
	clusterIP netip.Addr
	extIPs    []netip.Addr
	lbIPs     []netip.Addr
	ranges    []netip.Prefix

	pn                                      string // "ns/name:port", kube-proxy's service port name
	svcChain, localChain, extChain, fwChain string
	eps                                     []endpoint // sorted by str
	cluster, local, reach                   []*endpoint

	accessible, iLocal, eLocal bool
	usesCluster, usesLocal     bool
	hasAny                     bool
}

// endpoints collects the port's endpoints of the family, sorted by their
// "ip:port" as kube-proxy sorts them.
func (pr *portRenderer) endpoints(se *client.ServiceEndpoints) {
	eps, text := pr.r.eps[:0], pr.r.epText[:0]
	for _, e := range se.Endpoints {
		addrs := e.IPs.Family(pr.r.ft.v6)
		port, ok := e.PortFor(pr.port)
		if len(addrs) == 0 || !ok || port < 1 || port > 65535 {
			continue
		}
		ap := netip.AddrPortFrom(addrs[0], uint16(port))
		s0 := len(text)
		text = ap.AppendTo(text)
		eps = append(eps, endpoint{ap: ap, s0: int32(s0), s1: int32(len(text)), e: e})
	}
	slices.SortFunc(eps, func(a, b endpoint) int { return bytes.Compare(a.str(text), b.str(text)) })
	pr.r.epText = text
	pr.eps = eps
	pr.r.eps = eps[:0]
	pr.cluster, pr.local, pr.reach = pr.r.cluster[:0], pr.r.local[:0], pr.r.reach[:0]
}

// render writes the port's elements, chains and sets.
func (pr *portRenderer) render() {
	pr.names()
	pr.classify()
	pr.elements()
	pr.chains()
	r := pr.r
	r.cluster, r.local, r.reach = pr.cluster[:0], pr.local[:0], pr.reach[:0]
}

// names sets the port's name and its chains' names (one string, sliced).
func (pr *portRenderer) names() {
	svc := pr.svc
	if pr.port.Name != "" {
		pr.pn = svc.Namespace + "/" + svc.Name + ":" + pr.port.Name
	} else {
		pr.pn = svc.Namespace + "/" + svc.Name
	}
	base := portNameBase(svc.Namespace, svc.Name, pr.proto, pr.port.Name)
	all := prefixService + base + prefixLocal + base + prefixExternal + base + prefixFirewall + base
	at := 0
	next := func(prefix string) string {
		n := len(prefix) + len(base)
		at += n
		return all[at-n : at]
	}
	pr.svcChain, pr.localChain, pr.extChain, pr.fwChain = next(prefixService), next(prefixLocal), next(prefixExternal), next(prefixFirewall)
}

// classify sorts the endpoints into the cluster and local ones, as
// kube-proxy categorizes them. The source applied the traffic policies,
// topology and the terminating fallback (client.Endpoint's Internal,
// External and Cluster); when both policies are Local, the cluster
// endpoints serve only this node's own traffic to external destinations.
func (pr *portRenderer) classify() {
	svc := pr.svc
	pr.accessible = pr.port.NodePort != 0 || len(pr.extIPs) > 0 || len(pr.lbIPs) > 0
	pr.iLocal = svc.InternalTrafficLocal
	pr.eLocal = svc.ExternalTrafficLocal && svc.ExternallyAccessible()
	pr.usesCluster = !pr.iLocal || pr.accessible
	pr.usesLocal = pr.iLocal || pr.eLocal && pr.accessible
	anyUsable := false
	for i := range pr.eps {
		ep := &pr.eps[i]
		e := ep.e
		anyUsable = anyUsable || ep.usable()
		switch {
		case !pr.usesCluster:
		case !pr.iLocal:
			ep.inCluster = e.Internal
		case !pr.eLocal:
			ep.inCluster = e.External
		default:
			ep.inCluster = e.Cluster
		}
		switch {
		case !pr.usesLocal:
		case pr.iLocal:
			ep.inLocal = e.Internal
		default:
			ep.inLocal = e.External
		}
		if ep.inCluster {
			pr.cluster = append(pr.cluster, ep)
		}
		if ep.inLocal {
			pr.local = append(pr.local, ep)
		}
		if ep.inCluster || ep.inLocal {
			pr.reach = append(pr.reach, ep) // in endpoint order: the union, sorted
		}
	}
	// kube-proxy's hasAnyEndpoints: a cluster endpoint, or (with a Local
	// policy) any ready or serving-terminating endpoint.
	pr.hasAny = pr.usesCluster && len(pr.cluster) > 0 || pr.usesLocal && anyUsable
	if pr.svc.SessionAffinity != nil {
		for _, ep := range pr.reach {
			ep.base = endpointNameBase(pr.svc.Namespace, pr.svc.Name, pr.proto, pr.port.Name, ep.ap)
		}
	}
}

// policy is where one kind of traffic goes: hasEndpoints, then to chain,
// else the verdict of the no-endpoint maps.
type policy struct {
	chain        string
	hasEndpoints bool
	verdict      string
}

// policies returns where internal (cluster IP) and external traffic go.
func (pr *portRenderer) policies() (internal, external policy) {
	internal = policy{chain: pr.svcChain, hasEndpoints: pr.hasAny}
	if pr.iLocal {
		internal = policy{chain: pr.localChain, hasEndpoints: len(pr.local) > 0}
	}
	external = policy{chain: pr.svcChain, hasEndpoints: pr.hasAny}
	if pr.eLocal {
		external = policy{chain: pr.localChain, hasEndpoints: len(pr.local) > 0}
	}
	if !pr.hasAny {
		internal.verdict, external.verdict = "goto "+chainReject, "goto "+chainReject
	} else {
		internal.verdict, external.verdict = "drop", "drop"
	}
	return internal, external
}

// usesFirewall reports whether the port has a firewall chain: load-balancer
// IPs with source ranges (with or without endpoints).
func (pr *portRenderer) usesFirewall() bool { return len(pr.lbIPs) > 0 && len(pr.ranges) > 0 }

// elements adds the port's elements to the fixed sets and maps.
func (pr *portRenderer) elements() {
	r, proto := pr.r, pr.proto
	port := " . " + proto + " . " + strconv.Itoa(pr.port.Port)
	internal, external := pr.policies()
	comment := truncateComment(pr.pn)
	cip := pr.clusterIP.String()
	r.elem(elClusterIPs, cip, "", "")
	if internal.hasEndpoints {
		r.elem(elServiceIPs, cip+port, "goto "+internal.chain, "")
	} else {
		r.elem(elNoEndpointServices, cip+port, internal.verdict, comment)
	}
	for _, ip := range pr.extIPs {
		if pr.hasAny {
			r.elem(elServiceIPs, ip.String()+port, "goto "+pr.extChain, "")
		}
		if !external.hasEndpoints {
			r.elem(elNoEndpointServices, ip.String()+port, external.verdict, comment)
		}
	}
	for _, ip := range pr.lbIPs {
		if pr.hasAny {
			r.elem(elServiceIPs, ip.String()+port, "goto "+pr.extChain, "")
		}
		if pr.usesFirewall() {
			r.elem(elFirewallIPs, ip.String()+port, "goto "+pr.fwChain, "")
		}
	}
	if !external.hasEndpoints {
		for _, ip := range pr.lbIPs {
			r.elem(elNoEndpointServices, ip.String()+port, external.verdict, comment)
		}
	}
	if np := pr.port.NodePort; np != 0 {
		key := proto + " . " + strconv.Itoa(np)
		if pr.hasAny {
			r.elem(elServiceNodePorts, key, "goto "+pr.extChain, "")
		}
		if !external.hasEndpoints {
			r.elem(elNoEndpointNodePorts, key, external.verdict, comment)
		}
	}
	for _, ep := range pr.reach {
		if ep.e.Local {
			b := ep.ap.Addr().AppendTo(r.buf[:0])
			b = ep.ap.Addr().AppendTo(append(b, " . "...))
			b = append(append(append(b, " . "...), proto...), " . "...)
			b = strconv.AppendUint(b, uint64(ep.ap.Port()), 10)
			r.buf = b
			r.elem(elHairpin, string(b), "", "")
		}
	}
}

// chains writes the port's chains: external, firewall, the cluster and
// local policy chains, and with session affinity the endpoints' chains and
// affinity sets.
func (pr *portRenderer) chains() {
	r, ipX := pr.r, pr.r.ft.family
	_, external := pr.policies()
	usesClusterChain := len(pr.cluster) > 0 && pr.usesCluster
	usesLocalChain := len(pr.local) > 0 && pr.usesLocal
	if pr.hasAny && pr.accessible {
		c := Chain{Name: pr.extChain}
		if !pr.eLocal {
			c.Rules = append(c.Rules, Rule{Text: r.masq, Comment: "masquerade"})
		} else {
			if local := r.ifLocal(); local != "" {
				c.Rules = append(c.Rules, Rule{Text: local + " goto " + pr.svcChain, Comment: "short-circuit pod traffic"})
			}
			c.Rules = append(c.Rules,
				Rule{Text: "fib saddr type local " + r.masq, Comment: "masquerade local traffic"},
				Rule{Text: "fib saddr type local goto " + pr.svcChain, Comment: "short-circuit local traffic"})
			if !usesClusterChain {
				// Only when no cluster endpoint is of this family: the
				// short-circuits need their target.
				r.chains = append(r.chains, Chain{Name: pr.svcChain})
			}
		}
		if external.hasEndpoints {
			c.Rules = append(c.Rules, Rule{Text: "goto " + external.chain})
		}
		r.chains = append(r.chains, c)
	}
	if pr.usesFirewall() {
		r.chains = append(r.chains, Chain{Name: pr.fwChain, Rules: []Rule{{Text: ipX + " saddr != { " + pr.sources() + " } drop"}}})
	}
	affinity := pr.svc.SessionAffinity
	if affinity != nil {
		for _, ep := range pr.reach {
			r.affinity = append(r.affinity, Set{Name: prefixAffinity + ep.base, Type: r.ft.addrType,
				Flags: affinityFlags, Timeout: time.Duration(affinity.TimeoutSeconds) * time.Second})
		}
	}
	if usesClusterChain {
		r.chains = append(r.chains, pr.policyChain(pr.svcChain, pr.cluster))
	}
	if usesLocalChain {
		r.chains = append(r.chains, pr.policyChain(pr.localChain, pr.local))
	}
	if affinity != nil {
		for _, ep := range pr.reach {
			r.chains = append(r.chains, Chain{Name: prefixEndpoint + ep.base, Rules: []Rule{
				{Text: "update @" + prefixAffinity + ep.base + " { " + ipX + " saddr }"},
				{Text: "meta l4proto " + pr.proto + " dnat to " + string(ep.str(r.epText))},
			}})
		}
	}
}

// sources returns the firewall chain's allowed sources: the source ranges
// and, when one holds the node's IP, the load-balancer IPs.
func (pr *portRenderer) sources() string {
	var b strings.Builder
	node := pr.r.fam.NodeIP
	allowNode := false
	for i, p := range pr.ranges {
		if i > 0 {
			b.WriteString(" , ")
		}
		b.WriteString(p.String())
		allowNode = allowNode || node.IsValid() && p.Contains(node)
	}
	if allowNode {
		for _, ip := range pr.lbIPs {
			b.WriteString(" , ")
			b.WriteString(ip.String())
		}
	}
	return b.String()
}

// policyChain returns a cluster or local policy chain picking one of eps:
// a DNAT straight to one endpoint or through a numgen map, or with session
// affinity the affinity checks and a numgen verdict map to the endpoints'
// chains.
func (pr *portRenderer) policyChain(name string, eps []*endpoint) Chain {
	c := Chain{Name: name}
	n := strconv.Itoa(len(eps))
	var b strings.Builder
	if pr.svc.SessionAffinity == nil {
		if len(eps) == 1 {
			c.Rules = []Rule{{Text: "meta l4proto " + pr.proto + " dnat to " + string(eps[0].str(pr.r.epText))}}
			return c
		}
		b.Grow(64 + len(eps)*(int(eps[0].s1-eps[0].s0)+8))
		b.WriteString("meta l4proto ")
		b.WriteString(pr.proto)
		b.WriteString(" dnat ")
		b.WriteString(pr.r.ft.family)
		b.WriteString(" addr . port to numgen random mod ")
		b.WriteString(n)
		b.WriteString(" map { ")
		for i, ep := range eps {
			if i > 0 {
				b.WriteString(" , ")
			}
			b.WriteString(strconv.Itoa(i))
			b.WriteString(" : ")
			b.Write(ep.host(pr.r.epText))
			b.WriteString(" . ")
			b.WriteString(strconv.Itoa(int(ep.ap.Port())))
		}
		b.WriteString(" }")
		c.Rules = []Rule{{Text: b.String()}}
		return c
	}
	c.Rules = make([]Rule, 0, len(eps)+1)
	b.WriteString("numgen random mod " + n + " vmap { ")
	for i, ep := range eps {
		c.Rules = append(c.Rules, Rule{Text: pr.r.ft.family + " saddr @" + prefixAffinity + ep.base + " goto " + prefixEndpoint + ep.base})
		if i > 0 {
			b.WriteString(" , ")
		}
		b.WriteString(strconv.Itoa(i) + " : goto " + prefixEndpoint + ep.base)
	}
	b.WriteString(" }")
	c.Rules = append(c.Rules, Rule{Text: b.String()})
	return c
}
