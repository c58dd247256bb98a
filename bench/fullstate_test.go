package bench

import (
	"net/netip"
	"runtime"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/fullstate"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
)

// The full-state sink's benchmarks (issue 5, item 9): a Callback of
// 10,000 services x 10 endpoints written to the kernel, in four cases:
//
//   - Initial: the first sync, into an empty kernel;
//   - NoChange: the same snapshot again, which must write nothing;
//   - OneEndpoint: one endpoint added to one service, which must write
//     exactly one destination;
//   - OnePercent: 100 services (1%) with one endpoint replaced, which must
//     write 100 destinations, quiesce 100 and remove those 100 (the fake
//     kernel has no connections, so they are reaped in the same sync).
//
// Each runs twice in the same run: "fake-kernel" writes to netlinkraw's
// fakes (IPVS over nltest, in-memory ipsets and dummy link), and reports
// the IPVS send/receive calls; "discard" writes to a Writer that drops
// everything, so its time and CPU are the sink's alone (render, diff, plan,
// batch), the "under 100 ms excluding the kernel" target. The exact counts
// (0 writes, exactly 1 destination write...) are checked on every iteration
// and fail the benchmark when violated; time and memory are reported.
//
// The same cases on the real kernel, at 1,000 and 10,000 services, are
// BenchmarkFullStateKernel (kernel_fullstate_test.go), run in the VM.

const (
	fsServices  = 10000
	fsEndpoints = 10
	// fsChanged is how many services the 1% case changes.
	fsChanged = fsServices / 100
)

// fsSink is one full-state controller over a writer.
type fsSink struct {
	ipvsSink
	c *fullstate.Controller
}

// newFsSink returns a controller writing to w (conn: its fake IPVS
// connection, nil for none).
func newFsSink(w *counting, conn *ipvs.Conn) *fsSink {
	c, last := fsController(w)
	return &fsSink{ipvsSink: ipvsSink{last: last, w: w, conn: conn}, c: c}
}

// sync feeds one snapshot and returns what it wrote; a failed sync fails
// the benchmark.
func (s *fsSink) sync(tb testing.TB, snap []*client.ServiceEndpoints) syncResult {
	tb.Helper()
	return s.round(tb, nil, nil, func() { fsFeed(s.c, snap) })
}

// sinkKinds are the full-state sink over each writer.
var sinkKinds = overWriters(newFsSink)

// BenchmarkFullStateInitial starts from a heap returned to the OS, as a
// starting process does: the first sync also pays the page faults of its
// memory. "discard-warm" first makes one untimed sync, so that its
// figures are the sink's work alone on a heap the runtime already holds.
func BenchmarkFullStateInitial(b *testing.B) {
	snap := dataplanetest.BenchCluster(fsServices, fsEndpoints)
	want := wantInitial(fsServices, fsEndpoints)
	kinds := append(sinkKinds[:len(sinkKinds):len(sinkKinds)],
		sinkKind[*fsSink]{"discard-warm", func(tb testing.TB) *fsSink { return newFsSink(discardWriter(tb)) }})
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			mem := startMem()
			if k.name == "discard-warm" {
				k.new(b).sync(b, snap)
			}
			var m metrics
			s := initialRounds(b, &m, want, k.new, func(s *fsSink) (r syncResult) {
				m.timed(b, func() { r = s.sync(b, snap) })
				return r
			})
			m.done(b, &s.ipvsSink, false, mem)
			runtime.KeepAlive(s)
		})
	}
}

func BenchmarkFullStateNoChange(b *testing.B) {
	snap := dataplanetest.BenchCluster(fsServices, fsEndpoints)
	for _, k := range sinkKinds {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			mem := startMem()
			s := k.new(b)
			s.sync(b, snap)
			var m metrics
			b.StopTimer()
			b.ResetTimer()
			for range b.N {
				var r syncResult
				m.timed(b, func() { r = s.sync(b, snap) })
				// Target: a sync that changes nothing writes nothing.
				expect(b, "no-change sync", r, counts(0, 0))
				if r.syscalls != 0 {
					b.Fatalf("no-change sync made %d IPVS system calls, want 0", r.syscalls)
				}
				m.add(r)
			}
			m.done(b, &s.ipvsSink, false, mem)
			runtime.KeepAlive(s)
		})
	}
}

func BenchmarkFullStateOneEndpoint(b *testing.B) {
	for _, k := range sinkKinds {
		b.Run(k.name, func(b *testing.B) {
			snap := dataplanetest.BenchCluster(fsServices, fsEndpoints)
			b.ReportAllocs()
			mem := startMem()
			s := k.new(b)
			s.sync(b, snap)
			var m metrics
			b.StopTimer()
			b.ResetTimer()
			for i := range b.N {
				// A new endpoint (a scaled-up pod) in one service.
				se := snap[i%fsServices]
				se.Endpoints = append(se.Endpoints, dataplanetest.BenchEndpoint("ep-new", dataplanetest.BenchEndpointAddr(fsServices*fsEndpoints+i)))
				var r syncResult
				m.timed(b, func() { r = s.sync(b, snap) })
				// Target: exactly one destination write.
				m.expect(b, "one-endpoint sync", r, counts(0, 0, ipvs.OpCreateDestination, 1))
			}
			m.done(b, &s.ipvsSink, false, mem)
			runtime.KeepAlive(s)
		})
	}
}

