package vmtests

import (
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestNodeE2EVM runs the node end-to-end traffic tests in the VM, once
// with each IPVS sink (the hostile suite apart: TestHostileKernelVM).
func TestNodeE2EVM(t *testing.T) {
	for _, sink := range []string{"fullstate", "incremental"} {
		t.Run(sink, func(t *testing.T) {
			vm.RunTests(t, "github.com/proxysinks/proxysinks/e2e/node", "-test.v", "-test.skip", "^"+hostileSuite+"$", "-test.timeout", "20m", "-sink", sink)
		})
	}
}
