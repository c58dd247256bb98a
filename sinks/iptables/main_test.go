package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/sinks/iptablessink"
	"github.com/proxysinks/proxysinks/sinks/sinktest"
)

// TestDryRunGolden runs the dry run on the demo cluster as its node and
// compares the iptables-restore input it prints.
func TestDryRunGolden(t *testing.T) {
	sinktest.Golden(t, run, filepath.Join("testdata", "dryrun.golden"), "iptables", "--dry-run", "--from-file", "../../examples/demo/cluster.yaml",
		"--node-name", "demo-node", "--node-address", "192.168.1.10", "--cluster-cidr", "10.244.0.0/16",
		"--metrics-bind-address", "", "--healthz-bind-address", "")
}

// TestDryRunDualStack: a node with an IPv6 address gets the IPv6 ruleset
// too, after the IPv4 one.
func TestDryRunDualStack(t *testing.T) {
	out := sinktest.DryRun(t, run, sinktest.ExampleNode("iptables")...)
	v4, v6 := strings.Index(out, "(IPv4)\n"), strings.Index(out, "(IPv6)\n")
	if v4 < 0 || v6 < v4 || !strings.Contains(out[v4:v6], "-A KUBE-SVC-") || !strings.Contains(out[v6:], "-A KUBE-SVC-") {
		t.Errorf("want an IPv4 then an IPv6 restore input with services:\n%s", out)
	}
}

// TestRefusedFlags: the IPVS sinks' own flags, and --cleanup with
// --dry-run, are refused at start with exit status 2 and a message naming
// the flag, from the command line and from the environment; kube-proxy's
// IPVS flags are ignored with a warning naming them, as kube-proxy's
// iptables mode ignores them.
func TestRefusedFlags(t *testing.T) {
	tests := []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"--scheduling-method", "sh"}, 0, `--scheduling-method ignored: another proxy mode's setting`},
		{[]string{"--ipvs-scheduler", "rr"}, 0, `--scheduling-method ignored`},
		{[]string{"--weight", "2"}, 2, "--weight: does not apply"},
		{[]string{"--ipvs-strict-arp"}, 0, "--ipvs-strict-arp ignored"},
		{[]string{"--ipvs-tcp-timeout", "1m"}, 0, "--ipvs-tcp-timeout ignored"},
		{[]string{"--ipvs-tcpfin-timeout", "1m"}, 0, "--ipvs-tcpfin-timeout ignored"},
		{[]string{"--ipvs-udp-timeout", "1m"}, 0, "--ipvs-udp-timeout ignored"},
		{[]string{"--ipvs-exclude-cidrs", "10.0.0.0/8"}, 0, "--ipvs-exclude-cidrs ignored"},
		{[]string{"--ipvs-vip-binding", "routes"}, 2, "--ipvs-vip-binding: does not apply"},
		{[]string{"--cleanup"}, 2, "--cleanup and --dry-run: give one"},
		{[]string{"--masquerade-bit", "32"}, 2, "--masquerade-bit: 32 is not in [0, 31]"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		args := append([]string{"iptables", "--dry-run", "--from-file", "../../examples/demo/cluster.yaml"}, tt.args...)
		status := run(args, &stdout, &stderr)
		if status != tt.status || !strings.Contains(stderr.String(), tt.want) || (status != 0) != (stdout.Len() == 0) {
			t.Errorf("%v: status %d, stderr %q, stdout %d bytes; want %d, %q and output only with 0", tt.args, status, stderr.String(), stdout.Len(), tt.status, tt.want)
		}
	}
	t.Setenv("PROXYSINKS_IPVS_VIP_BINDING", "routes")
	var stdout, stderr bytes.Buffer
	if status := run([]string{"iptables", "--dry-run", "--from-file", "../../examples/demo/cluster.yaml"}, &stdout, &stderr); status != 2 || !strings.Contains(stderr.String(), "--ipvs-vip-binding") {
		t.Errorf("IPVS flag from the environment: status %d, stderr %q", status, stderr.String())
	}
}

// TestHelpListsNoIPVSFlag: --help shows none of the IPVS flags this sink
// ignores or refuses (iptablessink.IPVSOnly).
func TestHelpListsNoIPVSFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if status := run([]string{"iptables", "--help"}, &stdout, &stderr); status != 0 {
		t.Fatalf("--help: exit status %d: %s", status, stderr.String())
	}
	for _, f := range iptablessink.IPVSOnly() {
		name := f.Name()
		if strings.Contains(stdout.String(), "--"+name+" ") {
			t.Errorf("--help lists --%s, which the iptables sink does not honour:\n%s", name, stdout.String())
		}
	}
	if !strings.Contains(stdout.String(), "--masquerade-bit") {
		t.Errorf("--help lacks --masquerade-bit:\n%s", stdout.String())
	}
}

// TestInputRules: kube-proxy's input rules on a dry run (see the IPVS
// sinks' TestInputRules): a bad external IP or source range is skipped
// alone, a legacy address and a mapped range are repaired, a zero-length
// range opens its family, other-family and unknown-ipMode addresses and a
// mapped IPv6 endpoint are not served, a terminating endpoint without
// serving is the fallback.
func TestInputRules(t *testing.T) {
	out := sinktest.DryRun(t, run, sinktest.InputRules("iptables")...)
	want := []string{
		`-A KUBE-SERVICES -d 192.0.2.50 -p tcp -m comment --comment "default/lb:http external IP" -m tcp --dport 80 -j KUBE-EXT-JSLCNGWSGB5JPS5Q`,
		`-A KUBE-SERVICES -d 192.0.2.52 -p tcp -m comment --comment "default/lb:http external IP" -m tcp --dport 80 -j KUBE-EXT-JSLCNGWSGB5JPS5Q`,
		`-A KUBE-SERVICES -d 198.51.100.4 -p tcp -m comment --comment "default/lb:http loadbalancer IP" -m tcp --dport 80 -j KUBE-EXT-JSLCNGWSGB5JPS5Q`,
		`-A KUBE-SERVICES -d 2001:db8:2::1 -p tcp -m comment --comment "default/lb:http loadbalancer IP" -m tcp --dport 80 -j KUBE-EXT-JSLCNGWSGB5JPS5Q`,
		`-A KUBE-FW-E2OB6QLG3ZIAX25I -s 10.0.0.0/8 -m comment --comment "default/lb4:http loadbalancer IP" -j KUBE-EXT-E2OB6QLG3ZIAX25I`,
		`-A KUBE-SEP-4CS3TEL5OY5GZK2X -p tcp -m comment --comment "default/lb4:http" -m tcp -j DNAT --to-destination 10.244.1.7:8080`,
		`-A KUBE-SEP-43CBMVWRVWSEQZQX -p tcp -m comment --comment "default/lb:http" -m tcp -j DNAT --to-destination [fd00:244::5]:8080`,
	}
	sinktest.Lines(t, out, want, []string{"KUBE-FW-JSLCNGWSGB5JPS5Q", "/0 ", "2001:db8::50", "198.51.100.5", "10.244.1.6", "invalid"})
}
