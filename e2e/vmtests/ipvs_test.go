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

// BenchmarkIPVSInVM runs the IPVS write benchmarks inside the VM and prints
// their results: netlinkraw/ipvs's BenchmarkFloor (the same operations
// pre-encoded, one ACK per 500), then the bench module's BenchmarkIPVSCreate
// (netlinkraw/ipvs batched and one by one, and moby/ipvs), in one boot. It runs them once per invocation, whatever b.N:
// each iteration inside creates up to 110,000 kernel objects in a fresh
// namespace. PROXYSINKS_BENCHTIME (default 1x) sets their -test.benchtime.
func BenchmarkIPVSInVM(b *testing.B) {
	vm.Require(b)
	root, err := vm.WorkspaceRoot()
	if err != nil {
		b.Fatal(err)
	}
	files := map[string]string{}
	for name, pkg := range map[string]string{
		"bench.test": "github.com/proxysinks/proxysinks/bench",
		"ipvs.test":  "github.com/proxysinks/proxysinks/netlinkraw/ipvs",
	} {
		bin := filepath.Join(b.TempDir(), name)
		cmd := exec.Command("go", "test", "-c", "-o", bin, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("compile the benchmarks of %s: %v: %s", pkg, err, out)
		}
		files[name] = bin
	}
	benchtime := os.Getenv("PROXYSINKS_BENCHTIME")
	if benchtime == "" {
		benchtime = "1x"
	}
	b.ResetTimer()
	// The floor (pre-encoded messages, one ACK per 500) first, then ours
	// batched, ours one by one and moby/ipvs, in one boot.
	flags := " -test.run '^$' -test.benchmem -test.benchtime " + benchtime
	status, err := vm.Run(context.Background(),
		// ip_vs's reference count with no service is the benchmarks'
		// sign that earlier namespaces are gone.
		"modprobe ip_vs && modprobe ip_vs_rr && export PROXYSINKS_IPVS_REFS=$(cat /sys/module/ip_vs/refcnt) && "+
			"ipvs.test -test.bench Floor"+flags+" && bench.test -test.bench IPVSCreate"+flags,
		vm.Options{Files: files, Output: os.Stdout, Timeout: 60 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	if status != 0 {
		b.Fatalf("benchmarks failed in the VM (exit status %d)", status)
	}
}
