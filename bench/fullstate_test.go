package bench

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/fullstate"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset/ipsettest"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs/ipvstest"
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

// fsSink is one controller over a writer, with what the benchmarks read.
type fsSink struct {
	c    *fullstate.Controller
	last *fullstate.SyncStats
	w    *counting
	conn *ipvs.Conn // the fake IPVS connection; nil for discard
}

// newFakeSink returns a controller writing to a fresh fake node.
func newFakeSink(tb testing.TB) *fsSink {
	tb.Helper()
	conn, err := ipvstest.New().Conn()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	sets := ipsettest.New()
	if err := dataplane.CreateSets(sets, []xtables.Family{xtables.IPv4}, 1024, 65536); err != nil {
		tb.Fatal(err)
	}
	w := newCounting(&dataplane.Kernel{IPVSConn: conn, IPSet: sets, Link: dataplanetest.NewLinks(), Dummy: "kube-ipvs0"})
	c, last := fsController(w)
	return &fsSink{c: c, last: last, w: w, conn: conn}
}

// newDiscardSink returns a controller writing to nothing.
func newDiscardSink(testing.TB) *fsSink {
	w := newCounting(discard{})
	c, last := fsController(w)
	return &fsSink{c: c, last: last, w: w}
}

func (s *fsSink) syscalls() uint64 {
	if s.conn == nil {
		return 0
	}
	ctr := s.conn.Counters()
	return ctr.Sendmsg + ctr.Recvmsg
}

// syncResult is what one sync did.
type syncResult struct {
	stats    fullstate.SyncStats
	writes   writeCounts
	times    writeTimes
	syscalls uint64
}

// sync feeds one snapshot and returns what it wrote; a failed sync fails
// the benchmark.
func (s *fsSink) sync(tb testing.TB, snap []*client.ServiceEndpoints) syncResult {
	tb.Helper()
	s.w.take()
	s.w.takeTimes()
	before := s.syscalls()
	fsFeed(s.c, snap)
	r := syncResult{stats: *s.last, writes: s.w.take(), times: s.w.takeTimes(), syscalls: s.syscalls() - before}
	if r.stats.Err != nil || r.stats.Failed != 0 {
		tb.Fatalf("sync of %d services: %d objects failed: %v", len(snap), r.stats.Failed, r.stats.Err)
	}
	if r.stats.Writes != r.writes.total() {
		tb.Fatalf("sync stats count %d writes, the writer saw %d (%s)", r.stats.Writes, r.writes.total(), r.writes)
	}
	return r
}

// expect fails tb unless the sync wrote exactly want.
func expect(tb testing.TB, what string, got syncResult, want writeCounts) {
	tb.Helper()
	if got.stats.Writes != want.total() || got.writes.String() != want.String() {
		tb.Fatalf("%s: %d kernel writes (%s), want %d (%s)", what, got.stats.Writes, got.writes, want.total(), want)
	}
}

func counts(entries, addrs int, kv ...any) writeCounts {
	w := writeCounts{ipvs: map[ipvs.OpKind]int{}, entries: entries, addrs: addrs}
	for i := 0; i < len(kv); i += 2 {
		if n := kv[i+1].(int); n > 0 {
			w.ipvs[kv[i].(ipvs.OpKind)] = n
		}
	}
	return w
}

// wantInitial is the first sync of n services x eps endpoints: every
// server and destination created, every ClusterIP bound and put in
// KUBE-CLUSTER-IP and KUBE-IPVS-IPS, and every server recorded as the
// sink's in KUBE-PROXYSINKS-VS.
func wantInitial(n, eps int) writeCounts {
	return counts(3*n, n, ipvs.OpCreateService, n, ipvs.OpCreateDestination, n*eps)
}

// wantReplaced is the sync after changed services each had one endpoint
// replaced: the new destinations created, the old ones quiesced (weight 0,
// TCP) and, when the kernel reports them without connections, removed.
func wantReplaced(changed int, reaped bool) writeCounts {
	removed := 0
	if reaped {
		removed = changed
	}
	return counts(0, 0, ipvs.OpCreateDestination, changed, ipvs.OpUpdateDestination, changed, ipvs.OpRemoveDestination, removed)
}

