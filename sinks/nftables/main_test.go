package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/sinks/nftablessink"
	"github.com/proxysinks/proxysinks/sinks/sinktest"
)

// demo is a dry run on the demo cluster as its node.
var demo = []string{"nftables", "--dry-run", "--from-file", "../../examples/demo/cluster.yaml",
	"--node-name", "demo-node", "--node-address", "192.168.1.10", "--cluster-cidr", "10.244.0.0/16",
	"--metrics-bind-address", "", "--healthz-bind-address", ""}

// TestDryRunGolden runs the dry run on the demo cluster as its node and
// compares the nft script it prints.
func TestDryRunGolden(t *testing.T) {
	sinktest.Golden(t, run, filepath.Join("testdata", "dryrun.golden"), demo...)
}

// TestDryRunDualStack: a node with an IPv6 address gets table ip6
// kube-proxy too, after table ip kube-proxy, each with services.
func TestDryRunDualStack(t *testing.T) {
	out := sinktest.DryRun(t, run, sinktest.ExampleNode("nftables")...)
	v4, v6 := strings.Index(out, "add table ip kube-proxy"), strings.Index(out, "add table ip6 kube-proxy")
	if v4 < 0 || v6 < v4 || !strings.Contains(out[v4:v6], "add chain ip kube-proxy service-") || !strings.Contains(out[v6:], "add chain ip6 kube-proxy service-") {
		t.Errorf("want an IPv4 then an IPv6 table with services:\n%s", out)
	}
}

// TestNodePortsPrimaryByDefault: without --nodeport-addresses NodePorts
// are served on the node's primary IP only (here --bind-address's), as in
// kube-proxy's nftables mode: the nodeport-ips set holds it and not the
// node's other address; --nodeport-addresses=all serves them on every
// local address (no nodeport-ips set, fib daddr type local).
func TestNodePortsPrimaryByDefault(t *testing.T) {
	args := []string{"nftables", "--dry-run", "--from-file", "../../examples/demo/cluster.yaml", "--node-name", "demo-node",
		"--node-address", "192.168.1.10,192.168.1.11", "--bind-address", "192.168.1.10", "--metrics-bind-address", "", "--healthz-bind-address", ""}
	sinktest.Lines(t, sinktest.DryRun(t, run, args...), []string{
		"add element ip kube-proxy nodeport-ips { 192.168.1.10 }",
		"add rule ip kube-proxy services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports",
	}, []string{"192.168.1.11", "fib daddr type local"})
	sinktest.Lines(t, sinktest.DryRun(t, run, append(args, "--nodeport-addresses", "all")...), []string{
		"add rule ip kube-proxy services fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports",
	}, []string{"nodeport-ips"})
}

// TestFlagClasses: the IPVS sinks' own flags, kube-proxy's alpha gate
// KubeProxyNFTablesLocalhostNodePorts, another proxy mode and --cleanup
// with --dry-run are refused at start with exit status 2 and a message
// naming them, from the command line and from the environment;
// kube-proxy's IPVS and iptables-mode flags are ignored with a warning
// naming them, as kube-proxy's nftables mode ignores them; kube-proxy's
// own spellings of what the sink does are accepted.
func TestFlagClasses(t *testing.T) {
	tests := []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"--scheduling-method", "sh"}, 0, `--scheduling-method ignored: another proxy mode's setting (kube-proxy's nftables mode ignores it too)`},
		{[]string{"--ipvs-scheduler", "rr"}, 0, `--scheduling-method ignored`},
		{[]string{"--ipvs-strict-arp"}, 0, "--ipvs-strict-arp ignored"},
		{[]string{"--ipvs-tcp-timeout", "1m"}, 0, "--ipvs-tcp-timeout ignored"},
		{[]string{"--ipvs-exclude-cidrs", "10.0.0.0/8"}, 0, "--ipvs-exclude-cidrs ignored"},
		{[]string{"--ipvs-sync-period", "10s"}, 0, "--ipvs-sync-period ignored: another proxy mode's (this sink takes --iptables-sync-period)"},
		{[]string{"--iptables-localhost-nodeports=false"}, 0, "--iptables-localhost-nodeports ignored: an iptables-mode setting"},
		{[]string{"--weight", "2"}, 2, "--weight: does not apply"},
		{[]string{"--ipvs-vip-binding", "routes"}, 2, "--ipvs-vip-binding: does not apply"},
		{[]string{"--ipvs-stats"}, 2, "--ipvs-stats: does not apply"},
		{[]string{"--feature-gates", "KubeProxyNFTablesLocalhostNodePorts=true"}, 2,
			"--feature-gates: KubeProxyNFTablesLocalhostNodePorts=true: the nftables sink does not serve NodePorts on localhost"},
		{[]string{"--feature-gates", "NFTablesNetlink=false"}, 0, "NFTablesNetlink=false ignored: the nftables sink always writes over netlink"},
		{[]string{"--feature-gates", "KubeProxyNFTablesLocalhostNodePorts=false,NFTablesNetlink=true"}, 0, ""},
		{[]string{"--proxy-mode", "nftables"}, 0, ""},
		{[]string{"--proxy-mode", "iptables"}, 2, `--proxy-mode: is "iptables", but this is the nftables sink`},
		{[]string{"--proxy-mode="}, 2, "--proxy-mode: is empty, which is kube-proxy's default mode iptables, but this is the nftables sink"},
		{[]string{"--iptables-sync-period", "10s", "--iptables-min-sync-period", "2s"}, 0, ""},
		{[]string{"--cleanup"}, 2, "--cleanup and --dry-run: give one"},
		{[]string{"--masquerade-bit", "32"}, 2, "--masquerade-bit: 32 is not in [0, 31]"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		args := append([]string{"nftables", "--dry-run", "--from-file", "../../examples/demo/cluster.yaml", "--node-name", "demo-node"}, tt.args...)
		status := run(args, &stdout, &stderr)
		if status != tt.status || !strings.Contains(stderr.String(), tt.want) || (status != 0) != (stdout.Len() == 0) {
			t.Errorf("%v: status %d, stderr %q, stdout %d bytes; want %d, %q and output only with 0", tt.args, status, stderr.String(), stdout.Len(), tt.status, tt.want)
		}
	}
	t.Setenv("PROXYSINKS_IPVS_VIP_BINDING", "routes")
	var stdout, stderr bytes.Buffer
	if status := run([]string{"nftables", "--dry-run", "--from-file", "../../examples/demo/cluster.yaml"}, &stdout, &stderr); status != 2 || !strings.Contains(stderr.String(), "--ipvs-vip-binding") {
		t.Errorf("IPVS flag from the environment: status %d, stderr %q", status, stderr.String())
	}
}

