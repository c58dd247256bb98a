// Package rules holds the iptables rules of kube-proxy's IPVS mode, the
// constant set of chains and ipset matches that complete what IPVS does
// (masquerade, source-range firewalls, hairpin, filtering of unused service
// ports), and installs them with one iptables-restore --noflush.
//
// The number of rules does not depend on the number of services: services
// live in ipsets and IPVS. Rules are written in the form iptables-save prints
// them, so the installed state can be compared line by line and rewritten
// only when it differs. Only the chains named here and the jumps to them from
// the built-in chains are ever written; every other rule on the node is left
// alone. The iptables tools it drives (family, back end, runner) are
// host/xtables'.
package rules

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/proxysinks/proxysinks/host/xtables"
)

// maxSetName is the longest ipset name the kernel takes (IPSET_MAXNAMELEN
// minus the terminating NUL).
const maxSetName = 31

// SetName returns the name of a kube-proxy ipset in the family: the name
// itself for IPv4; for IPv6, KUBE- becomes KUBE-6- and the result is cut to
// 31 characters, as kube-proxy does (KUBE-6-LOAD-BALANCER-SOURCE-CID).
func SetName(f xtables.Family, name string) string {
	if f == xtables.IPv6 {
		name = "KUBE-6-" + strings.TrimPrefix(name, "KUBE-")
		if len(name) > maxSetName {
			name = name[:maxSetName]
		}
	}
	return name
}

// The kube-proxy ipsets the rules match (IPv4 names; see SetName).
const (
	SetLoopBack            = "KUBE-LOOP-BACK"
	SetClusterIP           = "KUBE-CLUSTER-IP"
	SetExternalIP          = "KUBE-EXTERNAL-IP"
	SetExternalIPLocal     = "KUBE-EXTERNAL-IP-LOCAL"
	SetLoadBalancer        = "KUBE-LOAD-BALANCER"
	SetLoadBalancerLocal   = "KUBE-LOAD-BALANCER-LOCAL"
	SetLoadBalancerFW      = "KUBE-LOAD-BALANCER-FW"
	SetLoadBalancerSrcIP   = "KUBE-LOAD-BALANCER-SOURCE-IP"
	SetLoadBalancerSrcNet  = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	SetNodePortTCP         = "KUBE-NODE-PORT-TCP"
	SetNodePortLocalTCP    = "KUBE-NODE-PORT-LOCAL-TCP"
	SetNodePortUDP         = "KUBE-NODE-PORT-UDP"
	SetNodePortLocalUDP    = "KUBE-NODE-PORT-LOCAL-UDP"
	SetNodePortSCTP        = "KUBE-NODE-PORT-SCTP-HASH"
	SetNodePortLocalSCTP   = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	SetHealthCheckNodePort = "KUBE-HEALTH-CHECK-NODE-PORT"
	SetIPVSIPs             = "KUBE-IPVS-IPS"
	// SetVirtualServers is not kube-proxy's and no rule matches it: it
	// records the virtual servers the sink created (protocol, address,
	// port), so that ownership is recorded, not inferred from where an
	// address happens to be (dataplane.NodeConfig.Owned).
	SetVirtualServers = "KUBE-PROXYSINKS-VS"
)

// The chains the rules own.
const (
	ChainServices             = "KUBE-SERVICES"
	ChainPostrouting          = "KUBE-POSTROUTING"
	ChainNodePort             = "KUBE-NODE-PORT"
	ChainLoadBalancer         = "KUBE-LOAD-BALANCER"
	ChainMarkMasq             = "KUBE-MARK-MASQ"
	ChainForward              = "KUBE-FORWARD"
	ChainProxyFirewall        = "KUBE-PROXY-FIREWALL"
	ChainSourceRangesFirewall = "KUBE-SOURCE-RANGES-FIREWALL"
	ChainIPVSFilter           = "KUBE-IPVS-FILTER"
	ChainIPVSOutFilter        = "KUBE-IPVS-OUT-FILTER"
)

