package vmtests

import (
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestConntrackKernelVM runs host/conntrack's kernel tests in the VM:
// flows created through ctnetlink and real DNAT'd UDP flows are flushed by
// target, IPv4 and IPv6, while other flows stay.
func TestConntrackKernelVM(t *testing.T) {
	t.Parallel()
	vm.RunTests(t, "github.com/proxysinks/proxysinks/host/conntrack", "-test.run", "Kernel", "-test.v")
}