// sinkKinds are the two writers every case runs against.
var sinkKinds = []struct {
	name string
	new  func(testing.TB) *fsSink
}{
	{"fake-kernel", newFakeSink},
	{"discard", newDiscardSink},
}

// metrics accumulates what the timed syncs of a benchmark did.
type metrics struct {
	writes, syscalls uint64
	cpu              float64
	times            writeTimes
}

func (m *metrics) add(r syncResult) {
	m.writes += uint64(r.stats.Writes)
	m.syscalls += r.syscalls
	m.times.ipvs += r.times.ipvs
	m.times.entries += r.times.entries
	m.times.addrs += r.times.addrs
	m.times.busy += r.times.busy
}

func ms(d time.Duration, n int) float64 { return float64(d) / 1e6 / float64(n) }

// report reports the counts per sync, the process CPU time, and the time
// spent in the writer (the kernel and its client library; the rest of
// ns/op is the sink's own work).
func (m *metrics) report(b *testing.B, s *fsSink) {
	b.ReportMetric(float64(m.writes)/float64(b.N), "kernel-writes/op")
	if s.conn != nil {
		b.ReportMetric(float64(m.syscalls)/float64(b.N), "ipvs-syscalls/op")
	}
	b.ReportMetric(m.cpu*1e3/float64(b.N), "cpu-ms/op")
	b.ReportMetric(ms(m.times.busy, b.N), "writer-ms/op")
}

// timed runs f between StartTimer and StopTimer and adds its CPU time.
func (m *metrics) timed(b *testing.B, f func()) {
	c0 := cpuTime()
	b.StartTimer()
	f()
	b.StopTimer()
	m.cpu += cpuTime() - c0
}

// BenchmarkFullStateInitial starts from a heap returned to the OS, as a
// starting process does: the first sync also pays the page faults of its
// memory. "discard-warm" first makes one untimed sync, so that its
// figures are the sink's work alone on a heap the runtime already holds.
func BenchmarkFullStateInitial(b *testing.B) {
	snap := dataplanetest.BenchCluster(fsServices, fsEndpoints)
	want := wantInitial(fsServices, fsEndpoints)
	kinds := append(sinkKinds[:len(sinkKinds):len(sinkKinds)], struct {
		name string
		new  func(testing.TB) *fsSink
	}{"discard-warm", newDiscardSink})
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			mem := startMem()
			if k.name == "discard-warm" {
				k.new(b).sync(b, snap)
			}
			var m metrics
			var s *fsSink
			b.StopTimer()
			b.ResetTimer()
			for range b.N {
				s = nil
				runtime.GC()
				s = k.new(b)
				var r syncResult
				m.timed(b, func() { r = s.sync(b, snap) })
				expect(b, "initial sync", r, want)
				m.add(r)
			}
			m.report(b, s)
			mem.report(b)
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
			m.report(b, s)
			mem.report(b)
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
				expect(b, "one-endpoint sync", r, counts(0, 0, ipvs.OpCreateDestination, 1))
				m.add(r)
			}
			m.report(b, s)
			mem.report(b)
			runtime.KeepAlive(s)
		})
	}
}

func BenchmarkFullStateOnePercent(b *testing.B) {
	base := dataplanetest.BenchCluster(fsServices, fsEndpoints)
	which := make([]int, 0, fsChanged)
	for i := 0; i < fsServices; i += fsServices / fsChanged {
		which = append(which, i)
	}
	changed := fsWithReplaced(base, which, func(i int) netip.Addr { return dataplanetest.BenchEndpointAddr(fsServices*fsEndpoints + i) })
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
			for i := range b.N {
				// Alternate between the two snapshots: each sync replaces
				// one endpoint in each of the 100 services.
				snap := changed
				if i%2 == 1 {
					snap = base
				}
				var r syncResult
				m.timed(b, func() { r = s.sync(b, snap) })
				expect(b, "1% sync", r, want)
				m.add(r)
			}
			m.report(b, s)
			mem.report(b)
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