// Config is what the rules depend on.
type Config struct {
	// MasqueradeBit is the fwmark bit that marks packets to masquerade
	// (kube-proxy's --iptables-masquerade-bit, default 14).
	MasqueradeBit int
	// MasqueradeAll masquerades all traffic to cluster IPs.
	MasqueradeAll bool
	// Local tells traffic from this node's pods (kube-proxy's
	// detectLocalMode): traffic to a cluster IP from elsewhere is
	// masqueraded. Without detection in a family, the node's own traffic
	// from a service address is.
	Local xtables.LocalTraffic
	// RandomFully adds --random-fully to MASQUERADE (iptables >= 1.6.2).
	RandomFully bool
}

// Validate reports a configuration the rules cannot express.
func (c Config) Validate() error {
	if c.MasqueradeBit < 0 || c.MasqueradeBit > 31 {
		return fmt.Errorf("rules: masquerade bit %d out of range [0, 31]", c.MasqueradeBit)
	}
	return nil
}

// Rule is one rule: "-A Chain Args..." in table Table.
type Rule struct {
	Table string
	Chain string
	Args  []string
}

// String returns the rule as iptables-save prints it.
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString("-A ")
	b.WriteString(r.Chain)
	for _, a := range r.Args {
		b.WriteByte(' ')
		if a == "" || strings.ContainsAny(a, " \t\"") {
			b.WriteString(`"` + strings.ReplaceAll(a, `"`, `\"`) + `"`)
		} else {
			b.WriteString(a)
		}
	}
	return b.String()
}

// Jump is a rule in a built-in chain that sends traffic to one of ours. It is
// inserted at the top of the built-in chain when missing, never rewritten.
type Jump struct {
	Table   string
	From    string // the built-in chain
	Comment string
	To      string
}

// Rule returns the jump as a rule.
func (j Jump) Rule() Rule {
	return Rule{Table: j.Table, Chain: j.From, Args: []string{"-m", "comment", "--comment", j.Comment, "-j", j.To}}
}

// Ruleset is everything the rules install for one family.
type Ruleset struct {
	Family xtables.Family
	// Chains maps each table to the chains it owns, in order.
	Chains map[string][]string
	// Rules are the rules of the owned chains, in order.
	Rules []Rule
	// Jumps are the rules in built-in chains.
	Jumps []Jump
}

func hexMark(bit int) string { return fmt.Sprintf("0x%x", uint32(1)<<bit) }

// builder appends the rules of one family's ruleset in order.
type builder struct {
	rs   *Ruleset
	mark string // the masquerade mark, as "0x4000"
}

func (b builder) nat(chain string, args ...string) {
	b.rs.Rules = append(b.rs.Rules, Rule{Table: "nat", Chain: chain, Args: args})
}

func (b builder) filter(chain string, args ...string) {
	b.rs.Rules = append(b.rs.Rules, Rule{Table: "filter", Chain: chain, Args: args})
}

// matchSet matches the family's ipset of a kube-proxy set name.
func (b builder) matchSet(name, dirs string) []string {
	return []string{"-m", "set", "--match-set", SetName(b.rs.Family, name), dirs}
}

func comment(c string) []string { return []string{"-m", "comment", "--comment", c} }

func jump(to string) []string { return []string{"-j", to} }

func cat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Build returns the rules of kube-proxy's IPVS mode for one family.
func Build(cfg Config, fam xtables.Family) Ruleset {
	rs := Ruleset{
		Family: fam,
		Chains: map[string][]string{
			"nat":    {ChainServices, ChainPostrouting, ChainNodePort, ChainLoadBalancer, ChainMarkMasq},
			"filter": {ChainForward, ChainNodePort, ChainProxyFirewall, ChainSourceRangesFirewall, ChainIPVSFilter, ChainIPVSOutFilter},
		},
		Jumps: []Jump{
			{"nat", "PREROUTING", "kubernetes service portals", ChainServices},
			{"nat", "OUTPUT", "kubernetes service portals", ChainServices},
			{"nat", "POSTROUTING", "kubernetes postrouting rules", ChainPostrouting},
			{"filter", "INPUT", "kubernetes ipvs access filter", ChainIPVSFilter},
			{"filter", "INPUT", "kube-proxy firewall rules", ChainProxyFirewall},
			{"filter", "INPUT", "kubernetes health check rules", ChainNodePort},
			{"filter", "FORWARD", "kube-proxy firewall rules", ChainProxyFirewall},
			{"filter", "FORWARD", "kubernetes forwarding rules", ChainForward},
			{"filter", "OUTPUT", "kubernetes ipvs access filter", ChainIPVSOutFilter},
		},
	}
	b := builder{rs: &rs, mark: hexMark(cfg.MasqueradeBit)}
	b.natRules(cfg)
	b.filterRules()
	// KUBE-IPVS-OUT-FILTER holds the per-service drops of OutFilter.
	return rs
}

