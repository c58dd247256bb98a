package vmtests

import (
	"os"
	"testing"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestIncrementalLatencyBenchVM runs incremental.BenchmarkLatencyKernel in the
// VM: the time from one endpoint change reaching the incremental sink to
// the kernel programmed, at 1,000 and 10,000 services x 10 endpoints,
// 2,000 endpoints added, or 2,000 removed, per case, reported as p50, p99
// and maximum. It fails if an addition is not exactly one kernel write, a
// removal two, or the kernel read back does not hold the destinations it
// should.
func TestIncrementalLatencyBenchVM(t *testing.T) {
	if os.Getenv(BenchVMEnv) != "1" {
		t.Skip("VM benchmarks run only with " + BenchVMEnv + "=1 (make bench)")
	}
	vm.RunTests(t, "github.com/proxysinks/proxysinks/incremental", "-test.run", "^$", "-test.bench", "LatencyKernel",
		"-test.benchtime", "2000x", "-test.benchmem")
}
