package vmtests

import (
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestDataplaneKernelVM runs the dataplane's kernel tests (modules, sysctls,
// iptables rules with nft and legacy, the KUBE-IPVS-OUT-FILTER drops that
// follow set members) on the VM's kernel.
func TestDataplaneKernelVM(t *testing.T) {
	t.Parallel()
	t.Run("kernel", func(t *testing.T) {
		vm.RunTests(t, "github.com/proxysinks/proxysinks/dataplane/kernel", "-test.v")
	})
	t.Run("rules", func(t *testing.T) {
		vm.RunTests(t, "github.com/proxysinks/proxysinks/dataplane/rules", "-test.v")
	})
	t.Run("entry-rules", func(t *testing.T) {
		vm.RunTests(t, "github.com/proxysinks/proxysinks/dataplane", "-test.v", "-test.run", "EntryRules")
	})
}