// natRules appends the nat table's rules.
func (b builder) natRules(cfg Config) {
	mark := b.mark
	// nat KUBE-POSTROUTING: hairpin, then masquerade what is marked.
	b.nat(ChainPostrouting, cat(comment("Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"), b.matchSet(SetLoopBack, "dst,dst,src"), jump("MASQUERADE"))...)
	b.nat(ChainPostrouting, "-m", "mark", "!", "--mark", mark+"/"+mark, "-j", "RETURN")
	b.nat(ChainPostrouting, "-j", "MARK", "--set-xmark", mark+"/0x0")
	masq := cat(comment("kubernetes service traffic requiring SNAT"), jump("MASQUERADE"))
	if cfg.RandomFully {
		masq = append(masq, "--random-fully")
	}
	b.nat(ChainPostrouting, masq...)

	// nat KUBE-MARK-MASQ.
	b.nat(ChainMarkMasq, "-j", "MARK", "--set-xmark", mark+"/"+mark)

	b.servicesRules(cfg)

	// nat KUBE-LOAD-BALANCER: eTP=Local keeps the client address.
	b.nat(ChainLoadBalancer, cat(comment("Kubernetes service load balancer ip + port with externalTrafficPolicy=local"), b.matchSet(SetLoadBalancerLocal, "dst,dst"), jump("RETURN"))...)
	b.nat(ChainLoadBalancer, "-j", ChainMarkMasq)

	// nat KUBE-NODE-PORT: eTP=Local node ports return, the others masquerade.
	for _, p := range []struct{ proto, local, all, dirs string }{
		{"tcp", SetNodePortLocalTCP, SetNodePortTCP, "dst"},
		{"udp", SetNodePortLocalUDP, SetNodePortUDP, "dst"},
		{"sctp", SetNodePortLocalSCTP, SetNodePortSCTP, "dst,dst"},
	} {
		b.nat(ChainNodePort, cat([]string{"-p", p.proto}, comment("Kubernetes nodeport "+strings.ToUpper(p.proto)+" port with externalTrafficPolicy=local"), b.matchSet(p.local, p.dirs), jump("RETURN"))...)
		b.nat(ChainNodePort, cat([]string{"-p", p.proto}, comment("Kubernetes nodeport "+strings.ToUpper(p.proto)+" port for masquerade purpose"), b.matchSet(p.all, p.dirs), jump(ChainMarkMasq))...)
	}
}

