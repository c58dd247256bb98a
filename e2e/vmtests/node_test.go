package vmtests

import (
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestNodeE2EVM runs the node end-to-end traffic tests in the VM.
func TestNodeE2EVM(t *testing.T) {
	vm.RunTests(t, "github.com/proxysinks/proxysinks/e2e/node", "-test.v", "-test.timeout", "20m")
}
