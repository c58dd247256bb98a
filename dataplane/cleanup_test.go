package dataplane_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs/ipvstest"
)

// TestCleanup: --cleanup of an IPVS sink removes what it programmed (a
// recorded virtual server, a node port kube-proxy left, the rules, sets
// and addresses) and leaves a foreign virtual server, ipset and chain.
// Real ipsets and iptables in a fresh network namespace, the IPVS fake.
func TestCleanup(t *testing.T) {
	n, ns, _ := repairNode(t)
	fake := ipvstest.New()
	conn, err := fake.Conn()
	if err != nil {
		t.Fatal(err)
	}
	n.Kernel.IPVSConn = conn
	node := netip.MustParseAddr("192.168.1.10")
	n.Cfg.NodeAddresses = []netip.Addr{node}
	if _, err := n.Repair(); err != nil {
		t.Fatal(err)
	}
	cluster := render.VirtualServer{Protocol: render.TCP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 80}
	nodePort := render.VirtualServer{Protocol: render.TCP, Addr: node, Port: 30080}
	foreign := render.VirtualServer{Protocol: render.TCP, Addr: netip.MustParseAddr("10.1.1.1"), Port: 80}
	rs := dataplane.Plan{
		CreateServers: []dataplane.Server{{VS: cluster, Opts: render.ServerOptions{Scheduler: "rr"}}, {VS: nodePort, Opts: render.ServerOptions{Scheduler: "rr"}},
			{VS: foreign, Opts: render.ServerOptions{Scheduler: "rr"}}},
		CreateDests: []dataplane.Dest{{D: render.Destination{Server: cluster, Addr: netip.MustParseAddr("10.244.1.5"), Port: 8080}, Opts: render.DestOptions{Weight: 1}}},
		Bind:        []netip.Addr{cluster.Addr},
		AddEntries: []render.SetEntry{{Set: rules.SetClusterIP, Addr: cluster.Addr, Protocol: render.TCP, Port: 80},
			{Set: rules.SetVirtualServers, Addr: cluster.Addr, Protocol: render.TCP, Port: 80}},
	}
	if res := dataplane.NewApplier(n.Kernel).Apply(rs); res.Err() != nil {
		t.Fatal(res.Err())
	}
	if err := n.Kernel.IPSet.Create(ipset.Set{Name: "FOREIGN", Type: ipset.HashIP, Family: ipset.INET}); err != nil {
		t.Fatal(err)
	}
	ns.MustRun(t, "iptables", "-t", "nat", "-N", "FOREIGN-CHAIN")
	ns.MustRun(t, "iptables", "-t", "nat", "-A", "PREROUTING", "-j", "FOREIGN-CHAIN")

	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		if out := ns.MustRun(t, tool); !strings.Contains(out, "-j KUBE-SERVICES") {
			t.Fatalf("%s before Cleanup lacks the sink's rules (another back end?):\n%s", tool, out)
		}
	}

	removed, err := n.Cleanup()
	if err != nil {
		t.Fatalf("Cleanup: %v (removed %q)", err, removed)
	}
	svcs, err := conn.Services()
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, s := range svcs {
		left = append(left, s.Service.Address.String())
	}
	if diff := cmp.Diff([]string{"10.1.1.1"}, left); diff != "" {
		t.Errorf("virtual servers left (-want +got):\n%s", diff)
	}
	if _, err := n.Kernel.IPSet.Header("FOREIGN"); err != nil {
		t.Errorf("the foreign ipset went: %v", err)
	}
	for _, f := range n.Cfg.Families {
		for _, name := range rules.Sets(f) {
			if _, err := n.Kernel.IPSet.Header(name); !ipset.IsNotExist(err) {
				t.Errorf("ipset %s left (%v)", name, err)
			}
		}
	}
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out := ns.MustRun(t, tool)
		if slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return strings.Contains(l, "KUBE-") }) {
			t.Errorf("%s still has KUBE- rules or chains:\n%s", tool, out)
		}
		if tool == "iptables-save" && !strings.Contains(out, "-A PREROUTING -j FOREIGN-CHAIN") {
			t.Errorf("the foreign chain and its jump went:\n%s", out)
		}
	}
	if addrs, _ := n.Kernel.Link.Addresses(n.Cfg.Dummy); len(addrs) != 0 {
		t.Errorf("addresses left on %s: %v", n.Cfg.Dummy, addrs)
	}
	if _, err := n.Cleanup(); err != nil {
		t.Errorf("a second Cleanup: %v", err)
	}
}