// servicesRules appends nat KUBE-SERVICES.
func (b builder) servicesRules(cfg Config) {
	// The node's connections from loopback return at once, as in
	// kube-proxy.
	lo := "127.0.0.0/8"
	if b.rs.Family == xtables.IPv6 {
		lo = "::1/128"
	}
	b.nat(ChainServices, "-s", lo, "-j", "RETURN")
	b.nat(ChainServices, cat(comment("Kubernetes service lb portal"), b.matchSet(SetLoadBalancer, "dst,dst"), jump(ChainLoadBalancer))...)
	clusterIPMasq := comment("Kubernetes service cluster ip + port for masquerade purpose")
	switch {
	case cfg.MasqueradeAll:
		b.nat(ChainServices, cat(clusterIPMasq, b.matchSet(SetClusterIP, "dst,dst"), jump(ChainMarkMasq))...)
	case cfg.Local.Detects(b.rs.Family):
		b.nat(ChainServices, cat(notLocal(cfg.Local, b.rs.Family), clusterIPMasq, b.matchSet(SetClusterIP, "dst,dst"), jump(ChainMarkMasq))...)
	default:
		// Without the pod networks, masquerade at least the node's own
		// traffic to a service it is an endpoint of.
		b.nat(ChainServices, cat(clusterIPMasq, b.matchSet(SetClusterIP, "src,dst"), jump(ChainMarkMasq))...)
	}
	b.nat(ChainServices, cat(comment("Kubernetes service external ip + port for masquerade and filter purpose"), b.matchSet(SetExternalIP, "dst,dst"), jump(ChainMarkMasq))...)
	b.nat(ChainServices, cat(comment("Kubernetes service external ip + port for masquerade and filter purpose"), b.matchSet(SetExternalIP, "dst,dst"), []string{"-m", "physdev", "!", "--physdev-is-in", "-m", "addrtype", "!", "--src-type", "LOCAL"}, jump("ACCEPT"))...)
	b.nat(ChainServices, cat(comment("Kubernetes service external ip + port for masquerade and filter purpose"), b.matchSet(SetExternalIP, "dst,dst"), []string{"-m", "addrtype", "--dst-type", "LOCAL"}, jump("ACCEPT"))...)
	b.nat(ChainServices, cat(comment("Kubernetes service external ip + port with externalTrafficPolicy=local"), b.matchSet(SetExternalIPLocal, "dst,dst"), []string{"-m", "physdev", "!", "--physdev-is-in", "-m", "addrtype", "!", "--src-type", "LOCAL"}, jump("ACCEPT"))...)
	b.nat(ChainServices, cat(comment("Kubernetes service external ip + port with externalTrafficPolicy=local"), b.matchSet(SetExternalIPLocal, "dst,dst"), []string{"-m", "addrtype", "--dst-type", "LOCAL"}, jump("ACCEPT"))...)
	b.nat(ChainServices, "-m", "addrtype", "--dst-type", "LOCAL", "-j", ChainNodePort)
	b.nat(ChainServices, cat(b.matchSet(SetClusterIP, "dst,dst"), jump("ACCEPT"))...)
	b.nat(ChainServices, cat(b.matchSet(SetLoadBalancer, "dst,dst"), jump("ACCEPT"))...)
}

// filterRules appends the filter table's rules.
func (b builder) filterRules() {
	mark := b.mark
	// filter KUBE-FORWARD.
	b.filter(ChainForward, cat(comment("kubernetes forwarding rules"), []string{"-m", "mark", "--mark", mark + "/" + mark}, jump("ACCEPT"))...)
	b.filter(ChainForward, cat(comment("kubernetes forwarding conntrack rule"), []string{"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED"}, jump("ACCEPT"))...)

	// filter KUBE-NODE-PORT: health-check node ports are accepted.
	b.filter(ChainNodePort, cat(comment("Kubernetes health check node port"), b.matchSet(SetHealthCheckNodePort, "dst"), jump("ACCEPT"))...)

	// filter KUBE-PROXY-FIREWALL and KUBE-SOURCE-RANGES-FIREWALL.
	b.filter(ChainProxyFirewall, cat(comment("Kubernetes service load balancer with source ranges"), b.matchSet(SetLoadBalancerFW, "dst,dst"), jump(ChainSourceRangesFirewall))...)
	b.filter(ChainSourceRangesFirewall, cat(comment("Kubernetes service load balancer allowed source CIDR"), b.matchSet(SetLoadBalancerSrcNet, "dst,dst,src"), jump("RETURN"))...)
	b.filter(ChainSourceRangesFirewall, cat(comment("Kubernetes service load balancer allowed source IP"), b.matchSet(SetLoadBalancerSrcIP, "dst,dst,src"), jump("RETURN"))...)
	b.filter(ChainSourceRangesFirewall, "-j", "DROP")

	// filter KUBE-IPVS-FILTER: new connections to a bound address on a port
	// no service uses are rejected.
	for _, s := range []string{SetLoadBalancer, SetClusterIP, SetExternalIP, SetExternalIPLocal} {
		b.filter(ChainIPVSFilter, cat(b.matchSet(s, "dst,dst"), jump("RETURN"))...)
	}
	b.filter(ChainIPVSFilter, cat(b.matchSet(SetHealthCheckNodePort, "dst"), jump("RETURN"))...)
	b.filter(ChainIPVSFilter, cat([]string{"-m", "conntrack", "--ctstate", "NEW"}, b.matchSet(SetIPVSIPs, "dst"), jump("REJECT"), []string{"--reject-with", rejectWith(b.rs.Family)})...)
}

