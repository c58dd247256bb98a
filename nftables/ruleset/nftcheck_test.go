package ruleset

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/host/xtables"
)

// nftCheck runs `nft -c -f -` on the script in a fresh network namespace
// (nft checks the transaction with the kernel and commits nothing); it
// skips when nft or unshare cannot run here.
func nftCheck(t *testing.T, script string) {
	t.Helper()
	nft, err := exec.LookPath("nft")
	if err != nil {
		t.Skip("nft is not installed: the syntax check needs it")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: nft -c needs a network namespace of its own")
	}
	if err := nftRun(nft, script); err != nil {
		t.Fatal(err)
	}
}

// nftRun runs nft -c -f - on the script in a new network namespace.
func nftRun(nft, script string) error {
	cmd := exec.Command("unshare", "-n", nft, "-c", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nft -c -f: %w\n%s", err, out.String())
	}
	return nil
}

// TestScriptCheckRefuses: the check fails a ruleset whose map element
// points to a chain it does not have.
func TestScriptCheckRefuses(t *testing.T) {
	nftCheck(t, "") // skips where the check cannot run
	v4, _, err := Render(generated(1, 1, false), Config{})
	if err != nil {
		t.Fatal(err)
	}
	v4.Chains = slices.DeleteFunc(v4.Chains, func(c Chain) bool { return strings.HasPrefix(c.Name, prefixService) })
	if err := nftRun("nft", v4.Script()); err == nil {
		t.Error("nft -c accepted a goto to a missing chain")
	}
}

// TestScriptsValid: every ruleset rendered from the example cluster (and
// kube-proxy's test clusters and a generated one with every kind of
// service), under each kind of configuration, is a script nft accepts.
func TestScriptsValid(t *testing.T) {
	node4, node6 := netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("fd00:1::10")
	restricted := Config{IPv4: Family{NodeIP: node4}, IPv6: Family{NodeIP: node6},
		Local: xtables.LocalTraffic{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")}}}
	restricted.SetNodePorts([]netip.Prefix{netip.PrefixFrom(node4, 32), netip.PrefixFrom(node6, 128)}, []netip.Addr{node4, node6, netip.MustParseAddr("127.0.0.1")})
	configs := map[string]Config{
		"primary":       restricted,
		"all addresses": {MasqueradeAll: true, MasqueradeBit: new(31)},
		"bridge":        {Local: xtables.LocalTraffic{Interface: "cbr0"}},
		"prefix":        {Local: xtables.LocalTraffic{Interface: "veth+"}},
	}
	type input struct {
		name, path, node string
	}
	inputs := []input{
		{"examples/cluster", "../../examples/cluster", "node-1"},
		{"kube-proxy ipv4", "testdata/overall-ipv4.yaml", "test-node"},
		{"kube-proxy ipv6", "testdata/overall-ipv6.yaml", "test-node"},
		{"kube-proxy bad IPs", "testdata/badips.yaml", "test-node"},
	}
	for _, in := range inputs {
		s := load(t, in.path, in.node)
		for cname, cfg := range configs {
			t.Run(in.name+"/"+cname, func(t *testing.T) {
				v4, v6, err := Render(s, cfg)
				if err != nil {
					t.Fatal(err)
				}
				nftCheck(t, v4.Script()+v6.Script())
			})
		}
	}
	t.Run("generated", func(t *testing.T) {
		v4, v6, err := Render(generated(80, 4, true), restricted)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(v4.Script(), "sctp") || !strings.Contains(v6.Script(), "affinity-") {
			t.Fatal("the generated cluster lacks SCTP or affinity")
		}
		nftCheck(t, v4.Script()+v6.Script())
	})
}
