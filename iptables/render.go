package iptables

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
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
	fam           xtables.Family
	mark          string       // "0x4000"
	masqueradeAll bool         // masquerade every packet to a cluster IP
	localCIDR     netip.Prefix // pods of this node's cluster; invalid: no local detection
	nodeIP        netip.Addr   // the node's address of the family, if known
	// scratch, when not nil, holds the slices render reuses from one
	// service to the next (renders of one famConfig are sequential).
	scratch *renderScratch
}

// renderScratch holds what render reuses from one service to the next:
// its working slices of endpoints, the strings of the port being rendered
// and the service's rendering, copied out at exact size when complete.
type renderScratch struct {
	eps, cluster, local, reach []endpoint
	strs                       []byte   // the current port's strings, built
	frag                       []byte   // the current port's line fragments
	head                       []byte   // the current chain's rules' start
	r                          rendered // the service being rendered
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

// span is one nat chain of a rendered service: its name and its rule lines
// (each ending in a newline) in the service's buffer.
type span struct {
	name       string
	start, end int32
	lines      int32
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

// topSpan is one rule of a rendered service in a top-level chain.
type topSpan struct {
	slot       int32
	start, end int32
}

// rendered is one service's ruleset for one family: its own nat chains and
// its rules in the top-level chains, all in canonical form (canonical.go).
// It is immutable once rendered: full syncs reuse it for a service that
// did not change.
type rendered struct {
	buf    []byte
	chains []span
	tops   []topSpan // in rendering order
	eps    int       // endpoints counted toward large-cluster mode
	udp    []udpPort
	lines  int // rule lines, both tables
	// src and large are what it was rendered from (render is pure).
	src   *client.ServiceEndpoints
	large bool
	// gen is the arena buf, chains and tops were carved from (0: their
	// own allocations); an int32 beside large keeps rendered at 128 bytes.
	gen int32
}

// filterRules counts r's rules in the filter table (its top-level filter
// lines); every other line is a nat rule.
func (r *rendered) filterRules() int {
	n := 0
	for _, s := range r.tops {
		if topChains[s.slot].table == "filter" {
			n++
		}
	}
	return n
}

// topText returns the text of a top-level rule.
func (r *rendered) topText(s topSpan) []byte { return r.buf[s.start:s.end] }

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
	var out []string
	for _, s := range r.tops {
		if int(s.slot) == slot {
			out = append(out, string(r.topText(s)))
		}
	}
	return out
}

// writer appends rule lines to a rendered service. Its text is
// buf[:n]: appending copies into buf and advances n, so rendering stores
// no pointer into the heap (which costs a write barrier while the garbage
// collector marks) except when buf must grow.
type writer struct {
	buf   []byte // len(buf) is the capacity
	n     int
	r     *rendered
	start int // start of the current line
	// minGrow is the least buf grows to (an arena's chunk size); grown
	// reports that it did.
	minGrow int
	grown   bool
}

// text returns what w holds.
func (w *writer) text() []byte { return w.buf[:w.n] }

// grow makes room for at least k more bytes.
func (w *writer) grow(k int) {
	b := make([]byte, max(w.minGrow, 2*(w.n+k)))
	copy(b, w.buf[:w.n])
	w.buf, w.grown = b, true
}

// s appends text as it is.
func (w *writer) s(text string) *writer {
	if w.n+len(text) > len(w.buf) {
		w.grow(len(text))
	}
	w.n += copy(w.buf[w.n:], text)
	return w
}

// c appends one byte.
func (w *writer) c(c byte) *writer {
	if w.n == len(w.buf) {
		w.grow(1)
	}
	w.buf[w.n] = c
	w.n++
	return w
}

// line starts "-A chain".
func (w *writer) line(chain string) *writer {
	w.start = w.n
	return w.s("-A ").s(chain)
}

// lineText starts a line with text ("-A chain...").
func (w *writer) lineText(text []byte) *writer {
	w.start = w.n
	return w.bytes(text)
}

// a appends raw arguments.
func (w *writer) a(args ...string) *writer {
	for _, s := range args {
		w.c(' ').s(s)
	}
	return w
}

// host appends a flag and a host address, without the prefix length
// iptables-save prints ("-s 10.0.0.1").
func (w *writer) host(flag string, a netip.Addr) *writer {
	var tmp [64]byte
	b := append(append(append(tmp[:0], ' '), flag...), ' ')
	return w.bytes(a.AppendTo(b))
}

// bytes appends text as it is.
func (w *writer) bytes(text []byte) *writer {
	if w.n+len(text) > len(w.buf) {
		w.grow(len(text))
	}
	w.n += copy(w.buf[w.n:], text)
	return w
}

// comment appends "-m comment --comment C", quoted as iptables-save does.
func (w *writer) comment(c string) *writer {
	return w.s(" -m comment --comment \"").escaped(c).c('"')
}

// escaped appends a comment's text, quotes and backslashes escaped as
// iptables-save prints them (both backends).
func (w *writer) escaped(s string) *writer {
	if !strings.ContainsAny(s, "\"\\") {
		return w.s(s)
	}
	var tmp [256]byte
	return w.bytes(appendEscaped(tmp[:0], s))
}

// appendEscaped appends s with quotes and backslashes escaped.
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

// comment2 and comment3 append a comment made of parts, without building
// the string first.
func (w *writer) comment2(a, b string) *writer { return w.comment3(a, b, "") }

func (w *writer) comment3(a, b, c string) *writer {
	return w.s(" -m comment --comment \"").escaped(a).escaped(b).escaped(c).c('"')
}

// end finishes the line and returns its span.
func (w *writer) end() span {
	w.c('\n')
	w.r.lines++
	return span{start: int32(w.start), end: int32(w.n), lines: 1}
}

// top finishes the line as a rule of a top-level chain.
func (w *writer) top(slot int) {
	s := w.end()
	w.r.tops = append(w.r.tops, topSpan{slot: int32(slot), start: s.start, end: s.end})
}

// in finishes the line as a rule of the service's chain name. A chain's
// lines are written one after the other: the line extends the current
// chain or starts the next.
func (w *writer) in(name string) {
	sp := w.end()
	r := w.r
	if n := len(r.chains); n > 0 && r.chains[n-1].name == name && r.chains[n-1].end == sp.start {
		r.chains[n-1].end = sp.end
		r.chains[n-1].lines++
		return
	}
	r.chains = append(r.chains, span{name: name, start: sp.start, end: sp.end, lines: 1})
}

// port appends a flag and a port number.
func (w *writer) port(flag string, p int) *writer {
	var tmp [32]byte
	b := append(append(append(tmp[:0], ' '), flag...), ' ')
	return w.bytes(strconv.AppendInt(b, int64(p), 10))
}

// probability returns the statistic match's probability of picking 1 of n
// (canonicalProbability).
func probability(n int) string {
	if n < len(probabilities) {
		return probabilities[n][len(statisticArgs):]
	}
	return formatProbability(n)
}

// jumpArgs returns what follows the comment of the rule of a KUBE-SVC- or
// KUBE-SVL- chain that picks one of the n endpoints left, up to the
// endpoint's chain: the comment's closing quote (quoted), the statistic
// match (when n > 1) and " -j ".
func jumpArgs(n int, quoted bool) string {
	q := 0
	if quoted {
		q = 1
	}
	if n < len(jumpArgsMemo[q]) {
		return jumpArgsMemo[q][n]
	}
	return `"`[:q] + statisticArgs + formatProbability(n) + " -j "
}

const statisticArgs = " -m statistic --mode random --probability "

// probabilities memoizes probability's statistic match, and jumpArgsMemo
// jumpArgs, for the common endpoint counts.
var probabilities, jumpArgsMemo = func() ([]string, [2][]string) {
	probs := make([]string, 257)
	var jumps [2][]string
	for q := range jumps {
		jumps[q] = make([]string, len(probs))
		jumps[q][1] = `"`[:q] + " -j "
	}
	for n := 2; n < len(probs); n++ {
		probs[n] = statisticArgs + formatProbability(n)
		for q := range jumps {
			jumps[q][n] = `"`[:q] + probs[n] + " -j "
		}
	}
	probs[1] = statisticArgs + formatProbability(1)
	return probs, jumps
}()

// formatProbability returns the probability of picking 1 of n: the
// fraction iptables stores for kube-proxy's text (1/n with ten decimals),
// as its shortest decimal.
func formatProbability(n int) string {
	return canonicalProbability(kubeProxyBits(n))
}

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
	w := &sc.r
	w.chains, w.tops, w.eps, w.udp, w.lines = w.chains[:0], w.tops[:0], 0, nil, 0
	wr := writer{r: w, buf: sc.text[:cap(sc.text)]}
	if a != nil {
		// Rendered straight into the arena's free text.
		wr.buf, wr.minGrow = a.text[:cap(a.text)], a.nextChunk()
	}
	sc.arena = a
	err := renderService(fc, sc, &wr, se, large)
	sc.arena = nil
	if a == nil {
		sc.text = wr.text()
	}
	if err != nil {
		return err
	}
	*r = rendered{eps: w.eps, udp: w.udp, lines: w.lines, src: se, large: large}
	w.udp = nil
	if a == nil {
		// One allocation for the text (no pointers: the garbage
		// collector does not scan it), one for each kind of span.
		r.buf, r.chains, r.tops = exact(sc.text), exact(w.chains), exact(w.tops)
		return nil
	}
	if wr.n == 0 {
		return nil // no rules in this family: nothing carved
	}
	if wr.grown {
		a.grew()
	}
	a.used += wr.n
	r.buf = wr.buf[:wr.n:wr.n]
	a.text = wr.buf[wr.n:wr.n]
	r.chains, r.tops = carve(&a.chains, w.chains), carve(&a.tops, w.tops)
	r.gen = a.gen
	return nil
}

