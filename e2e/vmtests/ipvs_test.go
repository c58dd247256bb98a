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

// TestIPVSBenchVM runs the IPVS write benchmarks inside the VM and prints
// their results: netlinkraw/ipvs's BenchmarkFloor (the same operations
// pre-encoded, one ACK per 500 messages) and the bench module's
// BenchmarkIPVSCreate (netlinkraw/ipvs batched, batched 512 at a time, one
// by one, and moby/ipvs), for 1,000 and 10,000 services with 10
// destinations each.
//
// Each variant gets a freshly booted kernel: IPVS hashes the services of
// every namespace into one global table, and the kernel destroys a
// namespace holding thousands of services only minutes after its last
// reference goes, so variants sharing a kernel would slow each other down.
// It runs only with PROXYSINKS_BENCH_VM=1 (make bench): under TCG it takes
// minutes. PROXYSINKS_BENCHTIME (default 1x) sets the benchmarks'
// -test.benchtime.
func TestIPVSBenchVM(t *testing.T) {
	if os.Getenv(BenchVMEnv) != "1" {
		t.Skip("VM benchmarks run only with " + BenchVMEnv + "=1 (make bench)")
	}
	vm.Require(t)
	root, err := vm.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for name, pkg := range map[string]string{
		"bench.test": "github.com/proxysinks/proxysinks/bench",
		"ipvs.test":  "github.com/proxysinks/proxysinks/netlinkraw/ipvs",
	} {
		bin := filepath.Join(t.TempDir(), name)
		cmd := exec.Command("go", "test", "-c", "-o", bin, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("compile the benchmarks of %s: %v: %s", pkg, err, out)
		}
		files[name] = bin
	}
	benchtime := os.Getenv("PROXYSINKS_BENCHTIME")
	if benchtime == "" {
		benchtime = "1x"
	}
	for _, n := range []string{"1000", "10000"} {
		for _, v := range []struct{ bin, bench string }{
			{"ipvs.test", "Floor/^services=" + n + "$"},
			{"bench.test", "IPVSCreate/^services=" + n + "$/^ours-batched$"},
			{"bench.test", "IPVSCreate/^services=" + n + "$/^ours-batched-512$"},
			{"bench.test", "IPVSCreate/^services=" + n + "$/^ours-one-by-one$"},
			{"bench.test", "IPVSCreate/^services=" + n + "$/^moby-ipvs$"},
		} {
			// ip_vs's reference count with no service is the benchmarks'
			// sign that earlier namespaces are gone.
			status, err := vm.Run(context.Background(),
				"modprobe ip_vs && modprobe ip_vs_rr && export PROXYSINKS_IPVS_REFS=$(cat /sys/module/ip_vs/refcnt) && "+
					v.bin+" -test.run '^$' -test.benchmem -test.benchtime "+benchtime+" -test.bench '"+v.bench+"'",
				vm.Options{Files: files, Output: os.Stdout, Timeout: 30 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if status != 0 {
				t.Fatalf("benchmark %s failed in the VM (exit status %d)", v.bench, status)
			}
		}
	}
}
