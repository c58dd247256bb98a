package vmtests

import (
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestDataplaneKernelVM runs the kernel tests of the dataplane and of the
// host tooling under it (modules, sysctls, iptables back ends and the
// nf_tables generation, IPVS mode's iptables rules with nft and legacy,
// IPVS mode's modules and sysctls, the KUBE-IPVS-OUT-FILTER drops that
// follow set members) on the VM's kernel.
func TestDataplaneKernelVM(t *testing.T) {
	t.Parallel()
	t.Run("kernel", func(t *testing.T) {
		vm.RunTests(t, "github.com/proxysinks/proxysinks/host/kernel", "-test.v")
	})
	t.Run("xtables", func(t *testing.T) {
		vm.RunTests(t, "github.com/proxysinks/proxysinks/host/xtables", "-test.v")
	})
	t.Run("rules", func(t *testing.T) {
		vm.RunTests(t, "github.com/proxysinks/proxysinks/dataplane/rules", "-test.v")
	})
	t.Run("entry-rules", func(t *testing.T) {
		vm.RunTests(t, "github.com/proxysinks/proxysinks/dataplane", "-test.v", "-test.run", "EntryRules|IPVSSetupKernel")
	})
}