// arenaChunk is the largest size of an arena's text chunks (about 20
// services of one port and ten endpoints). The first is 4 KB, each next one
// twice the last: what an arena allocates stays within twice what it
// holds, plus 4 KB.
const arenaChunk = 64 << 10

// arena holds the renderings of one full sync: their text and spans are
// carved from large chunks, not allocated per service. A chunk lives as
// long as any rendering in it (family.renderAll bounds what that keeps).
type arena struct {
	gen    int32
	text   []byte // free space of the current text chunk (len 0)
	chains []span // the current span chunks, len the part used
	tops   []topSpan
	chunks int // text chunks allocated
	used   int // text bytes carved
	// names holds the strings of renderings (chain names): written once,
	// a Builder's bytes are never moved, so its String is a chunk the
	// strings are carved from.
	names      strings.Builder
	nameChunks int
}

// str returns a copy of b carved from the arena's strings.
func (a *arena) str(b []byte) string {
	start := a.room(len(b))
	a.names.Write(b)
	return a.names.String()[start:]
}

// room makes room for n bytes in the arena's strings and returns where
// they start.
func (a *arena) room(n int) int {
	if a.names.Cap()-a.names.Len() < n {
		a.names = strings.Builder{}
		a.names.Grow(max(n, min(1<<10<<a.nameChunks, 16<<10)))
		a.nameChunks = min(a.nameChunks+1, 4)
	}
	return a.names.Len()
}

