package vmtests

import (
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestHostileKernelVM runs the kernel-side hostile suite (e2e/node's
// TestHostileKernel: the kernel state of a running sink changed by hand,
// case by case, repaired within one --sync-period, foreign objects
// untouched, a kill -9 restart writing nothing) in the VM, once with each
// IPVS sink. TestNodeE2EVM skips it.
func TestHostileKernelVM(t *testing.T) {
	for _, sink := range []string{"fullstate", "incremental"} {
		t.Run(sink, func(t *testing.T) {
			vm.RunTests(t, "github.com/proxysinks/proxysinks/e2e/node", "-test.run", "^"+hostileSuite+"$", "-test.v", "-test.timeout", "10m", "-sink", sink)
		})
	}
}

// hostileSuite is the e2e/node test TestHostileKernelVM runs.
const hostileSuite = "TestHostileKernel"
