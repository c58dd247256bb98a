package iptables

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane/rules"
)

// The top-level chains a service adds rules to. A service's rules there are
// independent of every other service's (each matches its own addresses and
// ports), so a partial sync edits them rule by rule.
const (
	topNATServices     = iota // nat KUBE-SERVICES
	topNATNodePorts           // nat KUBE-NODEPORTS
	topFilterServices         // filter KUBE-SERVICES
	topFilterExternal         // filter KUBE-EXTERNAL-SERVICES
	topFilterNodePorts        // filter KUBE-NODEPORTS
	topFilterFirewall         // filter KUBE-PROXY-FIREWALL
	numTop
)

// topChains gives each top-level slot its table and chain.
var topChains = [numTop]struct{ table, chain string }{
	{"nat", chainServices},
	{"nat", chainNodePorts},
	{"filter", chainServices},
	{"filter", chainExternalServices},
	{"filter", chainNodePorts},
	{"filter", chainProxyFirewall},
}

// largeClusterEndpoints is kube-proxy's threshold: above this many endpoints
// (of one family, over all service ports) the per-endpoint comments are
// left out to shrink the ruleset.
const largeClusterEndpoints = 1000

// famConfig is what rendering needs to know about the node, for one family.
type famConfig struct {
	fam           rules.Family
	mark          string       // "0x4000"
	masqueradeAll bool         // masquerade every packet to a cluster IP
	localCIDR     netip.Prefix // pods of this node's cluster; invalid: no local detection
	nodeIP        netip.Addr   // the node's address of the family, if known
	// scratch, when not nil, holds the slices render reuses from one
	// service to the next (renders of one famConfig are sequential).
	scratch *renderScratch
}

// renderScratch holds render's working slices of endpoints.
type renderScratch struct {
	eps, cluster, local, reach []endpoint
	strs                       []byte // endpoint strings being built
	ends                       []int  // where each ends in strs
}

// keep stores working slices for the next render, emptied (so they hold
// no endpoints of a past snapshot).
func (sc *renderScratch) keep(dst *[]endpoint, list []endpoint) {
	clear(list)
	*dst = list[:0]
}

// span is one nat chain of a rendered service: its name and its rule lines
// (each ending in a newline) in the service's buffer.
type span struct {
	name       string
	start, end int32
}

// udpPort is what stale-conntrack flushing needs to know about a UDP
// service port: its service addresses and port, and the endpoints traffic
// reaches.
type udpPort struct {
	name     string
	vips     []netip.Addr
	port     uint16
	nodePort uint16
	eps      []netip.AddrPort
}

// rendered is one service's ruleset for one family: its own nat chains and
// its rules in the top-level chains, all in the form iptables-save prints.
type rendered struct {
	buf    []byte
	chains []span
	top    [numTop][]span // one span per line; name unused
	eps    int            // endpoints counted toward large-cluster mode
	udp    []udpPort
	lines  int // rule lines, both tables
}

// filterRules counts r's rules in the filter table (its top-level filter
// lines); every other line is a nat rule.
func (r *rendered) filterRules() int {
	n := 0
	for slot, c := range topChains {
		if c.table == "filter" {
			n += len(r.top[slot])
		}
	}
	return n
}

func (r *rendered) text(s span) []byte { return r.buf[s.start:s.end] }

// chainText returns the lines of the named chain and whether r has it.
func (r *rendered) chainText(name string) ([]byte, bool) {
	for _, c := range r.chains {
		if c.name == name {
			return r.text(c), true
		}
	}
	return nil, false
}

// topLines returns the lines r adds to one top-level chain.
func (r *rendered) topLines(slot int) []string {
	out := make([]string, len(r.top[slot]))
	for i, s := range r.top[slot] {
		out[i] = string(r.text(s))
	}
	return out
}

// writer appends rule lines to a rendered service.
type writer struct {
	r     *rendered
	start int // start of the current line
}

