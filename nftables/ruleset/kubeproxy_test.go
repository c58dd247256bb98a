package ruleset

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/source/file"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// load reads manifests as node's source would, with the service CIDRs.
func load(t testing.TB, path, node string) *client.Snapshot {
	t.Helper()
	src := file.New(file.Config{Path: path, NodeName: node, Needs: client.Needs{Node: true, ServiceCIDRs: true}})
	s, err := src.Load()
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	return s
}

// scriptLines returns a script's commands (no comments, no blank lines).
func scriptLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// ruleOrder returns each chain's rule commands in script order.
func ruleOrder(lines []string) map[string][]string {
	out := map[string][]string{}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 4 && f[0] == "add" && f[1] == "rule" {
			out[f[4]] = append(out[f[4]], l)
		}
	}
	return out
}

// TestKubeProxyOverall renders the clusters of kube-proxy's
// TestOverallNFTablesRules, its IPv6 twin and TestBadIPs and requires the commands
// kube-proxy's test expects (the same lines, and the same rule order in
// every chain).
func TestKubeProxyOverall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v6       bool
		pods     string
		nodeIP   string
		manifest string
		want     string
	}{
		{"ipv4", false, "10.0.0.0/8", "192.168.0.2", "testdata/overall-ipv4.yaml", "testdata/overall-ipv4.nft"},
		{"ipv6", true, "fd00:10::/64", "2001:db8::1", "testdata/overall-ipv6.yaml", "testdata/overall-ipv6.nft"},
		{"bad IPs", false, "10.0.0.0/8", "192.168.0.2", "testdata/badips.yaml", "testdata/badips.nft"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := netip.MustParseAddr(tc.nodeIP)
			cfg := Config{Local: xtables.LocalTraffic{CIDRs: []netip.Prefix{netip.MustParsePrefix(tc.pods)}}}
			cfg.SetNodePorts([]netip.Prefix{netip.PrefixFrom(node, node.BitLen())}, []netip.Addr{node})
			cfg.family(tc.v6).NodeIP = node
			rs, err := RenderFamily(load(t, tc.manifest, "test-node"), &cfg, tc.v6)
			if err != nil {
				t.Fatal(err)
			}
			wantText, err := os.ReadFile(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			got, want := scriptLines(rs.Script()), scriptLines(string(wantText))
			if diff := cmp.Diff(ruleOrder(want), ruleOrder(got)); diff != "" {
				t.Errorf("rule order per chain (-kube-proxy +ours):\n%s", diff)
			}
			slices.Sort(got)
			slices.Sort(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("commands (-kube-proxy +ours):\n%s", diff)
			}
		})
	}
}
