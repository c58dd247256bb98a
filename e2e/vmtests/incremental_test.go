package vmtests

import (
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestIncrementalKernelVM runs the equivalence of the two IPVS sinks on
// the VM's kernel: random cluster states with injected failures, drift and
// restarts, the kernel state read back by both sinks' reader and compared
// with ipvsadm -Sn, ipset save, ip addr and iptables-save.
func TestIncrementalKernelVM(t *testing.T) {
	t.Parallel()
	vm.RunTests(t, "github.com/proxysinks/proxysinks/incremental", "-test.v", "-test.run", "EquivalenceKernel")
}