// line starts "-A chain".
func (w *writer) line(chain string) *writer {
	w.start = len(w.r.buf)
	w.r.buf = append(w.r.buf, "-A "...)
	w.r.buf = append(w.r.buf, chain...)
	return w
}

// a appends raw arguments.
func (w *writer) a(args ...string) *writer {
	for _, s := range args {
		w.r.buf = append(w.r.buf, ' ')
		w.r.buf = append(w.r.buf, s...)
	}
	return w
}

// raw appends text as it is (with its own leading space).
func (w *writer) raw(text string) *writer {
	w.r.buf = append(w.r.buf, text...)
	return w
}

// host appends a flag and a host prefix ("-s 10.0.0.1/32").
func (w *writer) host(flag string, a netip.Addr) *writer {
	w.r.buf = append(w.r.buf, ' ')
	w.r.buf = append(w.r.buf, flag...)
	w.r.buf = append(w.r.buf, ' ')
	w.r.buf = a.AppendTo(w.r.buf)
	w.r.buf = append(w.r.buf, '/')
	w.r.buf = strconv.AppendInt(w.r.buf, int64(a.BitLen()), 10)
	return w
}

// comment appends "-m comment --comment C", quoted as iptables-save does.
func (w *writer) comment(c string) *writer {
	w.r.buf = append(w.r.buf, " -m comment --comment "...)
	w.r.buf = appendQuoted(w.r.buf, c)
	return w
}

// comment2 and comment3 append a comment made of parts, without building
// the string first.
func (w *writer) comment2(a, b string) *writer { return w.comment3(a, b, "") }

func (w *writer) comment3(a, b, c string) *writer {
	w.r.buf = append(w.r.buf, " -m comment --comment \""...)
	for _, s := range [3]string{a, b, c} {
		w.r.buf = appendEscaped(w.r.buf, s)
	}
	w.r.buf = append(w.r.buf, '"')
	return w
}

// end finishes the line and returns its span.
func (w *writer) end() span {
	w.r.buf = append(w.r.buf, '\n')
	w.r.lines++
	return span{start: int32(w.start), end: int32(len(w.r.buf))}
}

// top finishes the line as a rule of a top-level chain.
func (w *writer) top(slot int) {
	w.r.top[slot] = append(w.r.top[slot], w.end())
}

// appendQuoted appends a comment as iptables-save prints it (both
// backends): in double quotes, with quotes and backslashes escaped.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendEscaped(b, s)
	return append(b, '"')
}

func appendEscaped(b []byte, s string) []byte {
	if !strings.ContainsAny(s, "\"\\") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return b
}

// hostPrefix returns "a/32" or "a/128".
func hostPrefix(a netip.Addr) string { return netip.PrefixFrom(a, a.BitLen()).String() }

// probability returns the statistic match's probability of picking 1 of n,
// as iptables-save prints it: the kernel keeps it as a 31-bit fraction.
func probability(n int) string {
	if n < len(probabilities) {
		return probabilities[n]
	}
	return formatProbability(n)
}

// probabilities memoizes probability for the common endpoint counts.
var probabilities = func() []string {
	out := make([]string, 257)
	for n := 1; n < len(out); n++ {
		out[n] = formatProbability(n)
	}
	return out
}()

func formatProbability(n int) string {
	q := math.Round(float64(0x80000000) / float64(n))
	return strconv.FormatFloat(q/float64(0x80000000), 'f', 11, 64)
}

// endpoint is one endpoint of a service port, in one family.
type endpoint struct {
	ep    *client.Endpoint
	addr  netip.AddrPort
	str   string // "ip:port", kube-proxy's endpoint string
	chain string
}

// reachable reports whether the endpoint can receive traffic at all.
func usable(e *client.Endpoint) bool { return e.Ready || e.Serving && e.Terminating }

