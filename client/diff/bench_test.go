package diff

import (
	"fmt"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/internal/cputime"
	"github.com/proxysinks/proxysinks/client/internal/gen"
	"github.com/proxysinks/proxysinks/client/nodelocal"
)

// countingSink counts events.
type countingSink struct{ sets, deletes, syncs int }

func (c *countingSink) SetService(*client.Service)                           { c.sets++ }
func (c *countingSink) DeleteService(client.ServiceKey)                      { c.deletes++ }
func (c *countingSink) SetEndpoint(client.ServiceKey, *client.Endpoint)      { c.sets++ }
func (c *countingSink) DeleteEndpoint(client.ServiceKey, client.EndpointKey) { c.deletes++ }
func (c *countingSink) Sync()                                                { c.syncs++ }

// clusterSnapshots returns the state of a generated cluster with n
// services x 10 endpoints, and two snapshots that flip the readiness of one
// endpoint of one service back and forth, as a source delivers them.
func clusterSnapshots(b *testing.B, n int) (first *client.Snapshot, flips [2]*client.Snapshot) {
	svcs, slices := gen.Cluster(n, 10)
	st := nodelocal.NewState(nodelocal.Config{NodeName: "node-1"})
	for i := range svcs {
		if err := st.SetService(svcs[i]); err != nil {
			b.Fatal(err)
		}
		if err := st.SetSlice(slices[i]); err != nil {
			b.Fatal(err)
		}
	}
	first = st.Snapshot()
	for v := range 2 {
		_, es := gen.ClusterService(n/2, 10, 1-v)
		if err := st.SetSlice(es); err != nil {
			b.Fatal(err)
		}
		flips[v] = st.Snapshot()
		if len(flips[v].Changes) != 1 {
			b.Fatalf("flip lists %d changes", len(flips[v].Changes))
		}
	}
	return first, flips
}

// BenchmarkEventsOneEndpointChange is the adapter's cost for one endpoint
// change at 1,000 and 10,000 services: it follows the snapshot's Changes, so
// it is the same at both sizes. The Full variant compares every service (a
// snapshot without change information) for comparison.
func BenchmarkEventsOneEndpointChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		first, flips := clusterSnapshots(b, n)
		for _, compareAll := range []bool{false, true} {
			name := fmt.Sprintf("services=%d/changes", n)
			if compareAll {
				name = fmt.Sprintf("services=%d/full-compare", n)
			}
			b.Run(name, func(b *testing.B) {
				sink := &countingSink{}
				ev := NewEvents(sink)
				ev.Apply(first)
				sink.sets = 0
				b.ReportAllocs()
				i := 0
				c0 := cputime.Now()
				for b.Loop() {
					s := flips[i%2]
					if compareAll {
						s = full(s)
					}
					ev.Apply(s)
					i++
				}
				b.ReportMetric(float64((cputime.Now()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
				if sink.sets != i || sink.deletes != 0 {
					b.Fatalf("%d sets, %d deletes for %d one-endpoint changes", sink.sets, sink.deletes, i)
				}
				b.ReportMetric(float64(sink.sets)/float64(i), "events/op")
			})
		}
	}
}
