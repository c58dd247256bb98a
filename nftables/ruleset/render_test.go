package ruleset

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// manifest loads YAML documents (joined with ---) as node-1's snapshot.
func manifest(t testing.TB, docs ...string) *client.Snapshot {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(strings.Join(docs, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return load(t, dir, "node-1")
}

// service returns a Service manifest: spec lines (indented by the
// caller's two spaces) under the namespace "ns" and the name.
func service(name, spec string) string {
	return "apiVersion: v1\nkind: Service\nmetadata: {name: " + name + ", namespace: ns}\nspec:\n" + spec
}

// slice returns an EndpointSlice of the service with one port named p
// (TCP 8080 unless port says otherwise) and the endpoints' YAML.
func slice(svc, family, port, endpoints string) string {
	if port == "" {
		port = "{name: p, port: 8080, protocol: TCP}"
	}
	return "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: " + svc + "-" + strings.ToLower(family) +
		"\n  namespace: ns\n  labels: {kubernetes.io/service-name: " + svc + "}\naddressType: " + family + "\nports: [" + port + "]\nendpoints:\n" + endpoints
}

// ep is an endpoint's YAML: address, node, conditions.
func ep(addr, node, conditions string) string {
	return "- addresses: [\"" + addr + "\"]\n  nodeName: " + node + "\n  conditions: {" + conditions + "}\n"
}

func chainRules(rs *Ruleset, name string) []Rule {
	for _, c := range rs.Chains {
		if c.Name == name {
			return c.Rules
		}
	}
	return nil
}

func hasChain(rs *Ruleset, name string) bool {
	for _, c := range rs.Chains {
		if c.Name == name {
			return true
		}
	}
	return false
}

func setOf(rs *Ruleset, name string) *Set {
	for i := range rs.Sets {
		if rs.Sets[i].Name == name {
			return &rs.Sets[i]
		}
	}
	return nil
}

func elements(rs *Ruleset, name string) []Element {
	if s := setOf(rs, name); s != nil {
		return s.Elements
	}
	return nil
}

const clusterIPSpec = "  clusterIP: 10.96.0.1\n  clusterIPs: [10.96.0.1]\n  ports: [{name: p, port: 80, protocol: TCP}]\n"

// TestRenderCases: what users would notice, one behaviour a case.
func TestRenderCases(t *testing.T) {
	pods := xtables.LocalTraffic{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/56")}}
	svcChain := "service-" + portNameBase("ns", "a", "tcp", "p")
	extChain := "external-" + portNameBase("ns", "a", "tcp", "p")
	localChain := "local-" + portNameBase("ns", "a", "tcp", "p")
	for _, tc := range []struct {
		name  string
		cfg   Config
		v6    bool
		docs  []string
		check func(t *testing.T, rs *Ruleset)
	}{{
		name: "no endpoints: cluster IP rejected, nothing in service-ips",
		docs: []string{service("a", "  type: ClusterIP\n"+clusterIPSpec)},
		check: func(t *testing.T, rs *Ruleset) {
			want := []Element{{Key: "10.96.0.1 . tcp . 80", Value: "goto reject-chain", Comment: "ns/a:p"}}
			if diff := cmp.Diff(want, elements(rs, mapNoEndpointServices)); diff != "" {
				t.Error(diff)
			}
			if len(elements(rs, mapServiceIPs)) != 0 || hasChain(rs, svcChain) {
				t.Errorf("service-ips %v, chain %v: want neither", elements(rs, mapServiceIPs), hasChain(rs, svcChain))
			}
		},
	}, {
		name: "internal traffic policy Local without a local endpoint: cluster IP dropped",
		docs: []string{service("a", "  type: ClusterIP\n  internalTrafficPolicy: Local\n"+clusterIPSpec),
			slice("a", "IPv4", "", ep("10.244.2.5", "node-2", "ready: true"))},
		check: func(t *testing.T, rs *Ruleset) {
			want := []Element{{Key: "10.96.0.1 . tcp . 80", Value: "drop", Comment: "ns/a:p"}}
			if diff := cmp.Diff(want, elements(rs, mapNoEndpointServices)); diff != "" {
				t.Error(diff)
			}
		},
	}, {
		name: "internal traffic policy Local with a local endpoint: local chain",
		docs: []string{service("a", "  type: ClusterIP\n  internalTrafficPolicy: Local\n"+clusterIPSpec),
			slice("a", "IPv4", "", ep("10.244.2.5", "node-2", "ready: true")+ep("10.244.1.5", "node-1", "ready: true"))},
		check: func(t *testing.T, rs *Ruleset) {
			want := []Element{{Key: "10.96.0.1 . tcp . 80", Value: "goto " + localChain}}
			if diff := cmp.Diff(want, elements(rs, mapServiceIPs)); diff != "" {
				t.Error(diff)
			}
			if diff := cmp.Diff([]Rule{{Text: "meta l4proto tcp dnat to 10.244.1.5:8080"}}, chainRules(rs, localChain)); diff != "" {
				t.Error(diff)
			}
		},
	}, {
		name: "terminating endpoints serve when none is ready, sorted by ip:port",
		docs: []string{service("a", "  type: ClusterIP\n"+clusterIPSpec),
			slice("a", "IPv4", "", ep("10.244.2.5", "node-2", "ready: false, serving: true, terminating: true")+
				ep("10.244.10.5", "node-2", "ready: false, serving: true, terminating: true")+
				ep("10.244.3.5", "node-2", "ready: false, serving: false, terminating: true"))},
		check: func(t *testing.T, rs *Ruleset) {
			want := []Rule{{Text: "meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.244.10.5 . 8080 , 1 : 10.244.2.5 . 8080 }"}}
			if diff := cmp.Diff(want, chainRules(rs, svcChain)); diff != "" {
				t.Error(diff)
			}
		},
	}, {
		name: "masquerade-all",
		cfg:  Config{MasqueradeAll: true, Local: pods},
		docs: []string{service("a", "  type: ClusterIP\n"+clusterIPSpec)},
		check: func(t *testing.T, rs *Ruleset) {
			got := chainRules(rs, chainServices)[0]
			want := Rule{Text: "ip daddr @cluster-ips mark set mark or 0x00004000", Comment: "masquerade all clusterIP traffic"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Error(diff)
			}
		},
	}, {
		name: "interface-prefix detection, masquerade bit 0x1 (IPv6)",
		cfg:  Config{MasqueradeBit: new(1), Local: xtables.LocalTraffic{Interface: "veth+"}},
		v6:   true,
		docs: []string{service("a", "  type: NodePort\n  externalTrafficPolicy: Local\n  clusterIP: fd00::1\n  clusterIPs: [\"fd00::1\"]\n  ipFamilies: [IPv6]\n  ports: [{name: p, port: 80, protocol: TCP, nodePort: 30080}]\n"),
			slice("a", "IPv6", "", ep("fd00:244::5", "node-1", "ready: true"))},
		check: func(t *testing.T, rs *Ruleset) {
			want := Rule{Text: "ip6 daddr @cluster-ips iifname != veth* mark set mark or 0x00000002", Comment: "masquerade clusterIP traffic from outside cluster"}
			if diff := cmp.Diff(want, chainRules(rs, chainServices)[0]); diff != "" {
				t.Error(diff)
			}
			wantExt := []Rule{
				{Text: "iifname veth* goto " + svcChain, Comment: "short-circuit pod traffic"},
				{Text: "fib saddr type local mark set mark or 0x00000002", Comment: "masquerade local traffic"},
				{Text: "fib saddr type local goto " + svcChain, Comment: "short-circuit local traffic"},
				{Text: "goto " + localChain},
			}
			if diff := cmp.Diff(wantExt, chainRules(rs, extChain)); diff != "" {
				t.Error(diff)
			}
		},
	}, {
		name: "NodePorts on every address: no nodeport-ips, fib local match",
		docs: []string{service("a", "  type: ClusterIP\n"+clusterIPSpec)},
		check: func(t *testing.T, rs *Ruleset) {
			if setOf(rs, setNodePortIPs) != nil {
				t.Error("nodeport-ips set present")
			}
			want := []Rule{{Text: "ip daddr . meta l4proto . th dport vmap @service-ips"},
				{Text: "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports"}}
			if diff := cmp.Diff(want, chainRules(rs, chainServices)); diff != "" {
				t.Error(diff)
			}
			want = []Rule{{Text: "ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports"}}
			if diff := cmp.Diff(want, chainRules(rs, chainNodePortEPCheck)); diff != "" {
				t.Error(diff)
			}
		},
	}, {
		name: "source ranges holding the node IP let the load-balancer IPs in",
		cfg:  Config{IPv4: Family{NodeIP: netip.MustParseAddr("192.168.1.10")}},
		docs: []string{service("a", "  type: LoadBalancer\n  clusterIP: 10.96.0.1\n  clusterIPs: [10.96.0.1]\n  loadBalancerSourceRanges: [192.168.0.0/16, 10.0.0.0/8]\n  ports: [{name: p, port: 80, protocol: TCP, nodePort: 30080}]\nstatus:\n  loadBalancer: {ingress: [{ip: 192.0.2.1}, {ip: 192.0.2.2}]}\n")},
		check: func(t *testing.T, rs *Ruleset) {
			fw := "firewall-" + portNameBase("ns", "a", "tcp", "p")
			want := []Rule{{Text: "ip saddr != { 192.168.0.0/16 , 10.0.0.0/8 , 192.0.2.1 , 192.0.2.2 } drop"}}
			if diff := cmp.Diff(want, chainRules(rs, fw)); diff != "" {
				t.Error(diff)
			}
			// No endpoints: the firewall stays, the traffic is rejected.
			wantFW := []Element{{Key: "192.0.2.1 . tcp . 80", Value: "goto " + fw}, {Key: "192.0.2.2 . tcp . 80", Value: "goto " + fw}}
			if diff := cmp.Diff(wantFW, elements(rs, mapFirewallIPs)); diff != "" {
				t.Error(diff)
			}
			wantNP := []Element{{Key: "tcp . 30080", Value: "goto reject-chain", Comment: "ns/a:p"}}
			if diff := cmp.Diff(wantNP, elements(rs, mapNoEndpointNodePort)); diff != "" {
				t.Error(diff)
			}
		},
	}, {
		name: "several ports: one cluster-ips element, one hairpin element per endpoint port",
		docs: []string{service("a", "  type: ClusterIP\n  clusterIP: 10.96.0.1\n  clusterIPs: [10.96.0.1]\n  ports: [{name: p, port: 80, protocol: TCP}, {name: q, port: 81, protocol: UDP}]\n"),
			slice("a", "IPv4", "{name: p, port: 8080, protocol: TCP}, {name: q, port: 8080, protocol: UDP}", ep("10.244.1.5", "node-1", "ready: true"))},
		check: func(t *testing.T, rs *Ruleset) {
			if diff := cmp.Diff([]Element{{Key: "10.96.0.1"}}, elements(rs, setClusterIPs)); diff != "" {
				t.Error(diff)
			}
			want := []Element{{Key: "10.244.1.5 . 10.244.1.5 . tcp . 8080"}, {Key: "10.244.1.5 . 10.244.1.5 . udp . 8080"}}
			if diff := cmp.Diff(want, elements(rs, setHairpin)); diff != "" {
				t.Error(diff)
			}
		},
	}, {
		name: "session affinity: sets with the timeout, endpoint chains",
		docs: []string{service("a", "  type: ClusterIP\n  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 600}}\n"+clusterIPSpec),
			slice("a", "IPv4", "", ep("10.244.2.5", "node-2", "ready: true"))},
		check: func(t *testing.T, rs *Ruleset) {
			base := endpointNameBase("ns", "a", "tcp", "p", netip.MustParseAddrPort("10.244.2.5:8080"))
			want := &Set{Name: "affinity-" + base, Type: "ipv4_addr", Flags: []string{"dynamic", "timeout"}, Timeout: 600 * time.Second}
			if diff := cmp.Diff(want, setOf(rs, "affinity-"+base)); diff != "" {
				t.Error(diff)
			}
			wantEP := []Rule{{Text: "update @affinity-" + base + " { ip saddr }"}, {Text: "meta l4proto tcp dnat to 10.244.2.5:8080"}}
			if diff := cmp.Diff(wantEP, chainRules(rs, "endpoint-"+base)); diff != "" {
				t.Error(diff)
			}
			if len(elements(rs, setHairpin)) != 0 {
				t.Error("a remote endpoint in hairpin-connections")
			}
		},
	}, {
		name: "service CIDRs of the family, joined",
		docs: []string{"apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: a}\nspec: {cidrs: [10.96.0.0/16, \"fd00:96::/112\"]}",
			"apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: b}\nspec: {cidrs: [10.100.0.0/16]}"},
		check: func(t *testing.T, rs *Ruleset) {
			want := []Rule{{Text: "ip daddr @cluster-ips reject", Comment: "Reject traffic to invalid ports of ClusterIPs"},
				{Text: "ip daddr { 10.96.0.0/16,10.100.0.0/16 } drop", Comment: "Drop traffic to unallocated ClusterIPs"}}
			if diff := cmp.Diff(want, chainRules(rs, chainClusterIPsCheck)); diff != "" {
				t.Error(diff)
			}
		},
	}, {
		name: "a long name's comment is cut to 128 bytes",
		docs: []string{service(strings.Repeat("n", 63), "  type: ClusterIP\n  clusterIP: 10.96.0.1\n  clusterIPs: [10.96.0.1]\n  ports: [{name: "+strings.Repeat("p", 63)+", port: 80, protocol: TCP}]\n")},
		check: func(t *testing.T, rs *Ruleset) {
			els := elements(rs, mapNoEndpointServices)
			want := ("ns/" + strings.Repeat("n", 63) + ":" + strings.Repeat("p", 63))[:128]
			if len(els) != 1 || els[0].Comment != want {
				t.Errorf("elements %v: want one with comment %q", els, want)
			}
		},
	}, {
		name: "IPv4-only service: nothing in the ip6 table",
		v6:   true,
		docs: []string{service("a", "  type: ClusterIP\n"+clusterIPSpec)},
		check: func(t *testing.T, rs *Ruleset) {
			if len(elements(rs, setClusterIPs)) != 0 || len(elements(rs, mapNoEndpointServices)) != 0 {
				t.Errorf("ip6 table has %v", rs.Sets)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := RenderFamily(manifest(t, tc.docs...), &tc.cfg, tc.v6)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, rs)
		})
	}
}

// TestSetNodePorts: the runtime's selection restricts the families it
// has CIDRs of; nodeport-ips leaves loopback out.
func TestSetNodePorts(t *testing.T) {
	var c Config
	c.SetNodePorts([]netip.Prefix{netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("127.0.0.0/8")},
		[]netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("fd00::10")})
	want := Config{IPv4: Family{NodePortsRestricted: true, NodePortAddrs: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.168.1.10")}},
		IPv6: Family{NodePortAddrs: []netip.Addr{netip.MustParseAddr("fd00::10")}}}
	if diff := cmp.Diff(want, c, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Error(diff)
	}
	v4, v6, err := Render(client.NewSnapshot(nil, nil), c)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Element{{Key: "192.168.1.10"}}, elements(v4, setNodePortIPs)); diff != "" {
		t.Error(diff)
	}
	if setOf(v6, setNodePortIPs) != nil {
		t.Error("ip6 table has nodeport-ips without an IPv6 CIDR")
	}
}

// TestRenderErrors: a port that cannot be rendered is left out and named;
// a bad masquerade bit renders nothing.
func TestRenderErrors(t *testing.T) {
	svc := &client.Service{Namespace: "ns", Name: "a", Type: client.ClusterIP,
		ClusterIPs: client.IPs{V4: []netip.Addr{netip.MustParseAddr("10.96.0.1")}},
		Ports:      []client.Port{{Name: "bad", Protocol: "ICMP", Port: 80}, {Name: "good", Protocol: client.TCP, Port: 80}}}
	s := client.NewSnapshot([]*client.ServiceEndpoints{{Service: svc}}, nil)
	v4, v6, err := Render(s, Config{})
	if err == nil || !strings.Contains(err.Error(), `service ns/a port "bad"`) {
		t.Errorf("error %v: want one naming ns/a port bad", err)
	}
	want := []Element{{Key: "10.96.0.1 . tcp . 80", Value: "goto reject-chain", Comment: "ns/a:good"}}
	if diff := cmp.Diff(want, elements(v4, mapNoEndpointServices)); diff != "" {
		t.Error(diff)
	}
	if v6 == nil {
		t.Error("no ip6 table")
	}
	if _, _, err := Render(s, Config{MasqueradeBit: new(32)}); err == nil || !strings.Contains(err.Error(), "masquerade bit 32") {
		t.Errorf("bit 32: error %v", err)
	}
	for _, c := range []struct {
		bit  *int
		mark string
	}{{nil, "0x00004000"}, {new(0), "0x00000001"}, {new(31), "0x80000000"}} {
		v4, _, err := Render(generated(1, 2, false), Config{MasqueradeBit: c.bit})
		if err != nil {
			t.Fatal(err)
		}
		if script := v4.Script(); !strings.Contains(script, "masquerading mark and "+c.mark+" != 0 ") {
			t.Errorf("bit %d: no mark %s in\n%s", v4Bit(c.bit), c.mark, script)
		}
	}
}

// v4Bit is a test case's bit, -1 for nil.
func v4Bit(b *int) int {
	if b == nil {
		return -1
	}
	return *b
}

// TestChainNames: kube-proxy's names (its Test_servicePortChainNameBase
// and Test_servicePortEndpointChainNameBase facts).
func TestChainNames(t *testing.T) {
	ns := "very-long-namespace-name-abcdefghijklmnopqrstuvwxyz0123456789xx"
	name := "very-long-service-name-why-would-you-even-do-this-i-mean-really"
	port := "port-443-providing-the-hypertext-transmission-protocol-with-tls"
	for _, tc := range []struct{ got, want string }{
		{portNameBase("testing", "service", "tcp", "http"), "P4ZYZVCF-testing/service/tcp/http"},
		{portNameBase("testing", "service", "tcp", "https"), "LZBRENCP-testing/service/tcp/https"},
		{portNameBase(ns, name, "sctp", port), "KR6NACJP-" + ns + "/" + name + "/sctp/" + port},
		{endpointNameBase("testing", "service", "tcp", "http", netip.MustParseAddrPort("10.180.0.1:80")), "JO2XBXZR-testing/service/tcp/http__10.180.0.1/80"},
		// kube-proxy's own IPv6 cases write "::" for a single zero group,
		// which its endpoint strings (net.IP.String) never hold: this one
		// has two.
		{endpointNameBase(ns, name, "sctp", port, netip.MustParseAddrPort("[1234:5678:9abc:def0::abc:1234]:443")), "5YS7AFEA-" + ns + "/" + name + "/sctp/" + port + "__1234.5678.9abc.def0..abc.1234/443"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	// Past 240 bytes a name is cut, its end replaced by "...".
	cut := endpointNameBase(ns, name, "sctp", port, netip.MustParseAddrPort("[1234:5678:9abc:def0:1111:abcd:1234:5678]:443"))
	if len(cut) != nameBaseLengthMax || !strings.HasSuffix(cut, "...") || !strings.HasSuffix(cut, "tls__1234.5678.9abc.def0.1111.abcd....") {
		t.Errorf("long name %q (%d bytes): want %d bytes ending in ...", cut, len(cut), nameBaseLengthMax)
	}
}
