package ipvssink

import (
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// TestNodeCIDRsFollow: with --detect-local-mode=NodeCIDR the IPVS rules'
// cluster-IP masquerade rule follows the Node's pod CIDRs: installed
// without detection until the Node is known, rewritten when its pod CIDRs
// arrive or change, left alone by a snapshot without the Node.
func TestNodeCIDRsFollow(t *testing.T) {
	nstest.LookPath(t, "iptables-save")
	ns := nstest.New(t)
	c, err := ipset.Dial(&ipset.Config{NetNS: ns.FD()})
	if err != nil {
		nstest.Missing(t, "ipset in the kernel: %v", err)
	}
	defer c.Close()
	fams := []xtables.Family{xtables.IPv4}
	if _, err := dataplane.EnsureSets(c, fams, 1024, 65536); err != nil {
		t.Fatal(err)
	}
	cfg := runtime.Config{DetectLocalMode: xtables.LocalNodeCIDR, MasqueradeBit: 14}
	node := &dataplane.Node{
		Cfg:         dataplane.NodeConfig{Families: fams, Rules: rules.Config{MasqueradeBit: 14, Local: cfg.LocalTraffic(nil)}},
		Kernel:      &dataplane.Kernel{IPSet: c, Link: dataplanetest.NewLinks()},
		RulesRunner: xtables.ExecWith(ns.Do),
	}
	if _, err := node.EnsureRules(fams); err != nil {
		t.Fatal(err)
	}
	masq := func() string {
		t.Helper()
		for _, l := range strings.Split(ns.MustRun(t, "iptables-save", "-t", "nat"), "\n") {
			if strings.Contains(l, "KUBE-CLUSTER-IP") && strings.Contains(l, "KUBE-MARK-MASQ") {
				return l
			}
		}
		return ""
	}
	const rest = `-m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP `
	if got, want := masq(), "-A KUBE-SERVICES "+rest+"src,dst -j KUBE-MARK-MASQ"; got != want {
		t.Fatalf("before the Node: %q, want %q", got, want)
	}
	f := nodeCIDRs{node: node, c: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	withNode := func(cidr string) *client.Snapshot {
		s := client.NewSnapshot(nil, nil)
		if cidr != "" {
			s.Node = &client.Node{Name: "node-a", PodCIDRs: []netip.Prefix{netip.MustParsePrefix(cidr)}}
		}
		return s
	}
	for _, step := range []struct{ cidr, want string }{
		{"10.244.1.0/24", "! -s 10.244.1.0/24 "},
		{"", "! -s 10.244.1.0/24 "},
		{"10.244.7.0/24", "! -s 10.244.7.0/24 "},
	} {
		f.follow(withNode(step.cidr))
		if got, want := masq(), "-A KUBE-SERVICES "+step.want+rest+"dst,dst -j KUBE-MARK-MASQ"; got != want {
			t.Errorf("after a snapshot with pod CIDR %q: %q, want %q", step.cidr, got, want)
		}
	}
}
