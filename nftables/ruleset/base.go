package ruleset

import (
	"net/netip"
	"strings"

	"github.com/proxysinks/proxysinks/host/xtables"
)

// famText holds the words of one family's rules.
type famText struct {
	family   string // the table's family: "ip" or "ip6"
	addrType string // "ipv4_addr" or "ipv6_addr"
	loopback string // the loopback destination NodePorts leave out
	v6       bool
}

func newFamText(v6 bool) famText {
	if v6 {
		return famText{family: "ip6", addrType: "ipv6_addr", loopback: "::1", v6: true}
	}
	return famText{family: "ip", addrType: "ipv4_addr", loopback: "127.0.0.0/8"}
}

// baseChain is one of the chains on a netfilter hook, with kube-proxy's
// priority as knftables writes it (a number).
type baseChain struct{ name, typ, hook, priority string }

// baseChains are kube-proxy's base chains.
var baseChains = []baseChain{
	{chainFilterPreroutingPreDNAT, "filter", "prerouting", "-110"},
	{chainFilterOutputPreDNAT, "filter", "output", "-110"},
	{chainFilterInput, "filter", "input", "0"},
	{chainFilterForward, "filter", "forward", "0"},
	{chainFilterOutput, "filter", "output", "0"},
	{chainNATPrerouting, "nat", "prerouting", "-100"},
	{chainNATOutput, "nat", "output", "-100"},
	{chainNATPostrouting, "nat", "postrouting", "100"},
}

// jump is a rule of a base chain jumping to one of the top-level chains,
// in kube-proxy's order.
type jump struct{ from, cond, to string }

var jumps = []jump{
	{chainFilterInput, "ct state new", chainNodePortEPCheck},
	{chainFilterInput, "ct state new", chainServiceEPCheck},
	{chainFilterForward, "ct state new", chainServiceEPCheck},
	{chainFilterOutput, "ct state new", chainServiceEPCheck},
	{chainFilterPreroutingPreDNAT, "ct state new", chainFirewallCheck},
	{chainFilterOutputPreDNAT, "ct state new", chainFirewallCheck},
	{chainNATOutput, "", chainServices},
	{chainNATPrerouting, "", chainServices},
	{chainNATPostrouting, "", chainMasquerading},
	{chainFilterForward, "ct state new", chainClusterIPsCheck},
	{chainFilterOutput, "ct state new", chainClusterIPsCheck},
}

