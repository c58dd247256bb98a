package incremental

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/diff"
	"github.com/proxysinks/proxysinks/dataplane/render"
)

// BenchmarkLatencyKernel is the time from an event reaching the sink to
// the kernel programmed, on the running kernel (the VM: IPVS and dummy
// links; elsewhere it skips), at 1,000 and 10,000 services x 10 endpoints.
// After an untimed initial sync, every iteration adds one endpoint to one
// service (a scaled-up pod): the source's snapshot (made untimed) goes
// through client/diff.Events into the controller, whose Sync returns when
// the kernel has acknowledged the write. The time of each is one sample;
// p50, p99 and the maximum are reported (the runtime's coalescing
// interval, which delays a snapshot on purpose, is not in them), and
// cpu-us/op is the process's CPU time over the same spans. Every
// change must be exactly one kernel write, and at the end the kernel read
// back must hold every destination.
//
// In the VM: `PROXYSINKS_BENCH_VM=1 go test -run IncrementalLatencyVM
// ./e2e/vmtests`.
func BenchmarkLatencyKernel(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			requireKernel(b)
			node := newKernelNodeTB(b)
			a, nd := node.parts(b)
			c := New(render.Config{Scheduler: "rr", NodeAddresses: nodeIPs}, a, nd, benchLog)
			var last SyncStats
			c.OnSync = func(s SyncStats) { last = s }
			ev := diff.NewEvents(c)
			tr := client.NewTracker()
			ses := benchCluster(n, benchEndpoints)
			for _, se := range ses {
				tr.Set(se.Service.Key(), se)
			}
			t0 := time.Now()
			ev.Apply(tr.Snapshot())
			initial := time.Since(t0)
			if want := n*benchEndpoints + 5*n; last.Err != nil || last.Writes != want {
				b.Fatalf("initial sync: %d writes (want %d), %d failed: %v", last.Writes, want, last.Failed, last.Err)
			}
			var lat []time.Duration
			var cpu float64
			i := 0
			for b.Loop() {
				j := i % n
				old := ses[j]
				eps := append(old.Endpoints[:len(old.Endpoints):len(old.Endpoints)],
					benchEndpoint(fmt.Sprint("ep-new-", i), benchEndpointAddr(n*benchEndpoints+i)))
				ses[j] = &client.ServiceEndpoints{Service: old.Service, Endpoints: eps}
				tr.Set(old.Service.Key(), ses[j])
				snap := tr.Snapshot()
				c0, t := cpuSeconds(), time.Now()
				ev.Apply(snap)
				lat = append(lat, time.Since(t))
				cpu += cpuSeconds() - c0
				if last.Err != nil || last.Writes != 1 {
					b.Fatalf("one endpoint added: %d writes, want 1: %v", last.Writes, last.Err)
				}
				i++
			}
			if got, want := len(read(b, nd).Dests), n*benchEndpoints+i; got != want {
				b.Fatalf("the kernel holds %d destinations, want %d", got, want)
			}
			slices.Sort(lat)
			pct := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds())
			}
			b.ReportMetric(pct(0.5), "p50-us")
			b.ReportMetric(pct(0.99), "p99-us")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-us")
			b.ReportMetric(cpu*1e6/float64(i), "cpu-us/op")
			b.ReportMetric(initial.Seconds(), "initial-s")
		})
	}
}
