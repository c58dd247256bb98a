package benchmatrix

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
)

// Kernel back ends a proxy programs.
const (
	KindIPVS     = "ipvs"
	KindIPTables = "iptables"
	KindNFTables = "nftables"
)

// endpointRef names one endpoint of one service.
type endpointRef struct {
	name    string
	vip, ep netip.Addr
}

// prober reads a node namespace's kernel state to decide when a proxy has
// programmed it.
type prober interface {
	// full reports whether n services x m endpoints are programmed.
	full(n, m int) (bool, error)
	// endpoints reports whether every endpoint is programmed (present) or
	// every one is gone (!present).
	endpoints(refs []endpointRef, present bool) (bool, error)
	// service reports whether service name with exactly eps is programmed
	// (eps not empty) or it is gone (eps empty).
	service(name string, vip netip.Addr, eps []netip.Addr) (bool, error)
	// fingerprint hashes the whole state the proxy owns.
	fingerprint() (string, error)
	// dump returns the start of the state, for a failure's message.
	dump() string
	close()
}

func newProber(kind string, n *node) (prober, error) {
	switch kind {
	case KindIPVS:
		c, err := ipvs.Dial(&ipvs.Options{NetNS: n.ns.FD()})
		if err != nil {
			return nil, fmt.Errorf("benchmatrix: IPVS netlink in the node namespace: %w", err)
		}
		return &ipvsProber{n: n, c: c}, nil
	case KindIPTables:
		return &iptablesProber{n: n}, nil
	case KindNFTables:
		return &nftProber{n: n}, nil
	}
	return nil, fmt.Errorf("benchmatrix: unknown kernel back end %q", kind)
}

// counters matches iptables-save's packet counters.
var counters = regexp.MustCompile(`\[\d+:\d+\]`)

func hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ipvsProber reads IPVS (netlink), the virtual IPs made local (kube-ipvs0's
// addresses, the sinks' local routes) and the KUBE-CLUSTER-IP set.
type ipvsProber struct {
	n *node
	c *ipvs.Conn
}

func (p *ipvsProber) close() { p.c.Close() }

func (p *ipvsProber) dump() string {
	text, err := p.ipvsText()
	s, d := strings.Count(text, "S "), strings.Count(text, "  D ")
	addrs, _ := p.n.ns.Run("ip", "-4", "-o", "addr", "show", "dev", "kube-ipvs0")
	routes, _ := p.n.ns.Run("ip", "-4", "route", "show", "table", "local", "proto", "156")
	sets, _ := p.n.ns.Run("ipset", "-t", "list")
	return fmt.Sprintf("%d TCP virtual servers, %d destinations, %d addresses on kube-ipvs0, %d local routes of the sinks%s\n%s",
		s, d, strings.Count(addrs, "\n"), strings.Count(routes, "\n"), errString(err), head(sets, 40))
}

// vips counts the IPv4 virtual IPs made local: bound on kube-ipvs0, as
// kube-proxy and --ipvs-vip-binding=addresses do, or given a local route
// of the sinks' protocol (156), as --ipvs-vip-binding=routes does.
func (p *ipvsProber) vips() (int, error) {
	addrs, err := p.n.ns.Run("ip", "-4", "-o", "addr", "show", "dev", "kube-ipvs0")
	if err != nil {
		return 0, err
	}
	routes, err := p.n.ns.Run("ip", "-4", "route", "show", "table", "local", "proto", "156")
	if err != nil {
		return 0, err
	}
	return strings.Count(addrs, "\n") + strings.Count(routes, "\n"), nil
}

// head returns the first n lines of s.
func head(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func errString(err error) string {
	if err != nil {
		return " (" + err.Error() + ")"
	}
	return ""
}

// ipvsText lists every virtual server ("S ...") and destination ("  D
// ...") with their settings, sorted, over netlink.
func (p *ipvsProber) ipvsText() (string, error) {
	svcs, err := p.c.Services()
	if err != nil {
		return "", err
	}
	var lines []string
	for _, s := range svcs {
		ds, err := p.c.Destinations(s.Service.Key())
		if err != nil {
			return "", err
		}
		var dl []string
		for _, d := range ds {
			dl = append(dl, fmt.Sprintf("  D %+v", d.Destination))
		}
		slices.Sort(dl)
		lines = append(lines, fmt.Sprintf("S %+v\n%s", s.Service, strings.Join(dl, "\n")))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}

func (p *ipvsProber) full(n, m int) (bool, error) {
	// Over netlink: /proc/net/ip_vs was seen to list only part of a
	// namespace's services while another namespace had as many.
	svcs, err := p.c.Services()
	if err != nil {
		return false, err
	}
	if len(svcs) < n {
		return false, nil
	}
	// The cheap signals first (one dump, one ipset call): reading every
	// server's destinations takes n dumps, each holding the IPVS mutex
	// the proxy's writes need, so it waits until nothing else is missing.
	if v, err := p.vips(); err != nil || v < n {
		return false, nil
	}
	if k, err := p.clusterIPEntries(); err != nil || k < n {
		return false, nil
	}
	dests := 0
	for _, s := range svcs {
		ds, err := p.c.Destinations(s.Service.Key())
		if err != nil {
			return false, err
		}
		dests += len(ds)
	}
	return dests == n*m, nil
}

// clusterIPEntries counts KUBE-CLUSTER-IP's members (ipset's header).
func (p *ipvsProber) clusterIPEntries() (int, error) {
	out, err := p.n.ns.Run("ipset", "-t", "list", "KUBE-CLUSTER-IP")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "Number of entries: "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("ipset -t list KUBE-CLUSTER-IP: no entry count in %q", head(out, 5))
}

func (p *ipvsProber) dests(vip netip.Addr) (map[netip.Addr]bool, error) {
	ds, err := p.c.Destinations(ipvs.ServiceKey{Family: ipvs.IPv4, Protocol: ipvs.TCP, Address: vip, Port: svcPort})
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr]bool{}
	for _, d := range ds {
		out[d.Destination.Address] = true
	}
	return out, nil
}

func (p *ipvsProber) endpoints(refs []endpointRef, present bool) (bool, error) {
	for _, r := range refs {
		ds, err := p.dests(r.vip)
		if err != nil {
			return false, err
		}
		if ds[r.ep] != present {
			return false, nil
		}
	}
	return true, nil
}

func (p *ipvsProber) service(_ string, vip netip.Addr, eps []netip.Addr) (bool, error) {
	ds, err := p.dests(vip)
	if err != nil {
		return false, err
	}
	if len(ds) != len(eps) {
		return false, nil
	}
	for _, ep := range eps {
		if !ds[ep] {
			return false, nil
		}
	}
	// The local table has vip's route either way it is made local (the
	// kernel's route of its address, or the sink's own).
	out, err := p.n.ns.Run("ip", "-4", "route", "show", "table", "local", vip.String())
	if err != nil || strings.Contains(out, "local "+vip.String()+" ") != (len(eps) > 0) {
		return false, nil
	}
	_, err = p.n.ns.Run("ipset", "test", "KUBE-CLUSTER-IP", fmt.Sprintf("%s,tcp:%d", vip, svcPort))
	return (err == nil) == (len(eps) > 0), nil
}

func (p *ipvsProber) fingerprint() (string, error) {
	text, err := p.ipvsText()
	if err != nil {
		return "", err
	}
	sets, err := p.n.ns.Run("ipset", "save")
	if err != nil {
		return "", err
	}
	addrs, err := p.n.ns.Run("ip", "-o", "addr", "show", "dev", "kube-ipvs0")
	if err != nil {
		return "", err
	}
	routes, err := p.n.ns.Run("ip", "route", "show", "table", "local", "proto", "156")
	if err != nil {
		return "", err
	}
	rules, err := p.n.ns.Run("iptables-save")
	if err != nil {
		return "", err
	}
	return hash(text, sets, addrs, routes, stripRules(rules)), nil
}

// stripRules drops iptables-save's comments and counters.
func stripRules(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, counters.ReplaceAllString(l, ""))
	}
	return strings.Join(out, "\n")
}

// iptablesProber reads the nat table (iptables-save, iptables -S CHAIN).
type iptablesProber struct{ n *node }

func (p *iptablesProber) close() {}

func (p *iptablesProber) dump() string {
	out, err := p.natSave()
	return head(out, 30) + errString(err)
}

// natSave returns iptables-save -t nat.
func (p *iptablesProber) natSave() (string, error) { return p.n.ns.Run("iptables-save", "-t", "nat") }

func (p *iptablesProber) full(n, m int) (bool, error) {
	out, err := p.natSave()
	if err != nil {
		return false, err
	}
	dnat, svcs := 0, 0
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(l, "--to-destination"):
			dnat++
		case strings.HasPrefix(l, "-A KUBE-SERVICES ") && strings.Contains(l, "-j KUBE-SVC-"):
			svcs++
		}
	}
	return dnat == n*m && svcs >= n, nil
}