// render writes the rules of one service for one family into r (reset
// first). large selects kube-proxy's large-cluster mode (no per-endpoint
// comments). A service without a cluster IP of the family renders nothing.
func render(fc *famConfig, se *client.ServiceEndpoints, large bool, r *rendered) error {
	r.buf, r.chains, r.eps, r.udp, r.lines = r.buf[:0], r.chains[:0], 0, r.udp[:0], 0
	for i := range r.top {
		r.top[i] = r.top[i][:0]
	}
	svc := se.Service
	v6 := fc.fam == rules.IPv6
	cips := svc.ClusterIPs.Family(v6)
	if len(cips) == 0 {
		return nil
	}
	clusterIP := cips[0]
	extIPs := svc.ExternalIPs.Family(v6)
	lbIPs := svc.LoadBalancerIPs.Family(v6)
	var ranges []netip.Prefix
	for _, p := range svc.LoadBalancerSourceRanges {
		if p.Addr().Is6() == v6 {
			ranges = append(ranges, p)
		}
	}
	if slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Bits() == 0 }) {
		ranges = nil // a zero-length range allows every client
	}
	if need := estimate(se, v6); cap(r.buf) < need {
		r.buf = make([]byte, 0, need)
	}
	if need := len(svc.Ports) * (len(se.Endpoints) + 4); cap(r.chains) < need {
		r.chains = make([]span, 0, need)
	}
	w := &writer{r: r}
	sc := fc.scratch
	if sc == nil {
		sc = &renderScratch{}
	}
	eps := slices.Grow(sc.eps[:0], len(se.Endpoints))
	for _, p := range svc.Ports {
		if p.Port < 1 || p.Port > 65535 || p.NodePort < 0 || p.NodePort > 65535 {
			return fmt.Errorf("iptables: service %s port %q: port %d / node port %d out of range", svc.Key(), p.Name, p.Port, p.NodePort)
		}
		proto := strings.ToLower(string(p.Protocol))
		switch p.Protocol {
		case client.TCP, client.UDP, client.SCTP:
		default:
			return fmt.Errorf("iptables: service %s port %q: unknown protocol %q", svc.Key(), p.Name, p.Protocol)
		}
		pn := PortName(svc.Namespace, svc.Name, p.Name)
		eps = eps[:0]
		for _, e := range se.Endpoints {
			addrs := e.IPs.Family(v6)
			port, ok := e.PortFor(p)
			if len(addrs) == 0 || !ok || port < 1 || port > 65535 {
				continue
			}
			ap := netip.AddrPortFrom(addrs[0], uint16(port))
			eps = append(eps, endpoint{ep: e, addr: ap})
		}
		// The "ip:port" strings of a port's endpoints, in one string.
		strs, ends := sc.strs[:0], sc.ends[:0]
		for i := range eps {
			strs = eps[i].addr.AppendTo(strs)
			ends = append(ends, len(strs))
		}
		all, off := string(strs), 0
		for i := range eps {
			eps[i].str = all[off:ends[i]]
			off = ends[i]
		}
		sc.strs, sc.ends = strs[:0], ends[:0]
		slices.SortFunc(eps, func(a, b endpoint) int { return strings.Compare(a.str, b.str) })
		r.eps += len(eps)
		if err := renderPort(fc, sc, w, svc, p, proto, pn, clusterIP, extIPs, lbIPs, ranges, eps, large); err != nil {
			return err
		}
	}
	sc.keep(&sc.eps, eps)
	return nil
}

