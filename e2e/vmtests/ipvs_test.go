package vmtests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestIPVSKernelInVM runs netlinkraw/ipvs's kernel tests in the VM: the
// contract suite against the real IPVS, the raw transport tests, and the
// ipvsadm cross-check.
func TestIPVSKernelInVM(t *testing.T) {
	vm.RunTests(t, "github.com/proxysinks/proxysinks/netlinkraw/ipvs", "-test.run", "Kernel", "-test.v")
}

// BenchmarkIPVSInVM runs the bench module's IPVS benchmarks (netlinkraw/ipvs
// batched and one by one, and moby/ipvs, in the same run) inside the VM, and
// prints their results. It runs them once per invocation, whatever b.N:
// each iteration inside creates up to 110,000 kernel objects in a fresh
// namespace. PROXYSINKS_BENCHTIME (default 1x) sets their -test.benchtime.
func BenchmarkIPVSInVM(b *testing.B) {
	vm.Require(b)
	root, err := vm.WorkspaceRoot()
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "bench.test")
	cmd := exec.Command("go", "test", "-c", "-o", bin, "github.com/proxysinks/proxysinks/bench")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("compile the bench module's benchmarks: %v: %s", err, out)
	}
	benchtime := os.Getenv("PROXYSINKS_BENCHTIME")
	if benchtime == "" {
		benchtime = "1x"
	}
	b.ResetTimer()
	status, err := vm.Run(context.Background(),
		"bench.test -test.run '^$' -test.bench IPVSCreate -test.benchmem -test.benchtime "+benchtime,
		vm.Options{Files: map[string]string{"bench.test": bin}, Output: os.Stdout, Timeout: 60 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	if status != 0 {
		b.Fatalf("benchmarks failed in the VM (exit status %d)", status)
	}
}
