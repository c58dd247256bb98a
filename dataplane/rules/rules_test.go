package rules

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/host/xtables"
)

func TestSetName(t *testing.T) {
	tests := []struct {
		name string
		f    xtables.Family
		want string
	}{
		{SetClusterIP, xtables.IPv4, "KUBE-CLUSTER-IP"},
		{SetClusterIP, xtables.IPv6, "KUBE-6-CLUSTER-IP"},
		// Cut to the kernel's 31 characters, as kube-proxy does.
		{SetLoadBalancerSrcNet, xtables.IPv6, "KUBE-6-LOAD-BALANCER-SOURCE-CID"},
		{SetNodePortLocalSCTP, xtables.IPv6, "KUBE-6-NODE-PORT-LOCAL-SCTP-HAS"},
	}
	for _, tt := range tests {
		if got := SetName(tt.f, tt.name); got != tt.want {
			t.Errorf("SetName(%s, %s) = %s, want %s", tt.f, tt.name, got, tt.want)
		}
	}
	for _, f := range []xtables.Family{xtables.IPv4, xtables.IPv6} {
		for _, s := range Sets(f) {
			if len(s) > maxSetName {
				t.Errorf("set name %s is longer than %d", s, maxSetName)
			}
		}
	}
	if got := SetType("KUBE-6-LOAD-BALANCER-SOURCE-CID"); got != "hash:ip,port,net" {
		t.Errorf("SetType of the cut IPv6 name = %s", got)
	}
}

func TestBuild(t *testing.T) {
	find := func(rs Ruleset, chain, substr string) []string {
		var out []string
		for _, r := range rs.Rules {
			if r.Chain == chain && strings.Contains(r.String(), substr) {
				out = append(out, r.String())
			}
		}
		return out
	}
	def := Build(Config{MasqueradeBit: 14, RandomFully: true}, xtables.IPv4)
	if diff := cmp.Diff([]string{"-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000"}, find(def, ChainMarkMasq, "")); diff != "" {
		t.Errorf("mark rule (-want +got):\n%s", diff)
	}
	if got := find(def, ChainPostrouting, "--random-fully"); len(got) != 1 {
		t.Errorf("random-fully MASQUERADE rules: %q", got)
	}
	if got := find(Build(Config{MasqueradeBit: 0}, xtables.IPv4), ChainMarkMasq, "0x1/0x1"); len(got) != 1 {
		t.Errorf("bit 0 mark rule: %q", find(Build(Config{}, xtables.IPv4), ChainMarkMasq, ""))
	}

	all := Build(Config{MasqueradeBit: 14, MasqueradeAll: true}, xtables.IPv6)
	if got := find(all, ChainServices, "KUBE-6-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ"); len(got) != 1 || strings.Contains(got[0], "! -s") {
		t.Errorf("masquerade-all rule: %q", got)
	}
	if got := find(all, ChainIPVSFilter, "REJECT"); len(got) != 1 || !strings.Contains(got[0], "icmp6-port-unreachable") {
		t.Errorf("IPv6 reject rule: %q", got)
	}
	// Every set a rule matches is one the sink creates.
	for _, f := range []xtables.Family{xtables.IPv4, xtables.IPv6} {
		for _, r := range Build(Config{MasqueradeBit: 14}, f).Rules {
			if i := slices.Index(r.Args, "--match-set"); i >= 0 && !slices.Contains(Sets(f), r.Args[i+1]) {
				t.Errorf("%s rule matches unknown set %s", f, r.Args[i+1])
			}
		}
	}
}

