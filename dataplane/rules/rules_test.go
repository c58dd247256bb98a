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

	cidr := Build(Config{MasqueradeBit: 14, ClusterCIDRs: []netip.Prefix{
		netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00::/64")}}, xtables.IPv4)
	want := []string{`-A KUBE-SERVICES ! -s 10.244.0.0/16 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ`}
	if diff := cmp.Diff(want, find(cidr, ChainServices, "cluster ip + port for masquerade")); diff != "" {
		t.Errorf("cluster CIDR masquerade (-want +got):\n%s", diff)
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
