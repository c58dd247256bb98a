package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/sinks/ipvssink/ipvssinktest"
	"github.com/proxysinks/proxysinks/sinks/sinktest"
)

// TestDryRunSameAsFullState runs the dry run on the example cluster, as a
// node with an IPv4 and an IPv6 address, and requires exactly the kernel
// operations the full-state sink prints (its golden file).
func TestDryRunSameAsFullState(t *testing.T) {
	ipvssinktest.DualStackHost(t)
	sinktest.Same(t, run, filepath.Join("..", "ipvs-fullstate", "testdata", "dryrun.golden"), sinktest.ExampleNode("ipvs-incremental")...)
}

// TestBadFlags: the flags are the runtime's, with its errors.
func TestBadFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	status := run([]string{"ipvs-incremental", "--dry-run", "--scheduling-method", "fastest"}, &stdout, &stderr)
	if status != 2 || !strings.Contains(stderr.String(), `ipvs-incremental: --scheduling-method: unknown scheduler "fastest"`) {
		t.Errorf("status %d, stderr %q", status, stderr.String())
	}
}

// TestInputRules: kube-proxy's input rules on a dry run, as for the
// full-state sink (its TestInputRules).
func TestInputRules(t *testing.T) {
	ipvssinktest.DualStackHost(t)
	sinktest.Lines(t, sinktest.DryRun(t, run, sinktest.InputRules("ipvs-incremental")...), ipvssinktest.InputRulesWant, ipvssinktest.InputRulesNot)
}
