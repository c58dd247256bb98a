package iptables

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// TestNodePortRulesPerFamily: --nodeport-addresses restricts node ports
// per family, as kube-proxy does: a family none of its CIDRs belongs to
// serves node ports on every local address; a family with CIDRs but no
// node address in them serves none.
func TestNodePortRulesPerFamily(t *testing.T) {
	pfx, addr := netip.MustParsePrefix, netip.MustParseAddr
	all4 := `-A KUBE-SERVICES ! -d 127.0.0.0/8 -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`
	all6 := `-A KUBE-SERVICES ! -d ::1 -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`
	only := func(a string) string {
		return `-A KUBE-SERVICES -d ` + a + ` -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -j KUBE-NODEPORTS`
	}
	tests := []struct {
		name  string
		cidrs []netip.Prefix
		ips   []netip.Addr
		want4 []string
		want6 []string
	}{
		{"no --nodeport-addresses", nil, nil, []string{all4}, []string{all6}},
		{"IPv4 CIDR: IPv6 unrestricted", []netip.Prefix{pfx("192.168.50.0/24")}, []netip.Addr{addr("192.168.50.10")},
			[]string{only("192.168.50.10")}, []string{all6}},
		{"IPv6 CIDR without a node address: no IPv6 node ports", []netip.Prefix{pfx("192.168.50.0/24"), pfx("fd00:50::/64")},
			[]netip.Addr{addr("192.168.50.10")}, []string{only("192.168.50.10")}, nil},
		{"both families", []netip.Prefix{pfx("192.168.50.0/24"), pfx("fd00:50::/64")},
			[]netip.Addr{addr("192.168.50.10"), addr("fd00:50::2")}, []string{only("192.168.50.10")}, []string{only("fd00:50::2")}},
	}
	for _, tt := range tests {
		c := Config{IPv4: true, IPv6: true, NodePortCIDRs: tt.cidrs, NodePortIPs: tt.ips}
		for _, f := range []struct {
			fam  xtables.Family
			want []string
		}{{xtables.IPv4, tt.want4}, {xtables.IPv6, tt.want6}} {
			var got []string
			for _, sc := range staticChains(&c, &famConfig{fam: f.fam, mark: "0x4000"}) {
				if sc.table == "nat" && sc.chain == chainServices {
					for _, r := range sc.rules {
						if strings.Contains(r, chainNodePorts) {
							got = append(got, r)
						}
					}
				}
			}
			if d := cmp.Diff(f.want, got); d != "" {
				t.Errorf("%s, %s node-port rules (-want +got):\n%s", tt.name, f.fam, d)
			}
		}
	}
}