// nextChunk is the size of the arena's next text chunk.
func (a *arena) nextChunk() int { return min(4<<10<<a.chunks, arenaChunk) }

// grew counts a text chunk allocated.
func (a *arena) grew() { a.chunks = min(a.chunks+1, 8) }

// carve returns a copy of s in free's chunk (a new chunk when it is full),
// with no spare capacity; nil when s is empty.
func carve[T any](free *[]T, s []T) []T {
	if len(s) == 0 {
		return nil
	}
	if cap(*free)-len(*free) < len(s) {
		// Chunks double like the text's, from 16 to 512 elements (a
		// full sync that renders few services wastes little).
		*free = make([]T, 0, max(len(s), min(2*cap(*free), 512), 16))
	}
	start := len(*free)
	*free = append(*free, s...)
	return (*free)[start:len(*free):len(*free)]
}

// copyIn copies a rendering into a (compaction of an older arena).
func (a *arena) copyIn(r *rendered) {
	if len(a.text)+len(r.buf) > cap(a.text) {
		a.text = make([]byte, 0, max(a.nextChunk(), 2*len(r.buf)))
		a.grew()
	}
	a.used += len(r.buf)
	start := len(a.text)
	a.text = append(a.text, r.buf...)
	r.buf = a.text[start:len(a.text):len(a.text)]
	a.text = a.text[len(a.text):]
	r.chains, r.tops = carve(&a.chains, r.chains), carve(&a.tops, r.tops)
	for i := range r.chains {
		start := a.room(len(r.chains[i].name))
		a.names.WriteString(r.chains[i].name)
		r.chains[i].name = a.names.String()[start:]
	}
	r.gen = a.gen
}