// OutFilterDrop is a load-balancer virtual server (an ingress IP with
// source ranges, none of which holds this node) that the node itself must
// not reach: with IPVS the node's packets to it carry the ingress IP as
// their source, which the source-range firewall cannot tell from allowed
// traffic (kubernetes issue 119656).
type OutFilterDrop struct {
	Addr netip.Addr
	// Protocol is the IP protocol number (6, 17, 132).
	Protocol uint8
	Port     uint16
}

// OutFilterDrops returns the drops that follow from a family's
// KUBE-LOAD-BALANCER-FW and KUBE-LOAD-BALANCER-SOURCE-IP members, as
// kube-proxy decides them: every firewalled ingress virtual server (fw)
// without its node-access member (ingress IP, protocol, port, ingress IP)
// in allowed. The result is sorted and free of repeats.
func OutFilterDrops(fw, allowed []OutFilterDrop) []OutFilterDrop {
	var out []OutFilterDrop
	for _, d := range fw {
		if !slices.Contains(allowed, d) && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b OutFilterDrop) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		if a.Protocol != b.Protocol {
			return int(a.Protocol) - int(b.Protocol)
		}
		return int(a.Port) - int(b.Port)
	})
	return out
}

// WithOutFilter returns the ruleset with KUBE-IPVS-OUT-FILTER dropping
// what the node sends from each drop's address to its virtual server
// (kube-proxy's rule, as iptables-save prints it; the ipvs match needs
// the xt_ipvs module, used only when there is a drop). Drops of the other
// family are skipped.
func (rs Ruleset) WithOutFilter(drops []OutFilterDrop) Ruleset {
	out := rs
	out.Rules = slices.Clone(rs.Rules)
	for _, d := range drops {
		if d.Addr.Is4() != (rs.Family == xtables.IPv4) {
			continue
		}
		out.Rules = append(out.Rules, Rule{Table: "filter", Chain: ChainIPVSOutFilter, Args: []string{
			"-s", netip.PrefixFrom(d.Addr, d.Addr.BitLen()).String(),
			"-m", "ipvs", "--vproto", strconv.Itoa(int(d.Protocol)), "--vaddr", d.Addr.String(), "--vport", strconv.Itoa(int(d.Port)),
			"-j", "DROP"}})
	}
	return out
}

func rejectWith(f xtables.Family) string {
	if f == xtables.IPv6 {
		return "icmp6-port-unreachable"
	}
	return "icmp-port-unreachable"
}

// notLocal matches traffic that is not from this node's pods in the
// family, as iptables-save prints it ("! -s <cidr>" or "! -i <name>").
func notLocal(l xtables.LocalTraffic, f xtables.Family) []string {
	if p, ok := l.Source(f); ok {
		return []string{"!", "-s", p.String()}
	}
	return []string{"!", "-i", l.Interface}
}

// Sets returns the names of the ipsets the rules match, for the family.
func Sets(f xtables.Family) []string {
	names := []string{SetLoopBack, SetClusterIP, SetExternalIP, SetExternalIPLocal, SetLoadBalancer, SetLoadBalancerLocal,
		SetLoadBalancerFW, SetLoadBalancerSrcIP, SetLoadBalancerSrcNet, SetNodePortTCP, SetNodePortLocalTCP,
		SetNodePortUDP, SetNodePortLocalUDP, SetNodePortSCTP, SetNodePortLocalSCTP, SetHealthCheckNodePort, SetIPVSIPs, SetVirtualServers}
	for i, n := range names {
		names[i] = SetName(f, n)
	}
	return names
}

// SetType returns the ipset type of a kube-proxy set (IPv4 or IPv6 name).
func SetType(name string) string {
	for _, n := range Sets(xtables.IPv4) {
		if SetName(xtables.IPv6, n) == name {
			name = n
		}
	}
	switch name {
	case SetLoopBack, SetLoadBalancerSrcIP:
		return "hash:ip,port,ip"
	case SetLoadBalancerSrcNet:
		return "hash:ip,port,net"
	case SetNodePortTCP, SetNodePortLocalTCP, SetNodePortUDP, SetNodePortLocalUDP, SetHealthCheckNodePort:
		return "bitmap:port"
	case SetIPVSIPs:
		return "hash:ip"
	default:
		return "hash:ip,port"
	}
}
