package iptables

import (
	"flag"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// renderLines renders one service and returns its lines by chain: its own
// nat chains by name, its top-level rules as "table/CHAIN".
func renderLines(t *testing.T, fc famConfig, s svcSpec) map[string][]string {
	t.Helper()
	var r rendered
	if err := render(&fc, s.build(), false, &r); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, c := range r.chains {
		out[c.name] = strings.Split(strings.TrimSuffix(string(r.text(c)), "\n"), "\n")
	}
	for slot := range numTop {
		for _, l := range r.topLines(slot) {
			k := topChains[slot].table + "/" + topChains[slot].chain
			out[k] = append(out[k], strings.TrimSuffix(l, "\n"))
		}
	}
	return out
}

var v4 = famConfig{fam: xtables.IPv4, mark: "0x4000", localCIDR: netip.MustParsePrefix("10.244.0.0/16"), nodeIP: netip.MustParseAddr("192.168.50.2")}

func TestRender(t *testing.T) {
	web := "default/web:http"
	svcWeb, sepWeb := ServiceChain(web, "tcp"), EndpointChain(web, "tcp", "10.244.1.5:8080")
	masqAll := v4
	masqAll.masqueradeAll = true
	v6 := famConfig{fam: xtables.IPv6, mark: "0x4000"}
	sep6 := EndpointChain(web, "tcp", "[fd00:244::5]:8080")
	dns := "default/dns"
	lb := "default/lb"
	lbEXT, lbFW, lbSVC, lbSVL := ExternalChain(lb, "tcp"), FirewallChain(lb, "tcp"), ServiceChain(lb, "tcp"), LocalChain(lb, "tcp")
	lbLocal, lbRemote := EndpointChain(lb, "tcp", "10.244.1.9:80"), EndpointChain(lb, "tcp", "10.244.2.9:80")
	for _, tc := range []struct {
		name string
		fc   famConfig
		svc  svcSpec
		want map[string][]string
	}{{
		name: "one endpoint (names checked against kube-proxy v1.37.2)",
		fc:   v4,
		svc:  svcSpec{name: "web", clusterIPs: []string{"10.96.0.10"}, ports: []client.Port{tcp("http", 80, 8080)}, eps: []ep{{ip: "10.244.1.5"}}},
		want: map[string][]string{
			"nat/KUBE-SERVICES": {`-A KUBE-SERVICES -d 10.96.0.10 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-CDGGSHYLG3RE2FKL`},
			"KUBE-SVC-CDGGSHYLG3RE2FKL": {
				`-A KUBE-SVC-CDGGSHYLG3RE2FKL ! -s 10.244.0.0/16 -d 10.96.0.10 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`,
				`-A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http -> 10.244.1.5:8080" -j KUBE-SEP-AFGSLHOD2HFNCBX4`,
			},
			"KUBE-SEP-AFGSLHOD2HFNCBX4": {
				`-A KUBE-SEP-AFGSLHOD2HFNCBX4 -s 10.244.1.5 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ`,
				`-A KUBE-SEP-AFGSLHOD2HFNCBX4 -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination 10.244.1.5:8080`,
			},
		},
	}, {
		name: "masquerade all",
		fc:   masqAll,
		svc:  svcSpec{name: "web", clusterIPs: []string{"10.96.0.10"}, ports: []client.Port{tcp("http", 80, 8080)}, eps: []ep{{ip: "10.244.1.5"}}},
		want: map[string][]string{
			"nat/KUBE-SERVICES": {`-A KUBE-SERVICES -d 10.96.0.10 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j ` + svcWeb},
			svcWeb: {
				`-A ` + svcWeb + ` -d 10.96.0.10 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`,
				`-A ` + svcWeb + ` -m comment --comment "default/web:http -> 10.244.1.5:8080" -j ` + sepWeb,
			},
			sepWeb: {
				`-A ` + sepWeb + ` -s 10.244.1.5 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ`,
				`-A ` + sepWeb + ` -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination 10.244.1.5:8080`,
			},
		},
	}, {
		name: "IPv6, no local-traffic detection",
		fc:   v6,
		svc:  svcSpec{name: "web", clusterIPs: []string{"10.96.0.10", "fd00:96::10"}, ports: []client.Port{tcp("http", 80, 8080)}, eps: []ep{{ip: "10.244.1.5"}, {ip: "fd00:244::5"}}},
		want: map[string][]string{
			"nat/KUBE-SERVICES": {`-A KUBE-SERVICES -d fd00:96::10 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j ` + svcWeb},
			svcWeb:              {`-A ` + svcWeb + ` -m comment --comment "default/web:http -> [fd00:244::5]:8080" -j ` + sep6},
			sep6: {
				`-A ` + sep6 + ` -s fd00:244::5 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ`,
				`-A ` + sep6 + ` -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination [fd00:244::5]:8080`,
			},
		},
	}, {
		name: "no endpoints: REJECT, no nat chains",
		fc:   v4,
		svc: svcSpec{name: "dns", typ: client.NodePort, clusterIPs: []string{"10.96.0.53"}, externalIPs: []string{"198.51.100.1"},
			ports: []client.Port{withNodePort(udp("", 53, 53), 30053)}},
		want: map[string][]string{
			"filter/KUBE-SERVICES": {`-A KUBE-SERVICES -d 10.96.0.53 -p udp -m comment --comment "default/dns has no endpoints" -m udp --dport 53 -j REJECT --reject-with icmp-port-unreachable`},
			"filter/KUBE-EXTERNAL-SERVICES": {
				`-A KUBE-EXTERNAL-SERVICES -d 198.51.100.1 -p udp -m comment --comment "default/dns has no endpoints" -m udp --dport 53 -j REJECT --reject-with icmp-port-unreachable`,
				`-A KUBE-EXTERNAL-SERVICES -p udp -m comment --comment "default/dns has no endpoints" -m addrtype --dst-type LOCAL -m udp --dport 30053 -j REJECT --reject-with icmp-port-unreachable`,
			},
		},
	}, {
		name: "iTP=Local without local endpoints: DROP",
		fc:   v4,
		svc:  svcSpec{name: "dns", iLocal: true, clusterIPs: []string{"10.96.0.53"}, ports: []client.Port{udp("", 53, 53)}, eps: []ep{{ip: "10.244.2.5", remote: true}}},
		want: map[string][]string{
			"filter/KUBE-SERVICES": {`-A KUBE-SERVICES -d 10.96.0.53 -p udp -m comment --comment "default/dns has no local endpoints" -m udp --dport 53 -j DROP`},
		},
	}, {
		name: "three endpoints: statistic probabilities, the shortest decimals of what the kernel keeps",
		fc:   v4,
		svc: svcSpec{name: "dns", clusterIPs: []string{"10.96.0.53"}, ports: []client.Port{udp("", 53, 53)},
			eps: []ep{{ip: "10.244.1.5"}, {ip: "10.244.1.10"}, {ip: "10.244.1.7", notReady: true}, {ip: "10.244.1.6"}}},
		want: map[string][]string{
			"nat/KUBE-SERVICES": {`-A KUBE-SERVICES -d 10.96.0.53 -p udp -m comment --comment "default/dns cluster IP" -m udp --dport 53 -j ` + ServiceChain(dns, "udp")},
			ServiceChain(dns, "udp"): {
				`-A ` + ServiceChain(dns, "udp") + ` ! -s 10.244.0.0/16 -d 10.96.0.53 -p udp -m comment --comment "default/dns cluster IP" -m udp --dport 53 -j KUBE-MARK-MASQ`,
				`-A ` + ServiceChain(dns, "udp") + ` -m comment --comment "default/dns -> 10.244.1.10:53" -m statistic --mode random --probability 0.3333333335 -j ` + EndpointChain(dns, "udp", "10.244.1.10:53"),
				`-A ` + ServiceChain(dns, "udp") + ` -m comment --comment "default/dns -> 10.244.1.5:53" -m statistic --mode random --probability 0.5 -j ` + EndpointChain(dns, "udp", "10.244.1.5:53"),
				`-A ` + ServiceChain(dns, "udp") + ` -m comment --comment "default/dns -> 10.244.1.6:53" -j ` + EndpointChain(dns, "udp", "10.244.1.6:53"),
			},
			EndpointChain(dns, "udp", "10.244.1.10:53"): {
				`-A ` + EndpointChain(dns, "udp", "10.244.1.10:53") + ` -s 10.244.1.10 -m comment --comment "default/dns" -j KUBE-MARK-MASQ`,
				`-A ` + EndpointChain(dns, "udp", "10.244.1.10:53") + ` -p udp -m comment --comment "default/dns" -m udp -j DNAT --to-destination 10.244.1.10:53`,
			},
			EndpointChain(dns, "udp", "10.244.1.5:53"): {
				`-A ` + EndpointChain(dns, "udp", "10.244.1.5:53") + ` -s 10.244.1.5 -m comment --comment "default/dns" -j KUBE-MARK-MASQ`,
				`-A ` + EndpointChain(dns, "udp", "10.244.1.5:53") + ` -p udp -m comment --comment "default/dns" -m udp -j DNAT --to-destination 10.244.1.5:53`,
			},
			EndpointChain(dns, "udp", "10.244.1.6:53"): {
				`-A ` + EndpointChain(dns, "udp", "10.244.1.6:53") + ` -s 10.244.1.6 -m comment --comment "default/dns" -j KUBE-MARK-MASQ`,
				`-A ` + EndpointChain(dns, "udp", "10.244.1.6:53") + ` -p udp -m comment --comment "default/dns" -m udp -j DNAT --to-destination 10.244.1.6:53`,
			},
		},
	}, {
		name: "LoadBalancer, eTP=Local, source ranges containing the node, health check",
		fc:   v4,
		svc: svcSpec{name: "lb", typ: client.LoadBalancer, clusterIPs: []string{"10.96.0.30"}, lbIPs: []string{"192.0.2.10"},
			ranges: []string{"192.168.50.0/24"}, eLocal: true, hcNodePort: 32000, affinity: 60,
			ports: []client.Port{withNodePort(tcp("", 443, 80), 30443)},
			eps:   []ep{{ip: "10.244.1.9"}, {ip: "10.244.2.9", remote: true}}},
		want: map[string][]string{
			"nat/KUBE-SERVICES": {
				`-A KUBE-SERVICES -d 10.96.0.30 -p tcp -m comment --comment "default/lb cluster IP" -m tcp --dport 443 -j ` + lbSVC,
				`-A KUBE-SERVICES -d 192.0.2.10 -p tcp -m comment --comment "default/lb loadbalancer IP" -m tcp --dport 443 -j ` + lbFW,
			},
			"nat/KUBE-NODEPORTS":         {`-A KUBE-NODEPORTS -p tcp -m comment --comment "default/lb" -m tcp --dport 30443 -j ` + lbEXT},
			"filter/KUBE-NODEPORTS":      {`-A KUBE-NODEPORTS -p tcp -m comment --comment "default/lb health check node port" -m tcp --dport 32000 -j ACCEPT`},
			"filter/KUBE-PROXY-FIREWALL": {`-A KUBE-PROXY-FIREWALL -d 192.0.2.10 -p tcp -m comment --comment "default/lb traffic not accepted by ` + lbFW + `" -m tcp --dport 443 -j DROP`},
			lbEXT: {
				`-A ` + lbEXT + ` -s 10.244.0.0/16 -m comment --comment "pod traffic for default/lb external destinations" -j ` + lbSVC,
				`-A ` + lbEXT + ` -m comment --comment "masquerade LOCAL traffic for default/lb external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`,
				`-A ` + lbEXT + ` -m comment --comment "route LOCAL traffic for default/lb external destinations" -m addrtype --src-type LOCAL -j ` + lbSVC,
				`-A ` + lbEXT + ` -j ` + lbSVL,
			},
			lbFW: {
				`-A ` + lbFW + ` -s 192.168.50.0/24 -m comment --comment "default/lb loadbalancer IP" -j ` + lbEXT,
				`-A ` + lbFW + ` -s 192.0.2.10 -m comment --comment "default/lb loadbalancer IP" -j ` + lbEXT,
				`-A ` + lbFW + ` -m comment --comment "other traffic to default/lb will be dropped by KUBE-PROXY-FIREWALL"`,
			},
			lbSVC: {
				`-A ` + lbSVC + ` ! -s 10.244.0.0/16 -d 10.96.0.30 -p tcp -m comment --comment "default/lb cluster IP" -m tcp --dport 443 -j KUBE-MARK-MASQ`,
				`-A ` + lbSVC + ` -m comment --comment "default/lb -> 10.244.1.9:80" -m recent --rcheck --seconds 60 --reap --name ` + lbLocal + ` --mask 255.255.255.255 --rsource -j ` + lbLocal,
				`-A ` + lbSVC + ` -m comment --comment "default/lb -> 10.244.2.9:80" -m recent --rcheck --seconds 60 --reap --name ` + lbRemote + ` --mask 255.255.255.255 --rsource -j ` + lbRemote,
				`-A ` + lbSVC + ` -m comment --comment "default/lb -> 10.244.1.9:80" -m statistic --mode random --probability 0.5 -j ` + lbLocal,
				`-A ` + lbSVC + ` -m comment --comment "default/lb -> 10.244.2.9:80" -j ` + lbRemote,
			},
			lbSVL: {
				`-A ` + lbSVL + ` -m comment --comment "default/lb -> 10.244.1.9:80" -m recent --rcheck --seconds 60 --reap --name ` + lbLocal + ` --mask 255.255.255.255 --rsource -j ` + lbLocal,
				`-A ` + lbSVL + ` -m comment --comment "default/lb -> 10.244.1.9:80" -j ` + lbLocal,
			},
			lbLocal: {
				`-A ` + lbLocal + ` -s 10.244.1.9 -m comment --comment "default/lb" -j KUBE-MARK-MASQ`,
				`-A ` + lbLocal + ` -p tcp -m comment --comment "default/lb" -m recent --set --name ` + lbLocal + ` --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.244.1.9:80`,
			},
			lbRemote: {
				`-A ` + lbRemote + ` -s 10.244.2.9 -m comment --comment "default/lb" -j KUBE-MARK-MASQ`,
				`-A ` + lbRemote + ` -p tcp -m comment --comment "default/lb" -m recent --set --name ` + lbRemote + ` --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.244.2.9:80`,
			},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, renderLines(t, tc.fc, tc.svc)); diff != "" {
				t.Errorf("rendered lines (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderBadInput(t *testing.T) {
	bad := svcSpec{name: "bad", clusterIPs: []string{"10.96.0.1"}, ports: []client.Port{{Name: "x", Protocol: "ICMP", Port: 1}}}
	good := svcSpec{name: "good", clusterIPs: []string{"10.96.0.2"}, ports: []client.Port{tcp("", 80, 80)}, eps: []ep{{ip: "10.244.1.1"}}}
	p, out := dryRun(t, nil)
	_, err := p.Snapshot(snapshot(bad, good))
	if err == nil || !strings.Contains(err.Error(), "default/bad") || !strings.Contains(err.Error(), "ICMP") {
		t.Fatalf("error %v, want one naming default/bad and its protocol", err)
	}
	if !strings.Contains(out.String(), "default/good cluster IP") {
		t.Errorf("the valid service was not programmed:\n%s", out)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestGoldenBroad is the whole first-sync restore input (both families) of
// a cluster using every feature, as reviewed against kube-proxy v1.37.2's
// proxier.go. go test -run TestGoldenBroad -update rewrites it.
func TestGoldenBroad(t *testing.T) {
	var out strings.Builder
	p, err := NewProxier(Config{IPv4: true, IPv6: true, MasqueradeBit: 14, DryRun: &out, Backend: xtables.NFT, LocalhostNodePorts: true, MaxRestoreRules: -1,
		Local:   xtables.LocalTraffic{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/48")}},
		NodeIPs: []netip.Addr{netip.MustParseAddr("192.168.50.2")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Snapshot(snapshot(broad()...)); err != nil {
		t.Fatal(err)
	}
	const path = "testdata/broad.golden"
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), out.String()); diff != "" {
		t.Errorf("restore input differs from %s (-want +got):\n%s", path, diff)
	}
}
