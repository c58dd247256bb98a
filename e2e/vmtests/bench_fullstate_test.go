package vmtests

import (
	"os"
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// BenchVMEnv set to "1" runs the benchmarks that boot the VM (make bench
// sets it): under TCG they take minutes, too long for every make test-vm.
const BenchVMEnv = "PROXYSINKS_BENCH_VM"

// TestFullStateBenchVM runs the full-state sink's real-kernel benchmark
// (bench.BenchmarkFullStateKernel: initial sync of 1,000 and 10,000
// services x 10 endpoints into IPVS, ipsets and the VIPs made local,
// bound on kube-ipvs0 or given local routes, with the moby/ipvs baseline
// at 1,000) once in the VM and prints its results, after the pre-encoded
// IPVS floor of the same sizes (netlinkraw/ipvs's BenchmarkFloor) in a VM
// just before. It fails if a benchmark fails its exact write counts.
func TestFullStateBenchVM(t *testing.T) {
	if os.Getenv(BenchVMEnv) != "1" {
		t.Skip("VM benchmarks run only with " + BenchVMEnv + "=1 (make bench)")
	}
	vm.RunTests(t, "github.com/proxysinks/proxysinks/netlinkraw/ipvs", "-test.run", "^$", "-test.bench", "^BenchmarkFloor$", "-test.benchtime", "1x")
	vm.RunTests(t, "github.com/proxysinks/proxysinks/bench", "-test.run", "^$", "-test.bench", "FullStateKernel",
		"-test.benchtime", "1x", "-test.benchmem")
}

// TestStatsBenchVM runs the IPVS sinks' --ipvs-stats scrape benchmark
// (sinks/ipvssink BenchmarkStatsScrape: one dump of 1,000 and 10,000
// virtual servers and their series, CPU per scrape) against the VM's
// kernel, with the fake-kernel and parsed-dump baselines of the same run.
func TestStatsBenchVM(t *testing.T) {
	if os.Getenv(BenchVMEnv) != "1" {
		t.Skip("VM benchmarks run only with " + BenchVMEnv + "=1 (make bench)")
	}
	vm.RunTests(t, "github.com/proxysinks/proxysinks/sinks/ipvssink", "-test.run", "^$", "-test.bench", "^BenchmarkStatsScrape$",
		"-test.benchtime", "20x", "-test.benchmem")
}
