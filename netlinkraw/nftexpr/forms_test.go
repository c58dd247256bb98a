package nftexpr

import (
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// kubeSets are the sets and maps of kube-proxy's table (v1.37.2) in a
// family, plus a session affinity set.
func kubeSets(family nft.Family) []SetDef {
	addr := "ipv4_addr"
	if family == nft.FamilyIPv6 {
		addr = "ipv6_addr"
	}
	return []SetDef{
		{Name: "cluster-ips", Type: addr, Comment: "Active ClusterIPs"},
		{Name: "nodeport-ips", Type: addr, Comment: "IPs that accept NodePort traffic"},
		{Name: "hairpin-connections", Type: addr + " . " + addr + " . inet_proto . inet_service", Comment: "service hairpin connections"},
		{Name: "no-endpoint-services", Type: addr + " . inet_proto . inet_service : verdict", Comment: "vmap to drop or reject packets to services with no endpoints"},
		{Name: "no-endpoint-nodeports", Type: "inet_proto . inet_service : verdict", Comment: "vmap to drop or reject packets to service nodeports with no endpoints"},
		{Name: "localhost-nodeport-reject-ports", Type: "inet_proto . inet_service : verdict", Comment: "localhost NodePorts rejected by kube-proxy"},
		{Name: "firewall-ips", Type: addr + " . inet_proto . inet_service : verdict", Comment: "destinations that are subject to LoadBalancerSourceRanges"},
		{Name: "service-ips", Type: addr + " . inet_proto . inet_service : verdict", Comment: "ClusterIP, ExternalIP and LoadBalancer IP traffic"},
		{Name: "service-nodeports", Type: "inet_proto . inet_service : verdict", Comment: "NodePort traffic"},
		{Name: "affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80", Type: addr, Flags: []string{"dynamic", "timeout"}, Timeout: 10800 * time.Second},
		{Name: "firewall-allow", Type: addr + " . inet_proto . inet_service . " + addr, Flags: []string{"interval"}, Comment: "destinations+sources that are allowed by LoadBalancerSourceRanges"},
		{Name: "local-cidrs", Type: addr, Flags: []string{"interval"}},
		{Name: "marks", Type: "mark : verdict", Flags: []string{"constant"}},
		{Name: "sticky", Type: addr + " . inet_service", Timeout: 90 * time.Second, Comment: "timeout without flags"},
	}
}

// kubeChains are kube-proxy's base chains and a few regular ones.
func kubeChains() []chainDef {
	return []chainDef{
		{name: "filter-prerouting-pre-dnat", typ: "filter", hook: "prerouting", prio: "dstnat-10"},
		{name: "filter-output-pre-dnat", typ: "filter", hook: "output", prio: "dstnat - 10"},
		{name: "filter-input", typ: "filter", hook: "input", prio: "filter"},
		{name: "filter-forward", typ: "filter", hook: "forward", prio: "filter"},
		{name: "filter-output", typ: "filter", hook: "output", prio: "0"},
		{name: "nat-prerouting", typ: "nat", hook: "prerouting", prio: "dstnat"},
		{name: "nat-output", typ: "nat", hook: "output", prio: "-100"},
		{name: "nat-postrouting", typ: "nat", hook: "postrouting", prio: "srcnat"},
		{name: "reject-chain", comment: "helper for @no-endpoint-services / @no-endpoint-nodeports"},
		{name: "c"},
		{name: "services"},
		{name: "service-ULMVA6XW-ns1/svc1/tcp/p80"},
		{name: "endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80"},
		{name: "endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"},
	}
}

// The rule forms kube-proxy v1.37.2's nftables mode writes (proxier.go,
// setupNFTables and syncProxyRules; proxier_test.go), with the local
// traffic detectors' variants, plus neighbours of each (other prefix
// lengths, protocols, set shapes).
var ipForms = []ruleDef{
	{text: "ct state new jump services"},
	{text: "jump services"},
	{text: "goto service-ULMVA6XW-ns1/svc1/tcp/p80"},
	{text: "reject"},
	{text: "drop"},
	{text: "return"},
	{text: "accept"},
	{text: "counter"},
	{text: "counter drop"},
	{text: `counter name "localhost-nodeport-rejected-tcp" reject`},
	{text: "mark and 0x4000 != 0 mark set mark xor 0x4000 masquerade fully-random"},
	{text: "ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random"},
	{text: "masquerade"},
	{text: "ip daddr @cluster-ips reject", comment: "Reject traffic to invalid ports of ClusterIPs"},
	{text: "ip daddr { 172.30.0.0/16 } drop", comment: "Drop traffic to unallocated ClusterIPs"},
	{text: "ip daddr { 10.96.0.0/16,10.97.0.0/16 } drop", comment: "Drop traffic to unallocated ClusterIPs"},
	{text: "ip daddr { 10.96.0.0/12,10.100.0.0/16,192.168.0.0/24 } drop"},
	{text: "ip daddr { 0.0.0.0/8, 10.0.0.0/8 } drop"},
	{text: "ip daddr { 10.0.0.0/8, 128.0.0.0/1 } drop"},
	{text: "ip daddr . meta l4proto . th dport vmap @no-endpoint-services"},
	{text: "ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports"},
	{text: "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports"},
	{text: "ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports"},
	{text: "ip daddr 127.0.0.0/8 meta l4proto . th dport vmap @localhost-nodeport-reject-ports"},
	{text: "ip daddr . meta l4proto . th dport vmap @firewall-ips"},
	{text: "ip daddr . meta l4proto . th dport vmap @service-ips"},
	{text: "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports"},
	{text: "ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports"},
	{text: "ip daddr @cluster-ips mark set mark or 0x4000", comment: "masquerade all clusterIP traffic"},
	{text: "ip daddr @cluster-ips ip saddr != 10.0.0.0/8 mark set mark or 0x4000", comment: "masquerade clusterIP traffic from outside cluster"},
	{text: "ip daddr @cluster-ips iifname != cni0 mark set mark or 0x4000"},
	{text: `ip daddr @cluster-ips iifname != "veth*" mark set mark or 0x4000`},
	{text: "mark set mark or 0x4000", comment: "masquerade"},
	{text: "mark set 0x10"},
	{text: "meta mark set mark or 0x4000"},
	{text: "ip saddr 10.0.0.0/8 goto service-ULMVA6XW-ns1/svc1/tcp/p80", comment: "short-circuit pod traffic"},
	{text: "ip saddr 10.0.0.0/12 goto service-ULMVA6XW-ns1/svc1/tcp/p80"},
	{text: "ip saddr 10.128.0.0/9 goto c"},
	{text: "iifname cni0 goto service-ULMVA6XW-ns1/svc1/tcp/p80", comment: "short-circuit pod traffic"},
	{text: `iifname "veth*" goto service-ULMVA6XW-ns1/svc1/tcp/p80`},
	{text: "iifname veth* goto service-ULMVA6XW-ns1/svc1/tcp/p80", comment: "short-circuit pod traffic"},
	{text: "ip daddr @cluster-ips iifname != veth* mark set mark or 0x00004000", comment: "masquerade clusterIP traffic from outside cluster"},
	{text: "ip daddr @cluster-ips iifname != eth0.100 mark set mark or 0x00004000"},
	{text: "fib saddr type local mark set mark or 0x4000", comment: "masquerade local traffic"},
	{text: "fib saddr type local goto service-ULMVA6XW-ns1/svc1/tcp/p80", comment: "short-circuit local traffic"},
	{text: "ip saddr != { 203.0.113.0/25 } drop"},
	{text: "ip saddr != { 203.0.113.0/25 , 198.51.100.0/24 , 5.6.7.8 } drop"},
	{text: "ip saddr != { 1.2.3.4 , 5.6.7.8 } drop"},
	{text: "ip saddr { 5.6.7.8 , 1.2.3.4 , 1.2.3.5 } drop"},
	{text: "ip saddr { 1.2.3.4 , 1.2.3.4 } drop"},
	{text: "ip saddr { 10.0.0.0/8 } drop"},
	{text: "ip saddr != { 1.2.3.4/32 } drop"},
	{text: "ip saddr != { 1.2.3.4/32 , 5.6.7.8/32 } drop"},
	{text: "ip saddr != { 1.2.3.4/32 , 1.2.3.5 , 10.0.0.0/8 , 10.0.0.0/16 , 10.1.0.0/16 , 255.255.255.255 } drop"},
	{text: "ip saddr != { 0.0.0.0/0 } drop"},
	{text: "ip saddr 0.0.0.0/0 drop"},
	{text: "ip saddr 1.2.3.4/32 drop"},
	{text: "ip saddr @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80"},
	{text: "numgen random mod 1 vmap { 0 : goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 }"},
	{text: "numgen random mod 2 vmap { 0 : goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 , 1 : goto endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 }"},
	{text: "update @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 { ip saddr }"},
	{text: "meta l4proto tcp dnat to 10.180.0.3:80"},
	{text: "meta l4proto udp dnat to 10.180.0.3:53"},
	{text: "meta l4proto sctp dnat to 10.180.0.3:3868"},
	{text: "meta l4proto tcp dnat to 10.180.0.3"},
	{text: "meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.3.2 . 80 , 1 : 10.0.3.3 . 80 }"},
	{text: "meta l4proto udp dnat ip addr . port to numgen random mod 3 map { 0 : 10.0.3.2 . 53 , 1 : 10.0.3.3 . 53 , 2 : 10.0.3.4 . 5353 }"},
	{text: "ip daddr 172.30.0.41 tcp dport 80 ip saddr != 10.0.0.0/8 mark set mark or 0x4000"},
	{text: "ip saddr 10.180.0.1 mark set mark or 0x4000"},
	{text: "th dport 53 accept"},
	{text: "ct original ip daddr 10.96.0.1 accept"},
	{text: "ct original ip daddr 10.0.0.0/8 accept"},
	{text: "ct original ip daddr != 10.0.0.0/9 accept"},
	{text: "ct reply ip saddr @cluster-ips accept"},
	{text: "ct state established,related accept"},
}

var ip6Forms = []ruleDef{
	{text: "reject"},
	{text: "ct state new jump services"},
	{text: "ip6 daddr @cluster-ips reject", comment: "Reject traffic to invalid ports of ClusterIPs"},
	{text: "ip6 daddr { fd00:10:96::/112 } drop", comment: "Drop traffic to unallocated ClusterIPs"},
	{text: "ip6 daddr { fd00:10:96::/112,fd00:10:97::/112 } drop"},
	{text: "ip6 saddr != { 2001:db8:203::/64 , 2001:db8::1 } drop"},
	{text: "ip6 saddr != { 2001:db8:203::/64 } drop"},
	{text: "ip6 saddr { ::1 , fd00::2 } drop"},
	{text: "ip6 saddr { ff00::/8 , fd00::/8 } drop"},
	{text: "ip6 saddr != { 2001:db8::1/128 , 2001:db8::2/128 } drop"},
	{text: "ip6 saddr != { ::/0 , 2001:db8::1 } drop"},
	{text: "ip6 daddr != ::1 meta l4proto . th dport vmap @no-endpoint-nodeports"},
	{text: "ip6 daddr ::1 meta l4proto . th dport vmap @localhost-nodeport-reject-ports"},
	{text: "fib daddr type local ip6 daddr != ::1 meta l4proto . th dport vmap @service-nodeports"},
	{text: "ip6 daddr . meta l4proto . th dport vmap @service-ips"},
	{text: "ip6 daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports"},
	{text: "ct status dnat ip6 saddr . ip6 daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random"},
	{text: "mark and 0x4000 != 0 mark set mark xor 0x4000 masquerade fully-random"},
	{text: "ip6 daddr @cluster-ips ip6 saddr != fd00:10::/64 mark set mark or 0x4000", comment: "masquerade clusterIP traffic from outside cluster"},
	{text: "ip6 saddr fd00:10::/64 goto service-ULMVA6XW-ns1/svc1/tcp/p80", comment: "short-circuit pod traffic"},
	{text: "ip6 saddr fd00:10::/57 goto c"},
	{text: "ip6 saddr fd00:10:180::1 mark set mark or 0x4000"},
	{text: "ip6 daddr fd00:172:30::41 tcp dport 80 ip6 saddr != fd00:10::/64 mark set mark or 0x4000"},
	{text: "ip6 saddr @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80"},
	{text: "update @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 { ip6 saddr }"},
	{text: "numgen random mod 2 vmap { 0 : goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 , 1 : goto c }"},
	{text: "meta l4proto tcp dnat to [fd00:10:180::1]:80"},
	{text: "ct original ip6 daddr fd00::/64 accept"},
	{text: "ct reply ip6 saddr fd00::1 accept"},
	{text: "meta l4proto tcp dnat to fd00:10:180::1"},
	{text: "meta l4proto tcp dnat ip6 addr . port to numgen random mod 2 map { 0 : fd00:10:180::4 . 80 , 1 : fd00:10:180::5 . 80 }"},
}

func TestFormsAgainstNFT(t *testing.T) {
	for _, tc := range []struct {
		name   string
		family nft.Family
		forms  []ruleDef
		elems  []elemDef
	}{
		{"ip", nft.FamilyIPv4, ipForms, []elemDef{
			{"cluster-ips", "172.30.0.41", "", ""},
			{"nodeport-ips", "192.168.0.2", "", ""},
			{"hairpin-connections", "10.0.1.1 . 10.0.1.1 . tcp . 80", "", ""},
			{"service-ips", "172.30.0.41 . tcp . 80", "goto service-ULMVA6XW-ns1/svc1/tcp/p80", ""},
			{"service-ips", "1.2.3.4 . udp . 53", "goto c", ""},
			{"service-ips", "1.2.3.5 . sctp . 3868", "jump c", ""},
			{"service-nodeports", "tcp . 3001", "goto c", ""},
			{"no-endpoint-services", "172.30.0.46 . tcp . 80", "goto reject-chain", "ns6/svc6:p80"},
			{"no-endpoint-services", "1.2.3.4 . tcp . 80", "drop", "ns2/svc2:p80"},
			{"no-endpoint-nodeports", "tcp . 3001", "drop", "ns2/svc2:p80"},
			{"firewall-ips", "5.6.7.8 . tcp . 80", "goto c", ""},
			{"localhost-nodeport-reject-ports", "udp . 30053", "goto c", ""},
		}},
		{"ip6", nft.FamilyIPv6, ip6Forms, []elemDef{
			{"cluster-ips", "fd00:172:30::41", "", ""},
			{"hairpin-connections", "fd00:10:180::1 . fd00:10:180::1 . tcp . 80", "", ""},
			{"service-ips", "fd00:172:30::41 . tcp . 80", "goto service-ULMVA6XW-ns1/svc1/tcp/p80", ""},
			{"no-endpoint-services", "fd00:172:30::46 . udp . 53", "goto reject-chain", "ns6/svc6:dns"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &scriptTable{family: tc.family, name: "kube-proxy", chains: kubeChains(), sets: kubeSets(tc.family),
				counters: []string{"localhost-nodeport-rejected-tcp"}, elems: tc.elems}
			for _, r := range tc.forms {
				r.chain = "c"
				st.rules = append(st.rules, r)
			}
			checkOracle(t, st)
		})
	}
}

func TestKubeProxyShapedScriptAgainstNFT(t *testing.T) {
	for _, tc := range []struct {
		name   string
		family nft.Family
		eps    int
	}{{"ip", nft.FamilyIPv4, 3}, {"ip-one-endpoint", nft.FamilyIPv4, 1}, {"ip6", nft.FamilyIPv6, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			checkOracle(t, kubeShaped(tc.family, 12, tc.eps))
		})
	}
}
