package nodelocal

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/proxysinks/proxysinks/client/internal/cputime"
	"github.com/proxysinks/proxysinks/client/internal/gen"
)

// BenchmarkSnapshot builds the node-local state of 10,000 services x 10
// endpoints from API objects (convert, validate, compute) and takes the
// first full snapshot. heap-MB is the heap the state and its snapshot keep
// (the input objects excluded).
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			svcs, slices := gen.Cluster(n, 10)
			var heap float64
			var cpu time.Duration
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				before := cputime.HeapMB()
				c0 := cputime.Now()
				b.StartTimer()
				st := NewState(Config{NodeName: "node-1"})
				for _, s := range svcs {
					if err := st.SetService(s); err != nil {
						b.Fatal(err)
					}
				}
				for _, s := range slices {
					if err := st.SetSlice(s); err != nil {
						b.Fatal(err)
					}
				}
				snap := st.Snapshot()
				b.StopTimer()
				cpu += cputime.Now() - c0
				if snap.Len() != n || len(snap.Services()[0].Endpoints) != 10 {
					b.Fatalf("snapshot has %d services", snap.Len())
				}
				heap = cputime.HeapMB() - before
				runtime.KeepAlive(st)
				b.StartTimer()
			}
			b.ReportMetric(heap, "heap-MB")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(n*10), "endpoints")
		})
	}
}

// BenchmarkOneEndpointChange is the source side of one endpoint change in a
// cluster of 1,000 or 10,000 services: the slice update, the recomputation
// of its service and the next snapshot. The cost stays flat but for one
// copy of the sorted pointer list per snapshot (8 bytes a service).
func BenchmarkOneEndpointChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			svcs, slices := gen.Cluster(n, 10)
			st := NewState(Config{NodeName: "node-1"})
			for i := range svcs {
				_ = st.SetService(svcs[i])
				_ = st.SetSlice(slices[i])
			}
			st.Snapshot()
			versions := [2]any{}
			_, versions[0] = gen.ClusterService(n/2, 10, 0)
			_, versions[1] = gen.ClusterService(n/2, 10, 1)
			b.ReportAllocs()
			i := 0
			c0 := cputime.Now()
			for b.Loop() {
				i++
				_ = st.SetSlice(versionsSlice(versions, i))
				snap := st.Snapshot()
				if len(snap.Changes) != 1 {
					b.Fatalf("%d changes", len(snap.Changes))
				}
			}
			b.ReportMetric(float64((cputime.Now()-c0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

func versionsSlice(v [2]any, i int) *discoveryv1.EndpointSlice {
	return v[i%2].(*discoveryv1.EndpointSlice)
}
