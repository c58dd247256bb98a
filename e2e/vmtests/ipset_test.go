package vmtests

import (
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestIPSetInVM runs netlinkraw/ipset's kernel tests in the VM: the contract
// suite (every set type, both families, 100,000-entry batches), the
// protocol-6 run and the cross-check with the ipset CLI.
func TestIPSetInVM(t *testing.T) {
	t.Parallel()
	vm.RunTests(t, "github.com/proxysinks/proxysinks/netlinkraw/ipset", "-test.run", "Kernel|CLI", "-test.v")
}
