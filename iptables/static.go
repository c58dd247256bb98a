package iptables

import (
	"fmt"
	"net/netip"

	"github.com/proxysinks/proxysinks/host/xtables"
)

// jump is a rule in a built-in chain that sends traffic to one of ours, in
// canonical form (without "-A From ").
type jump struct {
	table, from, rule string
}

// jumps returns kube-proxy's jumps from the built-in chains, in its order.
// A missing jump is inserted at the top of its chain, so the last one ends
// up first, as with kube-proxy: its own, then those to the kubelet's
// KUBE-FIREWALL, which kube-proxy makes in both families whatever its
// settings.
func jumps() []jump {
	ext := "kubernetes externally-visible service portals"
	portals := "kubernetes service portals"
	fw := "kubernetes load balancer firewall"
	js := []jump{
		{"filter", "INPUT", "-m conntrack --ctstate NEW -m comment --comment \"" + ext + "\" -j " + chainExternalServices},
		{"filter", "FORWARD", "-m conntrack --ctstate NEW -m comment --comment \"" + ext + "\" -j " + chainExternalServices},
		{"filter", "INPUT", "-m comment --comment \"kubernetes health check service ports\" -j " + chainNodePorts},
		{"filter", "FORWARD", "-m conntrack --ctstate NEW -m comment --comment \"" + portals + "\" -j " + chainServices},
		{"filter", "OUTPUT", "-m conntrack --ctstate NEW -m comment --comment \"" + portals + "\" -j " + chainServices},
		{"filter", "FORWARD", "-m comment --comment \"kubernetes forwarding rules\" -j " + chainForward},
		{"filter", "INPUT", "-m conntrack --ctstate NEW -m comment --comment \"" + fw + "\" -j " + chainProxyFirewall},
		{"filter", "OUTPUT", "-m conntrack --ctstate NEW -m comment --comment \"" + fw + "\" -j " + chainProxyFirewall},
		{"filter", "FORWARD", "-m conntrack --ctstate NEW -m comment --comment \"" + fw + "\" -j " + chainProxyFirewall},
		{"nat", "OUTPUT", "-m comment --comment \"" + portals + "\" -j " + chainServices},
		{"nat", "PREROUTING", "-m comment --comment \"" + portals + "\" -j " + chainServices},
		{"nat", "POSTROUTING", "-m comment --comment \"kubernetes postrouting rules\" -j " + chainPostrouting},
		{"filter", "INPUT", "-j " + chainKubeletFirewall},
		{"filter", "OUTPUT", "-j " + chainKubeletFirewall},
	}
	return js
}

// staticChain is a top-level chain with its service-independent rules.
// Service rules come before the static ones (KUBE-SERVICES' node-port rule
// must be last).
type staticChain struct {
	table, chain string
	rules        []string // full lines, "-A chain ..."
	slot         int      // the services' slot, or -1
	// shared marks a chain the kubelet fills too (KUBE-FIREWALL without
	// localhost node ports): created when missing, never rewritten, as
	// kube-proxy's iptables -N does.
	shared bool
}

// staticChains returns every top-level chain the Proxier owns for a family,
// table by table in restore order (filter, then nat), with the rules that
// do not depend on services.
func staticChains(c *Config, fc *famConfig) []staticChain {
	mark := fc.mark
	var nodePorts []string
	comment := "-m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\""
	restricted := false
	for _, p := range c.NodePortCIDRs {
		restricted = restricted || p.Addr().Is6() == (fc.fam == xtables.IPv6)
	}
	var ips []netip.Addr
	for _, a := range c.NodePortIPs {
		if restricted && a.Is6() == (fc.fam == xtables.IPv6) {
			ips = append(ips, a)
		}
	}
	if !restricted {
		dst := ""
		switch {
		case fc.fam == xtables.IPv6:
			dst = "! -d ::1 "
		case !c.LocalhostNodePorts:
			dst = "! -d 127.0.0.0/8 "
		}
		nodePorts = append(nodePorts, "-A "+chainServices+" "+dst+comment+" -m addrtype --dst-type LOCAL -j "+chainNodePorts)
	}
	for _, a := range ips {
		if a.IsLoopback() && (fc.fam == xtables.IPv6 || !c.LocalhostNodePorts) {
			continue
		}
		nodePorts = append(nodePorts, "-A "+chainServices+" -d "+a.String()+" "+comment+" -j "+chainNodePorts)
	}
	var forward []string
	if !c.TCPBeLiberal {
		acct := ""
		if fc.acctInvalid {
			acct = nfacctMatch(AcctInvalidDropped)
		}
		forward = append(forward, "-A "+chainForward+" -m conntrack --ctstate INVALID"+acct+" -j DROP")
	}
	forward = append(forward,
		"-A "+chainForward+" -m comment --comment \"kubernetes forwarding rules\" -m mark --mark "+mark+"/"+mark+" -j ACCEPT",
		"-A "+chainForward+" -m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")
	masq := "-A " + chainPostrouting + " -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE"
	if !c.NoRandomFully {
		masq += " --random-fully"
	}
	out := []staticChain{
		{"filter", chainServices, nil, topFilterServices, false},
		{"filter", chainExternalServices, nil, topFilterExternal, false},
		{"filter", chainForward, forward, -1, false},
		{"filter", chainNodePorts, nil, topFilterNodePorts, false},
		{"filter", chainProxyFirewall, nil, topFilterFirewall, false},
		{"filter", chainCanary, nil, -1, false},
	}
	if c.LocalhostNodePorts && fc.fam == xtables.IPv4 {
		// route_localnet lets packets to 127.0.0.0/8 arrive from outside
		// (issue 90259); this rule, the kubelet's too, drops them unless
		// they were DNAT'd (to a node port's endpoint) or answer the node.
		out = append(out, staticChain{table: "filter", chain: chainKubeletFirewall, slot: -1, rules: []string{
			"-A " + chainKubeletFirewall + " ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment \"block incoming localnet connections\" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP"}})
	} else {
		out = append(out, staticChain{table: "filter", chain: chainKubeletFirewall, slot: -1, shared: true})
	}
	out = append(out,
		staticChain{"nat", chainServices, nodePorts, topNATServices, false},
		staticChain{"nat", chainNodePorts, nil, topNATNodePorts, false},
		staticChain{"nat", chainPostrouting, []string{
			"-A " + chainPostrouting + " -m mark ! --mark " + mark + "/" + mark + " -j RETURN",
			"-A " + chainPostrouting + " -j MARK --set-xmark " + mark + "/0x0",
			masq}, -1, false},
		staticChain{"nat", KubeMarkMasqChain, []string{"-A " + KubeMarkMasqChain + " -j MARK --set-xmark " + mark + "/" + mark}, -1, false},
		staticChain{"nat", chainCanary, nil, -1, false},
		staticChain{"mangle", chainCanary, nil, -1, false},
	)
	return out
}

// tables lists the tables in the order the Proxier writes them.
var tables = []string{"filter", "nat", "mangle"}

func hexMark(bit int) string { return fmt.Sprintf("0x%x", uint32(1)<<bit) }