// exact returns a copy of s with no spare capacity (nil when empty).
func exact[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
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

func renderService(fc *famConfig, sc *renderScratch, w *writer, se *client.ServiceEndpoints, large bool) error {
	r := &sc.r
	svc := se.Service
	v6 := fc.fam == xtables.IPv6
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
		// The port's strings (its name, its endpoints' "ip:port" and
		// later its chain names) are built in one buffer; renderPort
		// makes the name and the chain names one string.
		b := append(sc.strs[:0], svc.Namespace...)
		b = append(append(b, '/'), svc.Name...)
		if p.Name != "" {
			b = append(append(b, ':'), p.Name...)
		}
		pnEnd := len(b)
		eps = eps[:0]
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
		r.eps += len(eps)
		b = renderPort(fc, sc, w, svc, p, proto, b, pnEnd, clusterIP, extIPs, lbIPs, ranges, eps, large)
		sc.strs = b[:0]
	}
	sc.eps = eps[:0]
	return nil
}

// renderPort renders one port of a service. b holds the port's name
// (b[:pnEnd]) and its endpoints' strings; renderPort adds the chain names
// and returns b for reuse.
func renderPort(fc *famConfig, sc *renderScratch, w *writer, svc *client.Service, p client.Port, proto string, b []byte, pnEnd int,
	clusterIP netip.Addr, extIPs, lbIPs []netip.Addr, ranges []netip.Prefix, eps []endpoint, large bool) []byte {
	r := w.r
	accessible := p.NodePort != 0 || len(extIPs) > 0 || len(lbIPs) > 0
	iLocal := svc.InternalTrafficLocal
	eLocal := svc.ExternalTrafficLocal && svc.ExternallyAccessible()
	usesCluster := !iLocal || accessible
	usesLocal := iLocal || eLocal && accessible

	// Cluster and local endpoints, as kube-proxy categorizes them. The
	// source already applied traffic policies, topology and the
	// terminating fallback to Internal, External and Cluster; when both
	// policies are Local, the cluster endpoints serve only to
	// short-circuit this node's own traffic to external destinations.
	hasAny := false
	for i := range eps {
		e := &eps[i]
		if e.usable() {
			hasAny = true
		}
		switch {
		case !usesCluster:
		case !iLocal:
			e.inCluster = e.internal
		case !eLocal:
			e.inCluster = e.external
		default:
			e.inCluster = e.cluster
		}
		switch {
		case !usesLocal:
		case iLocal:
			e.inLocal = e.internal
		default:
			e.inLocal = e.external
		}
	}
	// The strings the rendering keeps, the port's name and its chain
	// names, follow the endpoints' strings in b and become one string
	// (names); the endpoints' strings stay bytes of b. Chain names: the
	// service port's four share one hash; one per endpoint the cluster or
	// local chain reaches.
	keep := len(b)
	b = append(b, b[:pnEnd]...)
	h := hashPort(b[:pnEnd], proto, nil)
	var at [5]int // where the four names start, and where the last ends
	for i, prefix := range [4]string{prefixSVC, prefixSVL, prefixEXT, prefixFW} {
		at[i] = len(b) - keep
		b = append(append(b, prefix...), h[:]...)
	}
	at[4] = len(b) - keep
	for i := range eps {
		if e := &eps[i]; e.inCluster || e.inLocal {
			h := hashPort(b[:pnEnd], proto, b[e.s0:e.s1])
			e.c0 = int32(len(b) - keep)
			b = append(append(b, prefixSEP...), h[:]...)
		}
	}
	names := sc.str(b[keep:])
	pn := names[:pnEnd]
	cluster := sc.cluster[:0]
	local := sc.local[:0]
	for _, e := range eps {
		if e.inCluster {
			cluster = append(cluster, e)
		}
		if e.inLocal {
			local = append(local, e)
		}
	}
	svcChain, svlChain, extChain, fwChain := names[at[0]:at[1]], names[at[1]:at[2]], names[at[2]:at[3]], names[at[3]:at[4]]
	// What the lines of the endpoint chains share is built once per
	// port: toEp starts a KUBE-SVC-/KUBE-SVL- rule's comment; masq ends a
	// KUBE-SEP- chain's masquerade rule after the address, dnat and dnat2
	// are its DNAT rule's parts before and after the affinity match
	// (dnatAll both, for a rule without it).
	v6 := fc.fam == xtables.IPv6
	f := append(sc.frag[:0], ` -m comment --comment "`...)
	f = append(appendEscaped(f, pn), " -> "...)
	toEnd := len(f)
	if !large {
		f = append(appendEscaped(append(f, ` -m comment --comment "`...), pn), '"')
	}
	f = append(f, " -j "+KubeMarkMasqChain...)
	masqEnd := len(f)
	f = append(append(f, " -p "...), proto...)
	if !large {
		f = append(appendEscaped(append(f, ` -m comment --comment "`...), pn), '"')
	}
	dnatEnd := len(f)
	f = append(append(append(f, " -m "...), proto...), " -j DNAT --to-destination "...)
	sc.frag = f
	toEp, masq, dnat, dnat2, dnatAll := f[:toEnd], f[toEnd:masqEnd], f[masqEnd:dnatEnd], f[dnatEnd:], f[masqEnd:]
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

	// Capture the cluster IP.
	if hasInternal {
		w.line(chainServices).host("-d", clusterIP).a("-p", proto).comment2(pn, " cluster IP").a("-m", proto).port("--dport", p.Port).a("-j", internalChain).top(topNATServices)
	} else {
		w.line(chainServices).host("-d", clusterIP).a("-p", proto).comment(internalComment).a("-m", proto).port("--dport", p.Port).a(internalTarget...).top(topFilterServices)
	}
	// External IPs.
	for _, ip := range extIPs {
		if hasAny {
			w.line(chainServices).host("-d", ip).a("-p", proto).comment2(pn, " external IP").a("-m", proto).port("--dport", p.Port).a("-j", extChain).top(topNATServices)
		}
		if !hasExternal {
			w.line(chainExternalServices).host("-d", ip).a("-p", proto).comment(externalComment).a("-m", proto).port("--dport", p.Port).a(externalTarget...).top(topFilterExternal)
		}
	}
	// Load-balancer IPs.
	for _, ip := range lbIPs {
		if hasAny {
			w.line(chainServices).host("-d", ip).a("-p", proto).comment2(pn, " loadbalancer IP").a("-m", proto).port("--dport", p.Port).a("-j", lbChain).top(topNATServices)
		}
		if usesFW {
			w.line(chainProxyFirewall).host("-d", ip).a("-p", proto).comment3(pn, " traffic not accepted by ", fwChain).a("-m", proto).port("--dport", p.Port).a("-j", "DROP").top(topFilterFirewall)
		}
	}
	if !hasExternal {
		for _, ip := range lbIPs {
			w.line(chainExternalServices).host("-d", ip).a("-p", proto).comment(externalComment).a("-m", proto).port("--dport", p.Port).a(externalTarget...).top(topFilterExternal)
		}
	}
	// Node ports.
	if p.NodePort != 0 {
		if hasAny {
			w.line(chainNodePorts).a("-p", proto).comment(pn).a("-m", proto).port("--dport", p.NodePort).a("-j", extChain).top(topNATNodePorts)
		}
		if !hasExternal {
			w.line(chainExternalServices).a("-p", proto).comment(externalComment).a("-m", "addrtype", "--dst-type", "LOCAL", "-m", proto).port("--dport", p.NodePort).a(externalTarget...).top(topFilterExternal)
		}
	}
	// Health-check node port.
	if svc.HealthCheckNodePort != 0 {
		w.line(chainNodePorts).a("-p", "tcp").comment2(pn, " health check node port").a("-m", "tcp").port("--dport", svc.HealthCheckNodePort).a("-j", "ACCEPT").top(topFilterNodePorts)
	}

	// The service's own chains, in the order kube-proxy declares them.
	// The internal chain starts with its masquerade rule.
	internalMasq := func() {
		if !hasInternal {
			return
		}
		switch {
		case fc.masqueradeAll:
			w.line(internalChain).host("-d", clusterIP).a("-p", proto).comment2(pn, " cluster IP").a("-m", proto).port("--dport", p.Port).a("-j", KubeMarkMasqChain).in(internalChain)
		case fc.localCIDR.IsValid():
			w.line(internalChain).a("!", "-s", sc.cidr).host("-d", clusterIP).a("-p", proto).comment2(pn, " cluster IP").a("-m", proto).port("--dport", p.Port).a("-j", KubeMarkMasqChain).in(internalChain)
		}
	}
	if usesEXT {
		if !eLocal {
			w.line(extChain).comment3("masquerade traffic for ", pn, " external destinations").a("-j", KubeMarkMasqChain).in(extChain)
		} else {
			if fc.localCIDR.IsValid() {
				w.line(extChain).a("-s", sc.cidr).comment3("pod traffic for ", pn, " external destinations").a("-j", svcChain).in(extChain)
			}
			w.line(extChain).comment3("masquerade LOCAL traffic for ", pn, " external destinations").a("-m", "addrtype", "--src-type", "LOCAL", "-j", KubeMarkMasqChain).in(extChain)
			w.line(extChain).comment3("route LOCAL traffic for ", pn, " external destinations").a("-m", "addrtype", "--src-type", "LOCAL", "-j", svcChain).in(extChain)
		}
		if hasExternal {
			w.line(extChain).a("-j", externalPolicyChain).in(extChain)
		}
	}
	if usesFW {
		allowNode := false
		for _, rg := range ranges {
			w.line(fwChain).a("-s", prefixText(rg)).comment2(pn, " loadbalancer IP").a("-j", extChain).in(fwChain)
			if fc.nodeIP.IsValid() && rg.Contains(fc.nodeIP) {
				allowNode = true
			}
		}
		if allowNode {
			for _, ip := range lbIPs {
				w.line(fwChain).host("-s", ip).comment2(pn, " loadbalancer IP").a("-j", extChain).in(fwChain)
			}
		}
		w.line(fwChain).comment3("other traffic to ", pn, " will be dropped by KUBE-PROXY-FIREWALL").in(fwChain)
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
					w.bytes(toEp).bytes(e.str(b)).c('"') // an endpoint string needs no escaping
				}
				w.a("-m", "recent", "--rcheck", "--seconds", strconv.Itoa(svc.SessionAffinity.TimeoutSeconds), "--reap", "--name", e.chain(names), "--mask", hostMask(fc.fam), "--rsource", "-j", e.chain(names)).in(chain)
			}
		}
		// "-A chain" and the comment up to the endpoint, once.
		head := append(append(append(sc.head[:0], "-A "...), chain...), toEp...)
		if large {
			head = head[:len("-A ")+len(chain)]
		}
		sc.head = head
		for i, e := range list {
			w.lineText(head)
			if !large {
				w.bytes(e.str(b)) // an endpoint string needs no escaping
			}
			w.s(jumpArgs(len(list)-i, !large)).s(e.chain(names)).in(chain)
		}
	}
	if usesSVC {
		toEndpoints(svcChain, cluster)
	}
	if usesSVL {
		toEndpoints(svlChain, local)
	}
	// One KUBE-SEP- chain per endpoint either chain reaches, in endpoint
	// order.
	// Both lists keep the sorted order of eps, so one of them alone
	// needs no sorting.
	reach := sc.reach[:0]
	if usesCluster {
		reach = append(reach, cluster...)
	}
	if usesLocal && len(local) > 0 {
		for _, e := range local {
			if !slices.ContainsFunc(reach, func(x endpoint) bool { return x.s0 == e.s0 }) {
				reach = append(reach, e)
			}
		}
		slices.SortFunc(reach, func(x, y endpoint) int { return bytes.Compare(x.str(b), y.str(b)) })
	}
	for _, e := range reach {
		// " -s ip": the address as e.str ("ip:port", "[ip]:port") has
		// it.
		ip := e.str(b)
		ip = ip[:bytes.LastIndexByte(ip, ':')]
		if v6 {
			ip = ip[1 : len(ip)-1]
		}
		c := e.chain(names)
		w.line(c).s(" -s ").bytes(ip).bytes(masq).in(c)
		if affinity {
			w.line(c).bytes(dnat)
			w.a("-m", "recent", "--set", "--name", c, "--mask", hostMask(fc.fam), "--rsource")
			w.bytes(dnat2).bytes(e.str(b)).in(c)
		} else {
			w.line(c).bytes(dnatAll).bytes(e.str(b)).in(c)
		}
	}
	if p.Protocol == client.UDP {
		u := udpPort{name: p.Name, port: uint16(p.Port), nodePort: uint16(p.NodePort)}
		u.vips = append(append(append(u.vips, clusterIP), extIPs...), lbIPs...)
		for _, e := range reach {
			// e.str(b) is what AddrPort.AppendTo wrote.
			u.eps = append(u.eps, netip.MustParseAddrPort(string(e.str(b))))
		}
		r.udp = append(r.udp, u)
	}
	sc.cluster, sc.local, sc.reach = cluster[:0], local[:0], reach[:0]
	return b
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
