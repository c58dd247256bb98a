package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/sinks/ipvssink/ipvssinktest"
	"github.com/proxysinks/proxysinks/sinks/sinktest"
)

// TestDryRunGolden runs the dry run on the example cluster, as a node with
// an IPv4 and an IPv6 address, and compares the kernel operations it prints.
func TestDryRunGolden(t *testing.T) {
	ipvssinktest.DualStackHost(t)
	sinktest.Golden(t, run, filepath.Join("testdata", "dryrun.golden"), sinktest.ExampleNode("ipvs-fullstate")...)
}

// TestBadFlags shows each bad value is a clear error naming the flag, at
// start, with exit status 2.
func TestBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--scheduling-method", "fastest"}, `--scheduling-method: unknown scheduler "fastest"`},
		{[]string{"--node-address", "10.0.0.300"}, `--node-address: "10.0.0.300" is not an IP address`},
		{[]string{"--cluster-cidr", "10.244.0.0"}, `--cluster-cidr: "10.244.0.0" is not a CIDR`},
		{[]string{"--masquerade-bit", "32"}, "--masquerade-bit: 32 is not in [0, 31]"},
		{[]string{"--weight", "-1"}, "--weight: -1 is not in [1, 65535]"},
		{[]string{"--sync-period", "0s"}, "--sync-period: 0s must be positive"},
		{[]string{"--from-file", "x", "--kubeconfig", "y"}, "give one source, not both"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		status := run(append([]string{"ipvs-fullstate", "--dry-run"}, tt.args...), &stdout, &stderr)
		if status != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: status %d, stderr %q; want 2 and %q", tt.args, status, stderr.String(), tt.want)
		}
	}
	// From the environment too.
	t.Setenv("PROXYSINKS_SCHEDULING_METHOD", "nope")
	var stdout, stderr bytes.Buffer
	if status := run([]string{"ipvs-fullstate", "--dry-run"}, &stdout, &stderr); status != 2 || !strings.Contains(stderr.String(), `"nope"`) {
		t.Errorf("bad environment value: status %d, stderr %q", status, stderr.String())
	}
}

func TestMissingSource(t *testing.T) {
	var stdout, stderr bytes.Buffer
	status := run([]string{"ipvs-fullstate", "--dry-run", "--from-file", "/nonexistent/manifests"}, &stdout, &stderr)
	if status != 1 || !strings.Contains(stderr.String(), "--from-file") {
		t.Errorf("status %d, stderr %q", status, stderr.String())
	}
}

// TestDryRunRoutes: with --ipvs-vip-binding=routes the dry run prints the
// golden operations, each IPv4 address binding a local route instead.
func TestDryRunRoutes(t *testing.T) {
	ipvssinktest.DualStackHost(t)
	out := sinktest.DryRun(t, run, append(sinktest.ExampleNode("ipvs-fullstate"), "--ipvs-vip-binding", "routes")...)
	golden, err := os.ReadFile(filepath.Join("testdata", "dryrun.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	routes := 0
	for _, l := range strings.Split(strings.TrimSuffix(string(golden), "\n"), "\n") {
		if a, ok := strings.CutPrefix(l, "address bind "); ok && !strings.Contains(a, ":") {
			l = "local route bind " + a
			routes++
		}
		want = append(want, l)
	}
	if routes == 0 {
		t.Fatal("the golden output binds no IPv4 address")
	}
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dry-run output with routes, sorted (-want +got):\n%s", diff)
	}
}

// TestInputRules: kube-proxy's input rules on a dry run (the IPVS
// incremental sink runs the same test): a bad external IP or source range
// is skipped alone, a legacy address and a mapped range are repaired, a
// zero-length range opens its family, a family without ranges is open,
// other-family and unknown-ipMode addresses and a mapped IPv6 endpoint
// are not served, a terminating endpoint without serving is the fallback.
func TestInputRules(t *testing.T) {
	ipvssinktest.DualStackHost(t)
	sinktest.Lines(t, sinktest.DryRun(t, run, sinktest.InputRules("ipvs-fullstate")...), ipvssinktest.InputRulesWant, ipvssinktest.InputRulesNot)
}
