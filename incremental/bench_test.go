package incremental

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/fullstate"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
)

// The controller's own benchmarks: what the sink process spends, its
// events handed straight to it (bench/ has the same cases behind a source's
// snapshots and client/diff.Events, next to the full-state sink's). The
// writer discards everything, so the figures are the sink's work alone:
// render, reference counts, plan and batching. CPU is the process's
// (getrusage) over the whole loop, so the garbage collector's work for
// what the syncs allocate and keep is in it.

const benchEndpoints = 10

// discard writes nothing and fails nothing, counting what it was given.
type discard struct{ writes int }

func (d *discard) IPVS(ops []ipvs.Op) []error { d.writes += len(ops); return make([]error, len(ops)) }
func (d *discard) AddEntries(_ string, es []ipset.Entry) []error {
	d.writes += len(es)
	return make([]error, len(es))
}
func (d *discard) DelEntries(_ string, es []ipset.Entry) []error {
	d.writes += len(es)
	return make([]error, len(es))
}
func (d *discard) Bind(as []netip.Addr) []error   { d.writes += len(as); return make([]error, len(as)) }
func (d *discard) Unbind(as []netip.Addr) []error { d.writes += len(as); return make([]error, len(as)) }
func (d *discard) Destinations(ipvs.Service) ([]ipvs.DestinationEntry, error) {
	return nil, nil
}

var benchCfg = render.Config{Scheduler: "rr", NodeAddresses: []netip.Addr{netip.MustParseAddr("192.168.0.10")}}

// benchLog logs at the sinks' level (Info: a sync that wrote is one line)
// to nowhere.
var benchLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// cpuSeconds is the process's user plus system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func feed(c *Controller, ses []*client.ServiceEndpoints) {
	for _, se := range ses {
		c.SetService(se.Service)
		for _, ep := range se.Endpoints {
			c.SetEndpoint(se.Service.Key(), ep)
		}
	}
}

// BenchmarkOneEndpoint: one endpoint added to one service, at 1,000 and
// 10,000 services: exactly one kernel write (checked every time), at a
// cost that does not depend on the cluster's size. The services take the
// new endpoints in turn, so they grow by one endpoint every n iterations:
// compare sizes at the same growth (-benchtime 2000x at 1,000 services,
// 20000x at 10,000: two endpoints more each).
func BenchmarkOneEndpoint(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			ses := dataplanetest.BenchCluster(n, benchEndpoints)
			w := &discard{}
			c := New(benchCfg, dataplane.NewApplier(w), nil, benchLog)
			feed(c, ses)
			c.Sync()
			runtime.GC()
			b.ReportAllocs()
			i := 0
			c0 := cpuSeconds()
			for b.Loop() {
				w.writes = 0
				// A new endpoint, as the source hands it over.
				ep := dataplanetest.BenchEndpoint("ep-new-"+strconv.Itoa(i), dataplanetest.BenchEndpointAddr(n*benchEndpoints+i))
				c.SetEndpoint(ses[i%n].Service.Key(), ep)
				c.Sync()
				if w.writes != 1 {
					b.Fatalf("one endpoint added: %d kernel writes, want 1", w.writes)
				}
				i++
			}
			b.ReportMetric((cpuSeconds()-c0)*1e6/float64(b.N), "cpu-us/op")
		})
	}
}

// BenchmarkInitial: the first sync of 10,000 services x 10 endpoints, the
// full-state sink's ("fullstate", the baseline) and this one's
// ("incremental"), each from a collected heap. The writes are the same
// (checked).
func BenchmarkInitial(b *testing.B) {
	const n = 10000
	ses := dataplanetest.BenchCluster(n, benchEndpoints)
	want := n*benchEndpoints + 5*n // destinations; servers, bindings and 3 set entries (KUBE-CLUSTER-IP, KUBE-IPVS-IPS, KUBE-PROXYSINKS-VS)
	run := func(b *testing.B, sync func(w *discard) any) {
		b.ReportAllocs()
		var cpu float64
		var keep any
		for b.Loop() {
			b.StopTimer()
			keep = nil
			runtime.GC()
			w := &discard{}
			b.StartTimer()
			c0 := cpuSeconds()
			keep = sync(w)
			cpu += cpuSeconds() - c0
			if w.writes != want {
				b.Fatalf("initial sync: %d kernel writes, want %d", w.writes, want)
			}
		}
		b.ReportMetric(cpu*1e3/float64(b.N), "cpu-ms/op")
		// The heap the last sink keeps, the benchmark's cluster included.
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		runtime.KeepAlive(keep)
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
	}
	b.Run("fullstate", func(b *testing.B) {
		run(b, func(w *discard) any {
			c := fullstate.NewController(benchCfg, dataplane.NewApplier(w), nil, benchLog)
			c.Sync(slices.Values(ses))
			return c
		})
	})
	b.Run("incremental", func(b *testing.B) {
		run(b, func(w *discard) any {
			c := New(benchCfg, dataplane.NewApplier(w), nil, benchLog)
			feed(c, ses)
			c.Sync()
			return c
		})
	})
}