// TestLocalDetection: the cluster-IP masquerade rule of KUBE-SERVICES
// follows the local-traffic detection as kube-proxy v1.37.2 writes it
// (its LocalTrafficDetector's IfNotLocal: "! -s <cidr>", "! -i <bridge>",
// "! -i <prefix>+"), per family; without detection in a family the node's
// own traffic from a service address is masqueraded (src,dst).
func TestLocalDetection(t *testing.T) {
	pfx := netip.MustParsePrefix
	const rest = `-m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set %s -j KUBE-MARK-MASQ`
	rule := func(match, set string) string {
		if match != "" {
			match += " "
		}
		return "-A KUBE-SERVICES " + match + strings.Replace(rest, "%s", set, 1)
	}
	cidrs := []netip.Prefix{pfx("10.244.0.0/16"), pfx("10.250.0.0/16"), pfx("fd00:244::/48")}
	tests := []struct {
		name         string
		local        xtables.LocalTraffic
		want4, want6 string
	}{
		{"ClusterCIDR: the first CIDR of each family", xtables.LocalTraffic{CIDRs: cidrs},
			rule("! -s 10.244.0.0/16", "KUBE-CLUSTER-IP dst,dst"), rule("! -s fd00:244::/48", "KUBE-6-CLUSTER-IP dst,dst")},
		{"NodeCIDR, IPv4 only: IPv6 detects nothing", xtables.LocalTraffic{CIDRs: []netip.Prefix{pfx("10.244.1.0/24")}},
			rule("! -s 10.244.1.0/24", "KUBE-CLUSTER-IP dst,dst"), rule("", "KUBE-6-CLUSTER-IP src,dst")},
		{"BridgeInterface", xtables.LocalTraffic{Interface: "cbr0"},
			rule("! -i cbr0", "KUBE-CLUSTER-IP dst,dst"), rule("! -i cbr0", "KUBE-6-CLUSTER-IP dst,dst")},
		{"InterfaceNamePrefix", xtables.LocalTraffic{Interface: "veth+"},
			rule("! -i veth+", "KUBE-CLUSTER-IP dst,dst"), rule("! -i veth+", "KUBE-6-CLUSTER-IP dst,dst")},
		{"none", xtables.LocalTraffic{}, rule("", "KUBE-CLUSTER-IP src,dst"), rule("", "KUBE-6-CLUSTER-IP src,dst")},
	}
	find := func(rs Ruleset) []string {
		var out []string
		for _, r := range rs.Rules {
			if r.Chain == ChainServices && strings.Contains(r.String(), "cluster ip + port for masquerade") {
				out = append(out, r.String())
			}
		}
		return out
	}
	for _, tt := range tests {
		for _, f := range []struct {
			fam  xtables.Family
			want string
		}{{xtables.IPv4, tt.want4}, {xtables.IPv6, tt.want6}} {
			if diff := cmp.Diff([]string{f.want}, find(Build(Config{MasqueradeBit: 14, Local: tt.local}, f.fam))); diff != "" {
				t.Errorf("%s, %s (-want +got):\n%s", tt.name, f.fam, diff)
			}
		}
	}
}

// TestLoopbackReturn: KUBE-SERVICES starts with kube-proxy's early return
// of the node's loopback connections, in each family.
func TestLoopbackReturn(t *testing.T) {
	for f, want := range map[xtables.Family]string{xtables.IPv4: "-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN", xtables.IPv6: "-A KUBE-SERVICES -s ::1/128 -j RETURN"} {
		for _, r := range Build(Config{MasqueradeBit: 14}, f).Rules {
			if r.Chain == ChainServices {
				if r.String() != want {
					t.Errorf("%s: first rule of KUBE-SERVICES %q, want %q", f, r.String(), want)
				}
				break
			}
		}
	}
}

// TestForward: KUBE-FORWARD holds kube-proxy v1.37.2 IPVS mode's two
// rules in its order (masqueraded traffic, then RELATED,ESTABLISHED); its
// IPVS mode writes no conntrack-INVALID drop (the iptables mode does).
func TestForward(t *testing.T) {
	for _, f := range []xtables.Family{xtables.IPv4, xtables.IPv6} {
		var got []string
		for _, r := range Build(Config{MasqueradeBit: 14}, f).Rules {
			if r.Chain == ChainForward {
				got = append(got, r.String())
			}
		}
		want := []string{
			`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT`,
			`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s KUBE-FORWARD (-want +got):\n%s", f, diff)
		}
	}
}

func TestValidate(t *testing.T) {
	for bit, ok := range map[int]bool{-1: false, 0: true, 14: true, 31: true, 32: false} {
		if err := (Config{MasqueradeBit: bit}).Validate(); (err == nil) != ok {
			t.Errorf("Validate(bit %d) = %v", bit, err)
		}
	}
}

func TestOutFilterDrops(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.20"), netip.MustParseAddr("192.0.2.5")
	v6 := netip.MustParseAddr("2001:db8::20")
	fw := []OutFilterDrop{{a, 6, 80}, {a, 17, 53}, {b, 6, 443}, {a, 6, 80}, {v6, 132, 80}}
	allowed := []OutFilterDrop{{a, 17, 53}}
	got := OutFilterDrops(fw, allowed)
	want := []OutFilterDrop{{b, 6, 443}, {a, 6, 80}, {v6, 132, 80}}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
		t.Errorf("drops (-want +got):\n%s", diff)
	}
	var lines []string
	for _, r := range Build(Config{MasqueradeBit: 14}, xtables.IPv4).WithOutFilter(got).Rules {
		if r.Chain == ChainIPVSOutFilter {
			lines = append(lines, r.String())
		}
	}
	wantLines := []string{
		"-A KUBE-IPVS-OUT-FILTER -s 192.0.2.5/32 -m ipvs --vproto 6 --vaddr 192.0.2.5 --vport 443 -j DROP",
		"-A KUBE-IPVS-OUT-FILTER -s 192.0.2.20/32 -m ipvs --vproto 6 --vaddr 192.0.2.20 --vport 80 -j DROP",
	}
	if diff := cmp.Diff(wantLines, lines); diff != "" {
		t.Errorf("IPv4 rules (-want +got):\n%s", diff)
	}
}