func BenchmarkFullStateOnePercent(b *testing.B) {
	base := dataplanetest.BenchCluster(fsServices, fsEndpoints)
	which, changed := onePercent(base)
	for _, k := range sinkKinds {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			mem := startMem()
			s := k.new(b)
			s.sync(b, base)
			// The discard writer reports no destinations, so nothing is
			// reaped through it.
			want := wantReplaced(len(which), s.conn != nil)
			var m metrics
			b.StopTimer()
			b.ResetTimer()
			m.alternate(b, want, func(toChanged bool) (r syncResult) {
				snap := base
				if toChanged {
					snap = changed
				}
				m.timed(b, func() { r = s.sync(b, snap) })
				return r
			})
			m.done(b, &s.ipvsSink, false, mem)
			runtime.KeepAlive(s)
		})
	}
}

// TestFullStateCounts runs the benchmarks' cases at a small scale, so the
// exact-count targets are checked by plain go test too.
func TestFullStateCounts(t *testing.T) {
	const n, eps = 200, 10
	for _, k := range sinkKinds {
		t.Run(k.name, func(t *testing.T) {
			snap := dataplanetest.BenchCluster(n, eps)
			s := k.new(t)
			expect(t, "initial sync", s.sync(t, snap), wantInitial(n, eps))
			r := s.sync(t, snap)
			expect(t, "no-change sync", r, counts(0, 0))
			if r.syscalls != 0 {
				t.Errorf("no-change sync made %d IPVS system calls", r.syscalls)
			}
			snap[7].Endpoints = append(snap[7].Endpoints, dataplanetest.BenchEndpoint("ep-new", dataplanetest.BenchEndpointAddr(n*eps)))
			expect(t, "one-endpoint sync", s.sync(t, snap), counts(0, 0, ipvs.OpCreateDestination, 1))
			which := []int{0, 100}
			changed := fsWithReplaced(snap, which, func(i int) netip.Addr { return dataplanetest.BenchEndpointAddr(n*eps + 1 + i) })
			want := wantReplaced(len(which), s.conn != nil)
			expect(t, "replace sync", s.sync(t, changed), want)
			expect(t, "replace back sync", s.sync(t, snap), want)
		})
	}
}

// BenchmarkFullStatePhases splits the discard writer's syncs into the
// sink's phases, driven by hand as Controller.Callback drives them, and
// reports each phase's process CPU time: render (render.Render into the
// Manager's diffstores: rendering and recording every object), diff
// (Manager.Done: comparing with what was applied), plan (Manager.Plan:
// the changed objects as a dataplane.Plan) and apply (dataplane.Applier
// building the IPVS operations and set-entry batches, and the Manager
// recording them as applied; the discard writer writes nothing). "initial"
// is a new Manager's first sync (on a warm heap), "no-change" the same
// snapshot again.
func BenchmarkFullStatePhases(b *testing.B) {
	snap := dataplanetest.BenchCluster(fsServices, fsEndpoints)
	cfg := render.Config{Scheduler: "rr", NodeAddresses: []netip.Addr{fsNodeIP}}
	for _, tc := range []struct {
		name    string
		initial bool
	}{{"initial", true}, {"no-change", false}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var phases [4]float64
			var m *fullstate.Manager
			sync := func(timed bool) {
				t := cpuTime()
				lap := func(i int) {
					now := cpuTime()
					if timed {
						phases[i] += now - t
					}
					t = now
				}
				m.Reset()
				for _, se := range snap {
					render.Render(se, cfg, m)
				}
				lap(0)
				m.Done()
				lap(1)
				p := m.Plan()
				lap(2)
				if res := m.ApplyPlan(p); res.Err() != nil {
					b.Fatal(res.Err())
				}
				lap(3)
			}
			if !tc.initial {
				m = fullstate.NewManager(dataplane.NewApplier(discard{}))
				sync(false)
			}
			b.ResetTimer()
			for range b.N {
				if tc.initial {
					b.StopTimer()
					m = nil
					runtime.GC()
					m = fullstate.NewManager(dataplane.NewApplier(discard{}))
					b.StartTimer()
				}
				sync(true)
			}
			for i, name := range []string{"render", "diff", "plan", "apply"} {
				b.ReportMetric(phases[i]*1e3/float64(b.N), name+"-cpu-ms/op")
			}
			b.ReportMetric((phases[0]+phases[1]+phases[2]+phases[3])*1e3/float64(b.N), "cpu-ms/op")
		})
	}
}
