package vmtests

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// SoakVMEnv set to "1" runs TestSoakVM (make soak-vm).
const SoakVMEnv = "PROXYSINKS_SOAK_VM"

// TestSoakVM runs bench.TestSoak on the real kernel in the VM
// (SOAK_KERNEL=real: each IPVS sink, then a fresh sync for reference, in
// a network namespace of its own prepared as a node): churn for
// SOAK_DURATION (default 3m) at SOAK_SERVICES (default 2,000) services x 10
// endpoints, RSS and goroutines flat after the warm-up, no error left, and
// each sink's kernel state equal to the fresh sync's. It runs only with
// PROXYSINKS_SOAK_VM=1 (make soak-vm).
func TestSoakVM(t *testing.T) {
	if os.Getenv(SoakVMEnv) != "1" {
		t.Skip("the VM soak runs only with " + SoakVMEnv + "=1 (make soak-vm)")
	}
	vm.Require(t)
	bin, _ := vm.CompileTests(t, "github.com/proxysinks/proxysinks/bench")
	env := []string{"SOAK_KERNEL=real"}
	for _, v := range []struct{ name, def string }{
		{"SOAK_DURATION", "3m"}, {"SOAK_INTERVAL", "10s"}, {"SOAK_SERVICES", "2000"}, {"SOAK_SINKS", ""},
	} {
		if s := os.Getenv(v.name); s != "" {
			v.def = s
		}
		if v.def != "" {
			env = append(env, v.name+"="+v.def)
		}
	}
	dur, err := time.ParseDuration(os.Getenv("SOAK_DURATION"))
	if err != nil || dur <= 0 {
		dur = 3 * time.Minute
	}
	status, err := vm.Run(context.Background(), "bench.test -test.run '^TestSoak$' -test.v -test.timeout 0",
		vm.Options{Files: map[string]string{"bench.test": bin}, Env: env, Output: os.Stdout, Timeout: 2*dur + 10*time.Minute, MemoryMB: 3072})
	if err != nil {
		t.Fatal(err)
	}
	if status != 0 {
		t.Fatalf("the soak failed in the VM (exit status %d)", status)
	}
}