// baseTable returns the chains, sets and maps every kube-proxy table has,
// with their fixed rules (setupNFTables), by name.
func (r *renderer) baseTable() (map[string]*Chain, []Set) {
	ft, mark := r.ft, r.mark
	ipX := ft.family
	chains := map[string]*Chain{}
	chain := func(name string) *Chain {
		c := chains[name]
		if c == nil {
			c = &Chain{Name: name}
			chains[name] = c
		}
		return c
	}
	add := func(name, text, comment string) {
		c := chain(name)
		c.Rules = append(c.Rules, Rule{Text: text, Comment: comment})
	}
	for _, bc := range baseChains {
		c := chain(bc.name)
		c.Type, c.Hook, c.Priority = bc.typ, bc.hook, bc.priority
	}
	for _, j := range jumps {
		chain(j.to)
		text := "jump " + j.to
		if j.cond != "" {
			text = j.cond + " " + text
		}
		add(j.from, text, "")
	}
	add(chainMasquerading, "mark and "+mark+" != 0 mark set mark xor "+mark+" masquerade fully-random", "")
	add(chainMasquerading, "ct status dnat "+ipX+" saddr . "+ipX+" daddr . meta l4proto . th dport @"+setHairpin+" masquerade fully-random", "")
	add(chainClusterIPsCheck, ipX+" daddr @"+setClusterIPs+" reject", "Reject traffic to invalid ports of ClusterIPs")
	if cidrs := r.serviceCIDRs(); cidrs != "" {
		add(chainClusterIPsCheck, ipX+" daddr { "+cidrs+" } drop", "Drop traffic to unallocated ClusterIPs")
	}
	chain(chainReject).Comment = "helper for @no-endpoint-services / @no-endpoint-nodeports"
	add(chainReject, "reject", "")
	add(chainServiceEPCheck, ipX+" daddr . meta l4proto . th dport vmap @"+mapNoEndpointServices, "")
	if r.fam.NodePortsRestricted {
		add(chainNodePortEPCheck, ipX+" daddr @"+setNodePortIPs+" meta l4proto . th dport vmap @"+mapNoEndpointNodePort, "")
	} else {
		add(chainNodePortEPCheck, ipX+" daddr != "+ft.loopback+" meta l4proto . th dport vmap @"+mapNoEndpointNodePort, "")
	}
	add(chainFirewallCheck, ipX+" daddr . meta l4proto . th dport vmap @"+mapFirewallIPs, "")
	masq := "mark set mark or " + mark
	if r.cfg.MasqueradeAll {
		add(chainServices, ipX+" daddr @"+setClusterIPs+" "+masq, "masquerade all clusterIP traffic")
	} else if notLocal := r.ifNotLocal(); notLocal != "" {
		add(chainServices, ipX+" daddr @"+setClusterIPs+" "+notLocal+" "+masq, "masquerade clusterIP traffic from outside cluster")
	}
	add(chainServices, ipX+" daddr . meta l4proto . th dport vmap @"+mapServiceIPs, "")
	if r.fam.NodePortsRestricted {
		add(chainServices, ipX+" daddr @"+setNodePortIPs+" meta l4proto . th dport vmap @"+mapServiceNodePorts, "")
	} else {
		add(chainServices, "fib daddr type local "+ipX+" daddr != "+ft.loopback+" meta l4proto . th dport vmap @"+mapServiceNodePorts, "")
	}

	svcMap := ft.addrType + " . inet_proto . inet_service : verdict"
	portMap := "inet_proto . inet_service : verdict"
	sets := []Set{
		{Name: setClusterIPs, Type: ft.addrType, Comment: "Active ClusterIPs"},
		{Name: setHairpin, Type: ft.addrType + " . " + ft.addrType + " . inet_proto . inet_service", Comment: "service hairpin connections"},
		{Name: mapNoEndpointServices, Type: svcMap, Map: true, Comment: "vmap to drop or reject packets to services with no endpoints"},
		{Name: mapNoEndpointNodePort, Type: portMap, Map: true, Comment: "vmap to drop or reject packets to service nodeports with no endpoints"},
		{Name: mapFirewallIPs, Type: svcMap, Map: true, Comment: "destinations that are subject to LoadBalancerSourceRanges"},
		{Name: mapServiceIPs, Type: svcMap, Map: true, Comment: "ClusterIP, ExternalIP and LoadBalancer IP traffic"},
		{Name: mapServiceNodePorts, Type: portMap, Map: true, Comment: "NodePort traffic"},
	}
	if r.fam.NodePortsRestricted {
		s := Set{Name: setNodePortIPs, Type: ft.addrType, Comment: "IPs that accept NodePort traffic"}
		for _, a := range r.fam.NodePortAddrs {
			if a.Is6() == ft.v6 && !a.IsLoopback() {
				s.Elements = append(s.Elements, Element{Key: a.String()})
			}
		}
		sets = append(sets, s)
	}
	return chains, sets
}

// serviceCIDRs returns the snapshot's service CIDRs of the family as
// kube-proxy joins them ("a,b"), or "".
func (r *renderer) serviceCIDRs() string {
	var b strings.Builder
	for _, p := range r.cidrs {
		if p.Addr().Is6() != r.ft.v6 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// localMatch returns the match of traffic from local pods (negated: not
// from them), or "" when the family detects none.
func (r *renderer) localMatch(negate bool) string {
	op := " "
	if negate {
		op = " != "
	}
	if p, ok := r.localCIDR(); ok {
		return r.ft.family + " saddr" + op + p.String()
	}
	if in := r.cfg.Local.Interface; in != "" {
		// xtables' "prefix+" is nft's "prefix*".
		if strings.HasSuffix(in, "+") {
			in = in[:len(in)-1] + "*"
		}
		return "iifname" + op + in
	}
	return ""
}

func (r *renderer) ifNotLocal() string { return r.localMatch(true) }
func (r *renderer) ifLocal() string    { return r.localMatch(false) }

// localCIDR returns the family's local pod prefix, if detection is by
// prefix.
func (r *renderer) localCIDR() (netip.Prefix, bool) {
	f := xtables.IPv4
	if r.ft.v6 {
		f = xtables.IPv6
	}
	return r.cfg.Local.Source(f)
}
