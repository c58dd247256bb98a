package vmtests

import (
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestLinkInVM runs netlinkraw/link's tests in the VM, where dummy links
// exist: kube-ipvs0 with 1,000 VIPs bound, listed and unbound, node
// addresses, namespace isolation.
func TestLinkInVM(t *testing.T) {
	t.Parallel()
	vm.RunTests(t, "github.com/proxysinks/proxysinks/netlinkraw/link", "-test.v")
}
