package iptables

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// localRules returns the two rules of an eTP=Local NodePort service that
// follow the local-traffic detection: the cluster-IP masquerade rule of
// its KUBE-SVC- chain and the pod-traffic rule of its KUBE-EXT- chain.
func localRules(t *testing.T, fc famConfig) []string {
	t.Helper()
	svc := svcSpec{name: "np", typ: client.NodePort, clusterIPs: []string{"10.96.0.40", "fd00:96::40"}, eLocal: true,
		ports: []client.Port{withNodePort(tcp("", 80, 8080), 30080)}, eps: []ep{{ip: "10.244.1.9"}, {ip: "fd00:244::9"}}}
	lines := renderLines(t, fc, svc)
	var out []string
	for _, c := range []string{ServiceChain("default/np", "tcp"), ExternalChain("default/np", "tcp")} {
		for _, l := range lines[c] {
			if strings.Contains(l, "cluster IP") || strings.Contains(l, "pod traffic") {
				out = append(out, strings.TrimPrefix(l, "-A "+c+" "))
			}
		}
	}
	return out
}

// TestRenderLocalModes: each local-traffic detection renders its matches
// where kube-proxy v1.37.2 puts its detector's IfNotLocal and IfLocal
// (pkg/proxy/util/localdetector.go), in iptables-save's order; without
// detection, neither rule is written.
func TestRenderLocalModes(t *testing.T) {
	masq4 := func(m string) string {
		return m + `-p tcp -m comment --comment "default/np cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`
	}
	pod := func(m string) string {
		return m + ` -m comment --comment "pod traffic for default/np external destinations" -j ` + ServiceChain("default/np", "tcp")
	}
	pfx := netip.MustParsePrefix
	for _, tc := range []struct {
		name  string
		fam   xtables.Family
		local xtables.LocalTraffic
		want  []string
	}{
		{"ClusterCIDR", xtables.IPv4, xtables.LocalTraffic{CIDRs: []netip.Prefix{pfx("10.244.0.0/16"), pfx("10.99.0.0/16")}},
			[]string{masq4("! -s 10.244.0.0/16 -d 10.96.0.40 "), pod("-s 10.244.0.0/16")}},
		{"NodeCIDR, IPv6", xtables.IPv6, xtables.LocalTraffic{CIDRs: []netip.Prefix{pfx("10.244.1.0/24"), pfx("fd00:244:1::/64")}},
			[]string{masq4("! -s fd00:244:1::/64 -d fd00:96::40 "), pod("-s fd00:244:1::/64")}},
		{"BridgeInterface", xtables.IPv4, xtables.LocalTraffic{Interface: "cbr0"},
			[]string{masq4("-d 10.96.0.40 ! -i cbr0 "), pod("-i cbr0")}},
		{"InterfaceNamePrefix", xtables.IPv6, xtables.LocalTraffic{Interface: "veth+"},
			[]string{masq4("-d fd00:96::40 ! -i veth+ "), pod("-i veth+")}},
		{"no CIDR of the family", xtables.IPv6, xtables.LocalTraffic{CIDRs: []netip.Prefix{pfx("10.244.0.0/16")}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := famConfig{fam: tc.fam, mark: "0x4000"}
			fc.setLocal(tc.local)
			if diff := cmp.Diff(tc.want, localRules(t, fc)); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSetLocal: a changed detection (the Node's pod CIDRs changed)
// re-renders every service in the next sync, which is a full one; the same
// detection again changes nothing.
func TestSetLocal(t *testing.T) {
	p, out := dryRun(t, func(c *Config) {
		c.Local = xtables.LocalTraffic{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}}
	})
	specs := broad()
	s := snapshot(specs...)
	if _, err := p.Snapshot(s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "! -s 10.244.1.0/24 ") {
		t.Fatalf("first sync without the first pod CIDR:\n%s", out)
	}
	p.SetLocal(xtables.LocalTraffic{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}})
	out.Reset()
	if st, err := p.Snapshot(next(s, specs...)); err != nil || st.Full {
		t.Fatalf("sync after the same detection: %+v, %v; want a partial one", st, err)
	}
	p.SetLocal(xtables.LocalTraffic{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.9.0/24")}})
	out.Reset()
	st, err := p.Snapshot(next(s, specs...))
	if err != nil || !st.Full {
		t.Fatalf("sync after a new detection: %+v, %v; want a full one", st, err)
	}
	if got := out.String(); !strings.Contains(got, "! -s 10.244.9.0/24 ") || strings.Contains(got, "10.244.1.0/24") {
		t.Errorf("services not rendered with the new pod CIDR:\n%s", got)
	}
}

// TestKernelLocalModes: the interface modes' rules are what iptables-save
// prints back, on both backends (a resync after the first sync writes
// nothing).
func TestKernelLocalModes(t *testing.T) {
	for _, b := range []xtables.Backend{xtables.NFT, xtables.Legacy} {
		for _, l := range []xtables.LocalTraffic{{Interface: "cbr0"}, {Interface: "veth+"}} {
			t.Run(string(b)+"/"+l.Interface, func(t *testing.T) {
				p, _ := kernelProxier(t, b, func(c *Config) { c.Local, c.CompareEvery = l, 1 })
				if _, err := p.Snapshot(snapshot(broad()...)); err != nil {
					t.Fatal(err)
				}
				if w := pendingWrites(t, p); w != "" {
					t.Fatalf("a resync after the first sync would write:\n%s", w)
				}
			})
		}
	}
}
