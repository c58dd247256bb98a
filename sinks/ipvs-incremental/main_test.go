package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/host/kernel"
	"github.com/proxysinks/proxysinks/sinks/ipvssink"
	"github.com/proxysinks/proxysinks/sinks/sinktest"
)

// TestDryRunSameAsFullState runs the dry run on the example cluster, as a
// node with an IPv4 and an IPv6 address, and requires exactly the kernel
// operations the full-state sink prints (its golden file).
func TestDryRunSameAsFullState(t *testing.T) {
	// The host's IPv6 decides the families (dataplane.HostFamilies): a
	// dual-stack host here, whatever this machine has.
	ipvssink.HostSysctl = dataplanetest.HostSysctl(t, true)
	t.Cleanup(func() { ipvssink.HostSysctl = kernel.Sysctl{} })
	sinktest.Same(t, run, filepath.Join("..", "ipvs-fullstate", "testdata", "dryrun.golden"), "ipvs-incremental", "--dry-run", "--from-file", "../../examples/cluster",
		"--node-name", "node-1", "--node-address", "192.168.1.10,fd00:1::10",
		"--metrics-bind-address", "", "--healthz-bind-address", "")
}

// TestBadFlags: the flags are the runtime's, with its errors.
func TestBadFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	status := run([]string{"ipvs-incremental", "--dry-run", "--scheduling-method", "fastest"}, &stdout, &stderr)
	if status != 2 || !strings.Contains(stderr.String(), `ipvs-incremental: --scheduling-method: unknown scheduler "fastest"`) {
		t.Errorf("status %d, stderr %q", status, stderr.String())
	}
}
