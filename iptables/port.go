package iptables

import (
	"bytes"
	"net/netip"
	"slices"
	"strconv"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// endpoint is one endpoint of a service port, in one family. It holds no
// pointer (copying it costs no write barrier): its strings are offsets in
// the port's strings.
type endpoint struct {
	// where its "ip:port" (kube-proxy's endpoint string, s0:s1) and its
	// chain name (from c0) are in the port's strings
	s0, s1, c0                  int32
	ready, serving, terminating bool
	internal, external, cluster bool // client.Endpoint's
	inCluster, inLocal          bool // in the port's cluster or local endpoints
}

// str returns the endpoint's "ip:port" in the port's buffer b.
func (e *endpoint) str(b []byte) []byte { return b[e.s0:e.s1] }

// chain returns the endpoint's KUBE-SEP- chain in the port's names.
func (e *endpoint) chain(names string) string {
	return names[e.c0 : e.c0+int32(len(prefixSEP)+16)]
}

// usable reports whether the endpoint can receive traffic at all.
func (e *endpoint) usable() bool { return e.ready || e.serving && e.terminating }

// portStrings builds a port's strings into b: its name ("ns/name:port",
// b[:pnEnd]), then the "ip:port" of each of its endpoints in the family
// (later its chain names: portRenderer.nameChains). It returns them with
// those endpoints, appended to eps, sorted by that string.
func portStrings(b []byte, eps []endpoint, se *client.ServiceEndpoints, p client.Port, v6 bool) ([]byte, int, []endpoint) {
	svc := se.Service
	b = append(b, svc.Namespace...)
	b = append(append(b, '/'), svc.Name...)
	if p.Name != "" {
		b = append(append(b, ':'), p.Name...)
	}
	pnEnd := len(b)
	for _, e := range se.Endpoints {
		addrs := e.IPs.Family(v6)
		port, ok := e.PortFor(p)
		if len(addrs) == 0 || !ok || port < 1 || port > 65535 {
			continue
		}
		s0 := len(b)
		b = netip.AddrPortFrom(addrs[0], uint16(port)).AppendTo(b)
		eps = append(eps, endpoint{s0: int32(s0), s1: int32(len(b)),
			ready: e.Ready, serving: e.Serving, terminating: e.Terminating, internal: e.Internal, external: e.External, cluster: e.Cluster})
	}
	slices.SortFunc(eps, func(x, y endpoint) int { return bytes.Compare(b[x.s0:x.s1], b[y.s0:y.s1]) })
	return b, pnEnd, eps
}

// serviceAddrs are a service's addresses in the family being rendered.
type serviceAddrs struct {
	clusterIP     netip.Addr
	extIPs, lbIPs []netip.Addr
	// ranges are the load-balancer source ranges; nil when every client
	// is allowed.
	ranges []netip.Prefix
}

// portRenderer renders one port of a service: render writes the port's
// rules in the top-level chains, its KUBE-EXT-, KUBE-FW-, KUBE-SVC- and
// KUBE-SVL- chains and its endpoints' KUBE-SEP- chains, in kube-proxy's
// order.
type portRenderer struct {
	fc    *famConfig
	sc    *renderScratch
	w     *writer
	svc   *client.Service
	port  client.Port
	proto string // protoName(port.Protocol)
	large bool   // kube-proxy's large-cluster mode: no per-endpoint comments
	addrs serviceAddrs
	// b holds the port's strings (portStrings): its name (b[:pnEnd]) and
	// its endpoints' "ip:port"; nameChains adds the chain names.
	b     []byte
	pnEnd int
	eps   []endpoint // sorted by "ip:port"

	// Set by nameChains: names holds the port's name (pn) and its chain
	// names as one string; cluster and local are the endpoints of the
	// cluster and local policies.
	names, pn                             string
	svcChain, svlChain, extChain, fwChain string
	cluster, local                        []endpoint
	// Set by fragments: the parts the endpoint chains' lines share.
	frag portFragments
	// Set by classify and route.
	route portRoute
}

// portRoute is where a port's traffic goes, as kube-proxy decides from the
// traffic policies and the endpoints.
type portRoute struct {
	accessible             bool // node port, external IPs or load-balancer IPs
	iLocal, eLocal         bool // internal and external traffic policies Local
	usesCluster, usesLocal bool // the cluster and local endpoints matter
	hasAny                 bool // an endpoint can receive traffic
	// hasInternal and hasExternal: internal (cluster IP) and external
	// traffic has endpoints under its policy; else it is dropped, or
	// rejected without any endpoint, with the target and the comment
	// (after the port's name) below.
	hasInternal, hasExternal       bool
	internalTarget, externalTarget []string
	internalNote, externalNote     string
	// The chains the port uses, and where its internal, policy-bound
	// external and load-balancer traffic goes.
	usesSVC, usesSVL, usesEXT, usesFW     bool
	internalChain, externalChain, lbChain string
}

// portFragments are what the lines of a port's endpoint chains share,
// built once per port: toEp starts a KUBE-SVC-/KUBE-SVL- rule's comment;
// masq ends a KUBE-SEP- chain's masquerade rule after the address; dnat
// and dnat2 are its DNAT rule's parts before and after the affinity
// match, dnatAll both (a rule without it).
type portFragments struct {
	toEp, masq, dnat, dnat2, dnatAll []byte
}

// The targets of traffic without endpoints under its policy.
var (
	dropTarget    = []string{"-j", "DROP"}
	rejectTarget4 = []string{"-j", "REJECT", "--reject-with", rejectWith(xtables.IPv4)}
	rejectTarget6 = []string{"-j", "REJECT", "--reject-with", rejectWith(xtables.IPv6)}
)

// render renders the port and returns b for reuse.
func (pr *portRenderer) render() []byte {
	pr.classify()
	pr.nameChains()
	pr.fragments()
	pr.decide()
	pr.topRules()
	pr.externalRules()
	pr.firewallRules()
	if pr.route.usesSVC {
		pr.toEndpoints(pr.svcChain, pr.cluster)
	}
	if pr.route.usesSVL {
		pr.toEndpoints(pr.svlChain, pr.local)
	}
	reach := pr.reached()
	pr.endpointChains(reach)
	sc := pr.sc
	sc.cluster, sc.local, sc.reach = pr.cluster[:0], pr.local[:0], reach[:0]
	return pr.b
}

// classify sorts the endpoints into cluster and local ones, as kube-proxy
// categorizes them. The source already applied traffic policies, topology
// and the terminating fallback to Internal, External and Cluster; when
// both policies are Local, the cluster endpoints serve only to
// short-circuit this node's own traffic to external destinations.
func (pr *portRenderer) classify() {
	rt := &pr.route
	r := pr.svc.Routing(pr.port.NodePort != 0 || len(pr.addrs.extIPs) > 0 || len(pr.addrs.lbIPs) > 0)
	rt.accessible, rt.iLocal, rt.eLocal = r.Accessible, r.InternalLocal, r.ExternalLocal
	rt.usesCluster, rt.usesLocal = r.UsesCluster, r.UsesLocal
	for i := range pr.eps {
		e := &pr.eps[i]
		if e.usable() {
			rt.hasAny = true
		}
		e.inCluster, e.inLocal = r.Categorize(e.internal, e.external, e.cluster)
	}
}

// nameChains names the port's chains. The strings the rendering keeps,
// the port's name and its chain names, follow the endpoints' strings in b
// and become one string (names); the endpoints' strings stay bytes of b.
// The service port's four chains share one hash; there is one KUBE-SEP-
// chain per endpoint the cluster or local chain reaches.
func (pr *portRenderer) nameChains() {
	b, pnEnd := pr.b, pr.pnEnd
	keep := len(b)
	b = append(b, b[:pnEnd]...)
	h := hashPort(b[:pnEnd], pr.proto, nil)
	var at [5]int // where the four names start, and where the last ends
	for i, prefix := range [4]string{prefixSVC, prefixSVL, prefixEXT, prefixFW} {
		at[i] = len(b) - keep
		b = append(append(b, prefix...), h[:]...)
	}
	at[4] = len(b) - keep
	for i := range pr.eps {
		if e := &pr.eps[i]; e.inCluster || e.inLocal {
			h := hashPort(b[:pnEnd], pr.proto, b[e.s0:e.s1])
			e.c0 = int32(len(b) - keep)
			b = append(append(b, prefixSEP...), h[:]...)
		}
	}
	pr.b = b
	names := pr.sc.str(b[keep:])
	pr.names, pr.pn = names, names[:pnEnd]
	pr.svcChain, pr.svlChain, pr.extChain, pr.fwChain = names[at[0]:at[1]], names[at[1]:at[2]], names[at[2]:at[3]], names[at[3]:at[4]]
	cluster, local := pr.sc.cluster[:0], pr.sc.local[:0]
	for _, e := range pr.eps {
		if e.inCluster {
			cluster = append(cluster, e)
		}
		if e.inLocal {
			local = append(local, e)
		}
	}
	pr.cluster, pr.local = cluster, local
}

// fragments builds the port's portFragments in the scratch buffer.
func (pr *portRenderer) fragments() {
	f := append(pr.sc.frag[:0], ` -m comment --comment "`...)
	f = append(appendEscaped(f, pr.pn), " -> "...)
	toEnd := len(f)
	if !pr.large {
		f = append(appendEscaped(append(f, ` -m comment --comment "`...), pr.pn), '"')
	}
	f = append(f, " -j "+KubeMarkMasqChain...)
	masqEnd := len(f)
	f = append(append(f, " -p "...), pr.proto...)
	if !pr.large {
		f = append(appendEscaped(append(f, ` -m comment --comment "`...), pr.pn), '"')
	}
	dnatEnd := len(f)
	f = append(append(append(f, " -m "...), pr.proto...), " -j DNAT --to-destination "...)
	pr.sc.frag = f
	pr.frag = portFragments{toEp: f[:toEnd], masq: f[toEnd:masqEnd], dnat: f[masqEnd:dnatEnd], dnat2: f[dnatEnd:], dnatAll: f[masqEnd:]}
}

// decide chooses the port's chains and where its traffic goes.
func (pr *portRenderer) decide() {
	rt := &pr.route
	rt.usesSVC = len(pr.cluster) > 0 && rt.usesCluster
	rt.usesSVL = len(pr.local) > 0 && rt.usesLocal
	rt.internalChain, rt.hasInternal = pr.svcChain, rt.hasAny
	if rt.iLocal {
		rt.internalChain, rt.hasInternal = pr.svlChain, len(pr.local) > 0
	}
	rt.externalChain, rt.hasExternal = pr.svcChain, rt.hasAny
	if rt.eLocal {
		rt.externalChain, rt.hasExternal = pr.svlChain, len(pr.local) > 0
	}
	rt.usesEXT = rt.hasAny && rt.accessible
	rt.lbChain = pr.extChain
	rt.usesFW = rt.hasAny && len(pr.addrs.lbIPs) > 0 && len(pr.addrs.ranges) > 0
	if rt.usesFW {
		rt.lbChain = pr.fwChain
	}
	switch {
	case !rt.hasAny:
		rt.internalTarget, rt.internalNote = rejectTarget4, " has no endpoints"
		if pr.fc.fam == xtables.IPv6 {
			rt.internalTarget = rejectTarget6
		}
		rt.externalTarget, rt.externalNote = rt.internalTarget, rt.internalNote
	default:
		if !rt.hasInternal {
			rt.internalTarget, rt.internalNote = dropTarget, " has no local endpoints"
		}
		if !rt.hasExternal {
			rt.externalTarget, rt.externalNote = dropTarget, " has no local endpoints"
		}
	}
}

// topRules writes the port's rules in the top-level chains: its cluster
// IP, external IPs, load-balancer IPs, node port and health-check node
// port.
func (pr *portRenderer) topRules() {
	w, rt, a := pr.w, &pr.route, &pr.addrs
	pn, proto, port := pr.pn, pr.proto, pr.port.Port
	if rt.hasInternal {
		w.rule(chainServices).host("-d", a.clusterIP).args("-p", proto).comment(pn, " cluster IP").args("-m", proto).port("--dport", port).args("-j", rt.internalChain).inTop(topNATServices)
	} else {
		w.rule(chainServices).host("-d", a.clusterIP).args("-p", proto).comment(pn, rt.internalNote).args("-m", proto).port("--dport", port).args(rt.internalTarget...).inTop(topFilterServices)
	}
	for _, ip := range a.extIPs {
		if rt.hasAny {
			w.rule(chainServices).host("-d", ip).args("-p", proto).comment(pn, " external IP").args("-m", proto).port("--dport", port).args("-j", pr.extChain).inTop(topNATServices)
		}
		if !rt.hasExternal {
			w.rule(chainExternalServices).host("-d", ip).args("-p", proto).comment(pn, rt.externalNote).args("-m", proto).port("--dport", port).args(rt.externalTarget...).inTop(topFilterExternal)
		}
	}
	for _, ip := range a.lbIPs {
		if rt.hasAny {
			w.rule(chainServices).host("-d", ip).args("-p", proto).comment(pn, " loadbalancer IP").args("-m", proto).port("--dport", port).args("-j", rt.lbChain).inTop(topNATServices)
		}
		if rt.usesFW {
			w.rule(chainProxyFirewall).host("-d", ip).args("-p", proto).comment(pn, " traffic not accepted by ", pr.fwChain).args("-m", proto).port("--dport", port).args("-j", "DROP").inTop(topFilterFirewall)
		}
	}
	if !rt.hasExternal {
		for _, ip := range a.lbIPs {
			w.rule(chainExternalServices).host("-d", ip).args("-p", proto).comment(pn, rt.externalNote).args("-m", proto).port("--dport", port).args(rt.externalTarget...).inTop(topFilterExternal)
		}
	}
	if np := pr.port.NodePort; np != 0 {
		if rt.hasAny && pr.fc.acctLocalhost {
			// Localhost node-port packets, counted.
			w.rule(chainNodePorts).args("-d", "127.0.0.0/8", "-p", proto).comment(pn).args("-m", proto).port("--dport", np).raw(nfacctMatch(AcctLocalhostNodePorts)).args("-j", pr.extChain).inTop(topNATNodePorts)
		}
		if rt.hasAny {
			w.rule(chainNodePorts).args("-p", proto).comment(pn).args("-m", proto).port("--dport", np).args("-j", pr.extChain).inTop(topNATNodePorts)
		}
		if !rt.hasExternal {
			w.rule(chainExternalServices).args("-p", proto).comment(pn, rt.externalNote).args("-m", "addrtype", "--dst-type", "LOCAL", "-m", proto).port("--dport", np).args(rt.externalTarget...).inTop(topFilterExternal)
		}
	}
	if hc := pr.svc.HealthCheckNodePort; hc != 0 {
		w.rule(chainNodePorts).args("-p", "tcp").comment(pn, " health check node port").args("-m", "tcp").port("--dport", hc).args("-j", "ACCEPT").inTop(topFilterNodePorts)
	}
}

// externalRules writes the port's KUBE-EXT- chain, when it has one.
func (pr *portRenderer) externalRules() {
	w, rt, pn := pr.w, &pr.route, pr.pn
	if !rt.usesEXT {
		return
	}
	ext := pr.extChain
	if !rt.eLocal {
		w.rule(ext).comment("masquerade traffic for ", pn, " external destinations").args("-j", KubeMarkMasqChain).inChain(ext)
	} else {
		switch {
		case pr.fc.localCIDR.IsValid():
			w.rule(ext).args("-s", pr.sc.cidr).comment("pod traffic for ", pn, " external destinations").args("-j", pr.svcChain).inChain(ext)
		case pr.fc.localIn != "":
			w.rule(ext).args("-i", pr.fc.localIn).comment("pod traffic for ", pn, " external destinations").args("-j", pr.svcChain).inChain(ext)
		}
		w.rule(ext).comment("masquerade LOCAL traffic for ", pn, " external destinations").args("-m", "addrtype", "--src-type", "LOCAL", "-j", KubeMarkMasqChain).inChain(ext)
		w.rule(ext).comment("route LOCAL traffic for ", pn, " external destinations").args("-m", "addrtype", "--src-type", "LOCAL", "-j", pr.svcChain).inChain(ext)
	}
	if rt.hasExternal {
		w.rule(ext).args("-j", rt.externalChain).inChain(ext)
	}
}

// firewallRules writes the port's KUBE-FW- chain (load-balancer source
// ranges), when it has one.
func (pr *portRenderer) firewallRules() {
	if !pr.route.usesFW {
		return
	}
	w, pn, fw := pr.w, pr.pn, pr.fwChain
	allowNode := false
	for _, rg := range pr.addrs.ranges {
		w.rule(fw).args("-s", prefixText(rg)).comment(pn, " loadbalancer IP").args("-j", pr.extChain).inChain(fw)
		if pr.fc.nodeIP.IsValid() && rg.Contains(pr.fc.nodeIP) {
			allowNode = true
		}
	}
	if allowNode {
		for _, ip := range pr.addrs.lbIPs {
			w.rule(fw).host("-s", ip).comment(pn, " loadbalancer IP").args("-j", pr.extChain).inChain(fw)
		}
	}
	w.rule(fw).comment("other traffic to ", pn, " will be dropped by KUBE-PROXY-FIREWALL").inChain(fw)
}

// internalMasquerade writes the internal chain's first rule, which marks
// traffic to the cluster IP for masquerading (all of it, or that from
// not from this node's pods).
func (pr *portRenderer) internalMasquerade() {
	rt := &pr.route
	if !rt.hasInternal {
		return
	}
	w, c, a := pr.w, rt.internalChain, &pr.addrs
	switch {
	case pr.fc.masqueradeAll:
		w.rule(c).host("-d", a.clusterIP).args("-p", pr.proto).comment(pr.pn, " cluster IP").args("-m", pr.proto).port("--dport", pr.port.Port).args("-j", KubeMarkMasqChain).inChain(c)
	case pr.fc.localCIDR.IsValid():
		w.rule(c).args("!", "-s", pr.sc.cidr).host("-d", a.clusterIP).args("-p", pr.proto).comment(pr.pn, " cluster IP").args("-m", pr.proto).port("--dport", pr.port.Port).args("-j", KubeMarkMasqChain).inChain(c)
	case pr.fc.localIn != "":
		// iptables-save prints the input interface after the
		// destination.
		w.rule(c).host("-d", a.clusterIP).args("!", "-i", pr.fc.localIn, "-p", pr.proto).comment(pr.pn, " cluster IP").args("-m", pr.proto).port("--dport", pr.port.Port).args("-j", KubeMarkMasqChain).inChain(c)
	}
}

// toEndpoints writes a KUBE-SVC- or KUBE-SVL- chain: the session-affinity
// rules, then one rule per endpoint of list picking it with the
// probability that makes the choice uniform.
func (pr *portRenderer) toEndpoints(chain string, list []endpoint) {
	if chain == pr.route.internalChain {
		pr.internalMasquerade()
	}
	w, b, names, large, toEp := pr.w, pr.b, pr.names, pr.large, pr.frag.toEp
	if aff := pr.svc.SessionAffinity; aff != nil {
		for _, e := range list {
			w.rule(chain)
			if !large {
				w.rawBytes(toEp).rawBytes(e.str(b)).char('"') // an endpoint string needs no escaping
			}
			w.args("-m", "recent", "--rcheck", "--seconds", strconv.Itoa(aff.TimeoutSeconds), "--reap", "--name", e.chain(names), "--mask", hostMask(pr.fc.fam), "--rsource", "-j", e.chain(names)).inChain(chain)
		}
	}
	// "-A chain" and the comment up to the endpoint, once.
	head := append(append(append(pr.sc.head[:0], "-A "...), chain...), toEp...)
	if large {
		head = head[:len("-A ")+len(chain)]
	}
	pr.sc.head = head
	for i, e := range list {
		w.ruleFrom(head)
		if !large {
			w.rawBytes(e.str(b)) // an endpoint string needs no escaping
		}
		w.raw(jumpArgs(len(list)-i, !large)).raw(e.chain(names)).inChain(chain)
	}
}

// reached returns the endpoints the cluster or local chain reaches, in
// endpoint order. Both lists keep the sorted order of eps, so one of them
// alone needs no sorting.
func (pr *portRenderer) reached() []endpoint {
	rt, b := &pr.route, pr.b
	reach := pr.sc.reach[:0]
	if rt.usesCluster {
		reach = append(reach, pr.cluster...)
	}
	if rt.usesLocal && len(pr.local) > 0 {
		for _, e := range pr.local {
			if !slices.ContainsFunc(reach, func(x endpoint) bool { return x.s0 == e.s0 }) {
				reach = append(reach, e)
			}
		}
		slices.SortFunc(reach, func(x, y endpoint) int { return bytes.Compare(x.str(b), y.str(b)) })
	}
	return reach
}

// endpointChains writes one KUBE-SEP- chain per endpoint reached: its
// hairpin masquerade rule and its DNAT rule.
func (pr *portRenderer) endpointChains(reach []endpoint) {
	w, b, names, f := pr.w, pr.b, pr.names, &pr.frag
	v6 := pr.fc.fam == xtables.IPv6
	affinity := pr.svc.SessionAffinity != nil
	for _, e := range reach {
		// " -s ip": the address as e.str ("ip:port", "[ip]:port") has
		// it.
		ip := e.str(b)
		ip = ip[:bytes.LastIndexByte(ip, ':')]
		if v6 {
			ip = ip[1 : len(ip)-1]
		}
		c := e.chain(names)
		w.rule(c).raw(" -s ").rawBytes(ip).rawBytes(f.masq).inChain(c)
		if affinity {
			w.rule(c).rawBytes(f.dnat)
			w.args("-m", "recent", "--set", "--name", c, "--mask", hostMask(pr.fc.fam), "--rsource")
			w.rawBytes(f.dnat2).rawBytes(e.str(b)).inChain(c)
		} else {
			w.rule(c).rawBytes(f.dnatAll).rawBytes(e.str(b)).inChain(c)
		}
	}
}