func renderPort(fc *famConfig, sc *renderScratch, w *writer, svc *client.Service, p client.Port, proto, pn string,
	clusterIP netip.Addr, extIPs, lbIPs []netip.Addr, ranges []netip.Prefix, eps []endpoint, large bool) error {
	r := w.r
	accessible := p.NodePort != 0 || len(extIPs) > 0 || len(lbIPs) > 0
	iLocal := svc.InternalTrafficLocal
	eLocal := svc.ExternalTrafficLocal && svc.ExternallyAccessible()
	usesCluster := !iLocal || accessible
	usesLocal := iLocal || eLocal && accessible

	// Cluster and local endpoints, as kube-proxy categorizes them. The
	// source already applied traffic policies, topology and the
	// terminating fallback to Internal and External; when both policies
	// are Local, cluster endpoints (used only to short-circuit this node's
	// own traffic to external destinations) are the ready ones, or the
	// serving terminating ones when none is ready.
	cluster := slices.Grow(sc.cluster[:0], len(eps))
	var local []endpoint
	if usesLocal {
		local = slices.Grow(sc.local[:0], len(eps))
	}
	hasAny := false
	anyReady := slices.ContainsFunc(eps, func(e endpoint) bool { return e.ep.Ready })
	for _, e := range eps {
		if usable(e.ep) {
			hasAny = true
		}
		switch {
		case !usesCluster:
		case !iLocal:
			if e.ep.Internal {
				cluster = append(cluster, e)
			}
		case !eLocal:
			if e.ep.External {
				cluster = append(cluster, e)
			}
		case anyReady && e.ep.Ready || !anyReady && e.ep.Serving && e.ep.Terminating:
			cluster = append(cluster, e)
		}
		switch {
		case !usesLocal:
		case iLocal:
			if e.ep.Internal {
				local = append(local, e)
			}
		case e.ep.External:
			local = append(local, e)
		}
	}
	svcChain, svlChain, extChain, fwChain := serviceChains(pn, proto)
	usesSVC := len(cluster) > 0 && usesCluster
	usesSVL := len(local) > 0 && usesLocal

	internalChain, hasInternal := svcChain, hasAny
	if iLocal {
		internalChain, hasInternal = svlChain, len(local) > 0
	}
	externalPolicyChain, hasExternal := svcChain, hasAny
	if eLocal {
		externalPolicyChain, hasExternal = svlChain, len(local) > 0
	}
	usesEXT := hasAny && accessible
	lbChain := extChain
	usesFW := hasAny && len(lbIPs) > 0 && len(ranges) > 0
	if usesFW {
		lbChain = fwChain
	}
	reject := rejectWith(fc.fam)
	var internalTarget, externalTarget []string
	var internalComment, externalComment string
	if !hasAny {
		internalTarget = []string{"-j", "REJECT", "--reject-with", reject}
		internalComment = pn + " has no endpoints"
		externalTarget, externalComment = internalTarget, internalComment
	} else {
		if !hasInternal {
			internalTarget = []string{"-j", "DROP"}
			internalComment = pn + " has no local endpoints"
		}
		if !hasExternal {
			externalTarget = []string{"-j", "DROP"}
			externalComment = pn + " has no local endpoints"
		}
	}
	port := strconv.Itoa(p.Port)
	nodePort := strconv.Itoa(p.NodePort)
	cip := hostPrefix(clusterIP)

	// Capture the cluster IP.
	if hasInternal {
		w.line(chainServices).a("-d", cip, "-p", proto).comment(pn+" cluster IP").a("-m", proto, "--dport", port, "-j", internalChain).top(topNATServices)
	} else {
		w.line(chainServices).a("-d", cip, "-p", proto).comment(internalComment).a("-m", proto, "--dport", port).a(internalTarget...).top(topFilterServices)
	}
	// External IPs.
	for _, ip := range extIPs {
		d := hostPrefix(ip)
		if hasAny {
			w.line(chainServices).a("-d", d, "-p", proto).comment(pn+" external IP").a("-m", proto, "--dport", port, "-j", extChain).top(topNATServices)
		}
		if !hasExternal {
			w.line(chainExternalServices).a("-d", d, "-p", proto).comment(externalComment).a("-m", proto, "--dport", port).a(externalTarget...).top(topFilterExternal)
		}
	}
	// Load-balancer IPs.
	for _, ip := range lbIPs {
		d := hostPrefix(ip)
		if hasAny {
			w.line(chainServices).a("-d", d, "-p", proto).comment(pn+" loadbalancer IP").a("-m", proto, "--dport", port, "-j", lbChain).top(topNATServices)
		}
		if usesFW {
			w.line(chainProxyFirewall).a("-d", d, "-p", proto).comment(pn+" traffic not accepted by "+fwChain).a("-m", proto, "--dport", port, "-j", "DROP").top(topFilterFirewall)
		}
	}
	if !hasExternal {
		for _, ip := range lbIPs {
			w.line(chainExternalServices).a("-d", hostPrefix(ip), "-p", proto).comment(externalComment).a("-m", proto, "--dport", port).a(externalTarget...).top(topFilterExternal)
		}
	}
	// Node ports.
	if p.NodePort != 0 {
		if hasAny {
			w.line(chainNodePorts).a("-p", proto).comment(pn).a("-m", proto, "--dport", nodePort, "-j", extChain).top(topNATNodePorts)
		}
		if !hasExternal {
			w.line(chainExternalServices).a("-p", proto).comment(externalComment).a("-m", "addrtype", "--dst-type", "LOCAL", "-m", proto, "--dport", nodePort).a(externalTarget...).top(topFilterExternal)
		}
	}
	// Health-check node port.
	if svc.HealthCheckNodePort != 0 {
		w.line(chainNodePorts).a("-p", "tcp").comment(pn+" health check node port").a("-m", "tcp", "--dport", strconv.Itoa(svc.HealthCheckNodePort), "-j", "ACCEPT").top(topFilterNodePorts)
	}

	// The service's own chains, in the order kube-proxy declares them.
	// Chains are written one after the other, each line of a chain right
	// after the previous one: add extends the current chain or starts the
	// next.
	add := func(name string, sp span) {
		if n := len(r.chains); n > 0 && r.chains[n-1].name == name && r.chains[n-1].end == sp.start {
			r.chains[n-1].end = sp.end
			return
		}
		r.chains = append(r.chains, span{name: name, start: sp.start, end: sp.end})
	}
	// The internal chain starts with its masquerade rule.
	internalMasq := func() {
		if !hasInternal {
			return
		}
		switch {
		case fc.masqueradeAll:
			add(internalChain, w.line(internalChain).a("-d", cip, "-p", proto).comment2(pn, " cluster IP").a("-m", proto, "--dport", port, "-j", KubeMarkMasqChain).end())
		case fc.localCIDR.IsValid():
			add(internalChain, w.line(internalChain).a("!", "-s", fc.localCIDR.String(), "-d", cip, "-p", proto).comment2(pn, " cluster IP").a("-m", proto, "--dport", port, "-j", KubeMarkMasqChain).end())
		}
	}
	if usesEXT {
		if !eLocal {
			add(extChain, w.line(extChain).comment("masquerade traffic for "+pn+" external destinations").a("-j", KubeMarkMasqChain).end())
		} else {
			if fc.localCIDR.IsValid() {
				add(extChain, w.line(extChain).a("-s", fc.localCIDR.String()).comment("pod traffic for "+pn+" external destinations").a("-j", svcChain).end())
			}
			add(extChain, w.line(extChain).comment("masquerade LOCAL traffic for "+pn+" external destinations").a("-m", "addrtype", "--src-type", "LOCAL", "-j", KubeMarkMasqChain).end())
			add(extChain, w.line(extChain).comment("route LOCAL traffic for "+pn+" external destinations").a("-m", "addrtype", "--src-type", "LOCAL", "-j", svcChain).end())
		}
		if hasExternal {
			add(extChain, w.line(extChain).a("-j", externalPolicyChain).end())
		}
	}
	if usesFW {
		allowNode := false
		for _, rg := range ranges {
			add(fwChain, w.line(fwChain).a("-s", rg.String()).comment(pn+" loadbalancer IP").a("-j", extChain).end())
			if fc.nodeIP.IsValid() && rg.Contains(fc.nodeIP) {
				allowNode = true
			}
		}
		if allowNode {
			for _, ip := range lbIPs {
				add(fwChain, w.line(fwChain).a("-s", hostPrefix(ip)).comment(pn+" loadbalancer IP").a("-j", extChain).end())
			}
		}
		add(fwChain, w.line(fwChain).comment("other traffic to "+pn+" will be dropped by KUBE-PROXY-FIREWALL").end())
	}
	affinity := svc.SessionAffinity != nil
	toEndpoints := func(chain string, list []endpoint) {
		if chain == internalChain {
			internalMasq()
		}
		if affinity {
			for _, e := range list {
				w.line(chain)
				if !large {
					w.comment3(pn, " -> ", e.str)
				}
				add(chain, w.a("-m", "recent", "--rcheck", "--seconds", strconv.Itoa(svc.SessionAffinity.TimeoutSeconds), "--reap", "--name", e.chain, "--mask", hostMask(fc.fam), "--rsource", "-j", e.chain).end())
			}
		}
		for i, e := range list {
			w.line(chain)
			if !large {
				w.comment3(pn, " -> ", e.str)
			}
			if i < len(list)-1 {
				w.raw(" -m statistic --mode random --probability ").raw(probability(len(list) - i))
			}
			add(chain, w.raw(" -j ").raw(e.chain).end())
		}
	}
	// The KUBE-SEP- chain names of a list, in one string.
	name := func(list []endpoint) {
		const n = len(prefixSEP) + 16
		names := make([]byte, 0, n*len(list))
		for _, e := range list {
			h := hashOf(pn, proto, e.str)
			names = append(append(names, prefixSEP...), h[:]...)
		}
		all := string(names)
		for i := range list {
			list[i].chain = all[i*n : (i+1)*n]
		}
	}
	name(cluster)
	name(local)
	if usesSVC {
		toEndpoints(svcChain, cluster)
	}
	if usesSVL {
		toEndpoints(svlChain, local)
	}
	// One KUBE-SEP- chain per endpoint either chain reaches, in endpoint
	// order.
	reach := sc.reach[:0]
	if usesCluster {
		reach = append(reach, cluster...)
	}
	if usesLocal {
		for _, e := range local {
			if !slices.ContainsFunc(reach, func(x endpoint) bool { return x.str == e.str }) {
				reach = append(reach, e)
			}
		}
	}
	slices.SortFunc(reach, func(a, b endpoint) int { return strings.Compare(a.str, b.str) })
	for _, e := range reach {
		w.line(e.chain).host("-s", e.addr.Addr())
		if !large {
			w.comment(pn)
		}
		add(e.chain, w.raw(" -j "+KubeMarkMasqChain).end())
		w.line(e.chain).a("-p", proto)
		if !large {
			w.comment(pn)
		}
		if affinity {
			w.a("-m", "recent", "--set", "--name", e.chain, "--mask", hostMask(fc.fam), "--rsource")
		}
		add(e.chain, w.a("-m", proto).raw(" -j DNAT --to-destination ").raw(e.str).end())
	}
	if p.Protocol == client.UDP {
		u := udpPort{name: p.Name, port: uint16(p.Port), nodePort: uint16(p.NodePort)}
		u.vips = append(append(append(u.vips, clusterIP), extIPs...), lbIPs...)
		for _, e := range reach {
			u.eps = append(u.eps, e.addr)
		}
		r.udp = append(r.udp, u)
	}
	sc.keep(&sc.cluster, cluster)
	if local != nil {
		sc.keep(&sc.local, local)
	}
	sc.keep(&sc.reach, reach)
	return nil
}

// rejectWith is the ICMP answer of a REJECT rule, as iptables-save prints it.
func rejectWith(f rules.Family) string {
	if f == rules.IPv6 {
		return "icmp6-port-unreachable"
	}
	return "icmp-port-unreachable"
}

// hostMask is the recent match's default mask, as iptables-save prints it.
func hostMask(f rules.Family) string {
	if f == rules.IPv6 {
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

// estimate is a generous guess of a service's rendered size, so that its
// buffer is allocated once.
func estimate(se *client.ServiceEndpoints, v6 bool) int {
	n := len(se.Endpoints) + 4
	// About 3 lines of 110 bytes per endpoint.
	return len(se.Service.Ports) * n * 3 * 110
}
