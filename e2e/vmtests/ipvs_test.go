package vmtests

import (
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestIPVSKernelInVM runs netlinkraw/ipvs's kernel tests in the VM: the
// contract suite against the real IPVS, the raw transport tests, and the
// ipvsadm cross-check.
func TestIPVSKernelInVM(t *testing.T) {
	vm.RunTests(t, "github.com/proxysinks/proxysinks/netlinkraw/ipvs", "-test.run", "Kernel", "-test.v")
}