// endpoints looks for the service chain's jump to the endpoint's chain:
// kube-proxy leaves a removed endpoint's KUBE-SEP chain in place until its
// next full sync, so the chain itself proves nothing.
func (p *iptablesProber) endpoints(refs []endpointRef, present bool) (bool, error) {
	var out string
	var err error
	if len(refs) == 1 {
		// One chain: iptables -S reads far less than iptables-save.
		out, err = p.n.ns.Run("iptables", "-w", "-t", "nat", "-S", SVCChain(refs[0].name))
	} else {
		out, err = p.natSave()
	}
	if err != nil {
		return false, err
	}
	for _, r := range refs {
		if strings.Contains(out, "-j "+SEPChain(r.name, r.ep)+"\n") != present {
			return false, nil
		}
	}
	return true, nil
}

func (p *iptablesProber) service(name string, _ netip.Addr, eps []netip.Addr) (bool, error) {
	if len(eps) == 0 {
		// Gone: KUBE-SERVICES no longer jumps to it (kube-proxy deletes
		// stale chains only at its next full sync).
		out, err := p.n.ns.Run("iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES")
		if err != nil {
			return false, err
		}
		return !strings.Contains(out, "-j "+SVCChain(name)+"\n"), nil
	}
	out, err := p.n.ns.Run("iptables", "-w", "-t", "nat", "-S", SVCChain(name))
	if err != nil {
		return false, nil
	}
	for _, ep := range eps {
		if !strings.Contains(out, "-j "+SEPChain(name, ep)+"\n") {
			return false, nil
		}
	}
	return strings.Count(out, "-j KUBE-SEP-") == len(eps), nil
}

func (p *iptablesProber) fingerprint() (string, error) {
	v4, err := p.n.ns.Run("iptables-save")
	if err != nil {
		return "", err
	}
	v6, err := p.n.ns.Run("ip6tables-save")
	if err != nil {
		return "", err
	}
	return hash(stripRules(v4), stripRules(v6)), nil
}

// nftProber reads kube-proxy's nftables table (nft list table ip
// kube-proxy).
type nftProber struct{ n *node }

func (p *nftProber) close() {}

func (p *nftProber) dump() string {
	out, err := p.n.ns.Run("nft", "list", "ruleset")
	var dnat []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "dnat") && len(dnat) < 5 {
			dnat = append(dnat, l)
		}
	}
	return fmt.Sprintf("%d endpoints in dnat maps, %d \"goto service-\"%s\n%s\n%s", countDNAT(out), strings.Count(out, "goto service-"), errString(err), strings.Join(dnat, "\n"), head(out, 20))
}

func (p *nftProber) table() (string, error) {
	return p.n.ns.Run("nft", "list", "table", "ip", "kube-proxy")
}

// dnatTo is how an endpoint appears in kube-proxy's per-service dnat map
// ("dnat ip to numgen random mod M map { 0 : 10.128.0.1 . 8080, ... }").
func dnatTo(ep netip.Addr) string { return fmt.Sprintf(": %s . %d", ep, targetPort) }

// countDNAT counts the endpoints in the dnat maps of an nft listing.
func countDNAT(text string) int {
	n := 0
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "dnat ip to") {
			n += strings.Count(l, fmt.Sprintf(" . %d", targetPort))
		}
	}
	return n
}

func (p *nftProber) full(n, m int) (bool, error) {
	out, err := p.table()
	if err != nil {
		return false, nil // the table does not exist yet
	}
	return countDNAT(out) == n*m && strings.Count(out, "goto service-") >= n, nil
}

func (p *nftProber) endpoints(refs []endpointRef, present bool) (bool, error) {
	out, err := p.table()
	if err != nil {
		return false, err
	}
	for _, r := range refs {
		if strings.Contains(out, dnatTo(r.ep)) != present {
			return false, nil
		}
	}
	return true, nil
}

func (p *nftProber) service(_ string, vip netip.Addr, eps []netip.Addr) (bool, error) {
	out, err := p.table()
	if err != nil {
		return false, err
	}
	key := fmt.Sprintf("%s . tcp . %d : goto service-", vip, svcPort)
	if strings.Contains(out, key) != (len(eps) > 0) {
		return false, nil
	}
	for _, ep := range eps {
		if !strings.Contains(out, dnatTo(ep)) {
			return false, nil
		}
	}
	return true, nil
}

func (p *nftProber) fingerprint() (string, error) {
	out, err := p.n.ns.Run("nft", "list", "ruleset")
	if err != nil {
		return "", err
	}
	return hash(out), nil
}
