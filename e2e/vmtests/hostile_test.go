package vmtests

import (
	"os"
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestHostileKernelVM runs the kernel-side hostile suite (e2e/node's
// TestHostileKernel: the kernel state of a running sink changed by hand,
// case by case, repaired within one --sync-period, foreign objects
// untouched, a kill -9 restart writing nothing) in the VM, once with each
// IPVS sink. TestNodeE2EVM skips it.
func TestHostileKernelVM(t *testing.T) {
	t.Parallel()
	longVM(t)
	for _, sink := range ipvsSinks {
		t.Run(sink, func(t *testing.T) {
			vm.RunTestsWith(t, nodePkg, vm.Options{Files: sinkFiles(t, sink)}, "-test.run", "^"+hostileSuite+"$", "-test.v", "-test.timeout", "10m", "-sink", sink)
		})
	}
}

// hostileSuite is the e2e/node test TestHostileKernelVM runs.
const hostileSuite = "TestHostileKernel"

// longVM skips t unless PROXYSINKS_VM_LONG=1: the VM tests `make test`
// leaves to `make test-long`, so that it stays under 25 minutes from a cold
// Go cache (each takes minutes under TCG and covers what faster tests in
// `make test` cover for one sink or source).
func longVM(t *testing.T) {
	t.Helper()
	if os.Getenv("PROXYSINKS_VM_LONG") != "1" {
		t.Skip("a long VM test: make test-long runs it (PROXYSINKS_VM_LONG=1)")
	}
}
