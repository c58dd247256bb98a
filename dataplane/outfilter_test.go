package dataplane_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// TestEntryRulesOutFilter, on a real kernel (ipsets and iptables in a
// namespace): the KUBE-IPVS-OUT-FILTER drop of kube-proxy v1.37.2 follows
// the load-balancer set members a plan writes. A firewalled ingress
// virtual server without its node-access member gets the drop, in
// kube-proxy's exact text (both families); the node-access member removes
// it; a plan not touching those sets does not look at the rules; a repair
// with nothing changed writes nothing. The ipvs match needs xt_ipvs, so
// IPVS: the VM runs this (make test-vm).
func TestEntryRulesOutFilter(t *testing.T) {
	if !nstest.InVM() {
		nstest.Missing(t, "the iptables ipvs match (xt_ipvs needs IPVS): the VM runs this")
	}
	n, ns, _ := repairNode(t)
	if _, err := n.Repair(); err != nil {
		t.Fatal(err)
	}
	calls := 0
	a := dataplane.NewApplier(n.Kernel)
	a.EntryRules = func(f []xtables.Family) (bool, error) { calls++; return n.EnsureRules(f) }
	v4, v6 := netip.MustParseAddr("192.0.2.20"), netip.MustParseAddr("2001:db8::20")
	fw := func(a netip.Addr) render.SetEntry {
		f := xtables.IPv4
		if a.Is6() {
			f = xtables.IPv6
		}
		return render.SetEntry{Set: rules.SetName(f, rules.SetLoadBalancerFW), Addr: a, Protocol: render.TCP, Port: 80}
	}
	nodeAccess := render.SetEntry{Set: rules.SetLoadBalancerSrcIP, Addr: v4, Protocol: render.TCP, Port: 80, Addr2: v4}
	outFilter := func(tool string) []string {
		var out []string
		for _, l := range strings.Split(ns.MustRun(t, tool, "-t", "filter"), "\n") {
			if strings.HasPrefix(l, "-A KUBE-IPVS-OUT-FILTER") {
				out = append(out, l)
			}
		}
		return out
	}
	apply := func(p dataplane.Plan) {
		t.Helper()
		if err := a.Apply(p).Err(); err != nil {
			t.Fatal(err)
		}
	}

	apply(dataplane.Plan{AddEntries: []render.SetEntry{fw(v4), fw(v6)}})
	want4 := []string{"-A KUBE-IPVS-OUT-FILTER -s 192.0.2.20/32 -m ipvs --vproto 6 --vaddr 192.0.2.20 --vport 80 -j DROP"}
	want6 := []string{"-A KUBE-IPVS-OUT-FILTER -s 2001:db8::20/128 -m ipvs --vproto 6 --vaddr 2001:db8::20 --vport 80 -j DROP"}
	if diff := cmp.Diff(want4, outFilter("iptables-save")); diff != "" {
		t.Errorf("IPv4 KUBE-IPVS-OUT-FILTER (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want6, outFilter("ip6tables-save")); diff != "" {
		t.Errorf("IPv6 KUBE-IPVS-OUT-FILTER (-want +got):\n%s", diff)
	}
	if wrote, err := n.Repair(); err != nil || len(wrote) != 0 {
		t.Errorf("repair with nothing changed wrote %v (%v)", wrote, err)
	}

	apply(dataplane.Plan{AddEntries: []render.SetEntry{nodeAccess}})
	if got := outFilter("iptables-save"); len(got) != 0 {
		t.Errorf("the node may reach the load balancer, yet it is dropped: %q", got)
	}
	if diff := cmp.Diff(want6, outFilter("ip6tables-save")); diff != "" {
		t.Errorf("IPv6 KUBE-IPVS-OUT-FILTER changed with an IPv4 entry (-want +got):\n%s", diff)
	}

	before := calls
	apply(dataplane.Plan{AddEntries: []render.SetEntry{{Set: rules.SetClusterIP, Addr: netip.MustParseAddr("10.96.0.1"), Protocol: render.TCP, Port: 443}}})
	if calls != before {
		t.Errorf("a plan without load-balancer firewall members ran EntryRules")
	}

	apply(dataplane.Plan{DelEntries: []render.SetEntry{nodeAccess, fw(v6)}})
	if diff := cmp.Diff(want4, outFilter("iptables-save")); diff != "" {
		t.Errorf("IPv4 after the node-access member went (-want +got):\n%s", diff)
	}
	if got := outFilter("ip6tables-save"); len(got) != 0 {
		t.Errorf("IPv6 drop left after its firewall member went: %q", got)
	}
}