// TestHelpListsNoOtherSinksFlag: --help shows none of the flags this sink
// ignores or refuses (nftablessink.OtherSinks), and the ones it honours.
func TestHelpListsNoOtherSinksFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if status := run([]string{"nftables", "--help"}, &stdout, &stderr); status != 0 {
		t.Fatalf("--help: exit status %d: %s", status, stderr.String())
	}
	for _, f := range nftablessink.OtherSinks() {
		if name := f.Name(); strings.Contains(stdout.String(), "--"+name+" ") {
			t.Errorf("--help lists --%s, which the nftables sink does not honour:\n%s", name, stdout.String())
		}
	}
	for _, want := range []string{"--masquerade-bit", "--nodeport-addresses", "--proxy-mode", "--sync-period"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("--help lacks %s:\n%s", want, stdout.String())
		}
	}
}

// TestInputRules: kube-proxy's input rules on a dry run (see the iptables
// sink's TestInputRules): a bad external IP or source range is skipped
// alone, a legacy address and a mapped range are repaired, a zero-length
// range opens its family, other-family and unknown-ipMode addresses and a
// mapped IPv6 endpoint are not served, a terminating endpoint without
// serving is the fallback.
func TestInputRules(t *testing.T) {
	out := sinktest.DryRun(t, run, sinktest.InputRules("nftables")...)
	want := []string{
		"add element ip kube-proxy service-ips { 192.0.2.50 . tcp . 80 : goto external-D2RGPZ6L-default/lb/tcp/http }",
		"add element ip kube-proxy service-ips { 192.0.2.52 . tcp . 80 : goto external-D2RGPZ6L-default/lb/tcp/http }",
		"add element ip kube-proxy service-ips { 198.51.100.4 . tcp . 80 : goto external-D2RGPZ6L-default/lb/tcp/http }",
		"add element ip6 kube-proxy service-ips { 2001:db8:2::1 . tcp . 80 : goto external-D2RGPZ6L-default/lb/tcp/http }",
		"add rule ip kube-proxy firewall-4AYQHQGD-default/lb4/tcp/http ip saddr != { 10.0.0.0/8 } drop",
		"add rule ip kube-proxy service-4AYQHQGD-default/lb4/tcp/http meta l4proto tcp dnat to 10.244.1.7:8080",
		"add rule ip6 kube-proxy service-D2RGPZ6L-default/lb/tcp/http meta l4proto tcp dnat to [fd00:244::5]:8080",
	}
	sinktest.Lines(t, out, want, []string{"firewall-D2RGPZ6L", "/0 ", "2001:db8::50", "198.51.100.5", "10.244.1.6", "not-an-ip"})
}

// TestConfigFile: kube-proxy's file in nftables mode sets the sink as
// kube-proxy's nftables mode reads it: nftables.masqueradeBit is the mark
// of the rules (iptables.masqueradeBit is logged as ignored), and a
// --iptables-sync-period given beside it is dropped for the file's
// nftables.syncPeriod, as kube-proxy does.
func TestConfigFile(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.conf")
	body := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\n" +
		"nftables:\n  masqueradeBit: 3\n  syncPeriod: 7s\niptables:\n  masqueradeBit: 5\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	status := run(append(slices.Clone(demo), "--config", cfg, "--iptables-sync-period", "5s"), &stdout, &stderr)
	if status != 0 {
		t.Fatalf("status %d:\n%s", status, stderr.String())
	}
	for _, want := range []string{
		"--iptables-sync-period ignored: --config is given, and kube-proxy then takes nftables.syncPeriod from the file",
		"--config: iptables.masqueradeBit ignored: the nftables sink takes nftables.masqueradeBit",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	sinktest.Lines(t, stdout.String(), []string{
		"add rule ip kube-proxy masquerading mark and 0x00000008 != 0 mark set mark xor 0x00000008 masquerade fully-random",
	}, []string{"0x00004000", "0x00000020"})
}
