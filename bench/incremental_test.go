package bench

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"runtime"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/diff"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/incremental"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset/ipsettest"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs/ipvstest"
)

// The incremental sink's benchmarks, the same cases as the full-state
// sink's (fullstate_test.go) on the same cluster and writers, so that
// `go test -bench 'FullState|Incremental'` compares them in one run:
//
//   - Initial: the first sync of 10,000 services x 10 endpoints;
//   - OneEndpoint: one endpoint added to one service, at 1,000 and 10,000
//     services: exactly one kernel write, at a cost that does not depend
//     on the cluster's size;
//   - OnePercent: 100 services with one endpoint replaced: the same
//     writes as the full-state sink.
//
// A sync is a snapshot from the source (a client.Tracker, untimed: it is
// the source's work) turned into events by client/diff.Events and applied
// by the controller: the timed part is what the sink process does for it.

// incSink is one incremental controller over a writer, fed by a tracker.
type incSink struct {
	c    *incremental.Controller
	ev   *diff.Events
	tr   *client.Tracker
	last *incremental.SyncStats
	w    *counting
	conn *ipvs.Conn
}

func newIncSink(w *counting, conn *ipvs.Conn) *incSink {
	c := incremental.New(render.Config{Scheduler: "rr", NodeAddresses: []netip.Addr{fsNodeIP}},
		dataplane.NewApplier(w), nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s := &incSink{c: c, ev: diff.NewEvents(c), tr: client.NewTracker(), last: new(incremental.SyncStats), w: w, conn: conn}
	c.OnSync = func(st incremental.SyncStats) { *s.last = st }
	return s
}

func newIncFake(tb testing.TB) *incSink {
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
	return newIncSink(newCounting(&dataplane.Kernel{IPVSConn: conn, IPSet: sets, Link: dataplanetest.NewLinks(), Dummy: "kube-ipvs0"}), conn)
}

func newIncDiscard(testing.TB) *incSink { return newIncSink(newCounting(discard{}), nil) }

var incKinds = []struct {
	name string
	new  func(testing.TB) *incSink
}{
	{"fake-kernel", newIncFake},
	{"discard", newIncDiscard},
}

func (s *incSink) syscalls() uint64 {
	if s.conn == nil {
		return 0
	}
	ctr := s.conn.Counters()
	return ctr.Sendmsg + ctr.Recvmsg
}

// set records services in the source's tracker (untimed).
func (s *incSink) set(ses ...*client.ServiceEndpoints) *client.Snapshot {
	for _, se := range ses {
		s.tr.Set(se.Service.Key(), se)
	}
	return s.tr.Snapshot()
}

// sync applies a snapshot, timed by m when not nil, and returns what it
// wrote; a failed sync fails the benchmark.
func (s *incSink) sync(tb testing.TB, snap *client.Snapshot, m *metrics, b *testing.B) syncResult {
	tb.Helper()
	s.w.take()
	s.w.takeTimes()
	before := s.syscalls()
	if m != nil {
		m.timed(b, func() { s.ev.Apply(snap) })
	} else {
		s.ev.Apply(snap)
	}
	r := syncResult{stats: *s.last, writes: s.w.take(), times: s.w.takeTimes(), syscalls: s.syscalls() - before}
	if r.stats.Err != nil || r.stats.Failed != 0 {
		tb.Fatalf("sync: %d objects failed: %v", r.stats.Failed, r.stats.Err)
	}
	if r.stats.Writes != r.writes.total() {
		tb.Fatalf("sync stats count %d writes, the writer saw %d (%s)", r.stats.Writes, r.writes.total(), r.writes)
	}
	return r
}

func (m *metrics) reportInc(b *testing.B, s *incSink) {
	b.ReportMetric(float64(m.writes)/float64(b.N), "kernel-writes/op")
	if s.conn != nil {
		b.ReportMetric(float64(m.syscalls)/float64(b.N), "ipvs-syscalls/op")
	}
	b.ReportMetric(m.cpu*1e6/float64(b.N), "cpu-us/op")
	b.ReportMetric(ms(m.times.busy, b.N), "writer-ms/op")
}

func BenchmarkIncrementalInitial(b *testing.B) {
	snap := dataplanetest.BenchCluster(fsServices, fsEndpoints)
	want := wantInitial(fsServices, fsEndpoints)
	for _, k := range incKinds {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			mem := startMem()
			var m metrics
			var s *incSink
			b.StopTimer()
			b.ResetTimer()
			for range b.N {
				s = nil
				runtime.GC()
				s = k.new(b)
				first := s.set(snap...)
				r := s.sync(b, first, &m, b)
				expect(b, "initial sync", r, want)
				m.add(r)
			}
			m.reportInc(b, s)
			mem.report(b)
			runtime.KeepAlive(s)
		})
	}
}

func BenchmarkIncrementalOneEndpoint(b *testing.B) {
	for _, n := range []int{1000, fsServices} {
		for _, k := range incKinds {
			b.Run(fmt.Sprintf("services=%d/%s", n, k.name), func(b *testing.B) {
				snap := dataplanetest.BenchCluster(n, fsEndpoints)
				b.ReportAllocs()
				s := k.new(b)
				s.sync(b, s.set(snap...), nil, b)
				var m metrics
				b.StopTimer()
				b.ResetTimer()
				for i := range b.N {
					// A new endpoint (a scaled-up pod) in one service.
					old := snap[i%n]
					se := &client.ServiceEndpoints{Service: old.Service,
						Endpoints: append(old.Endpoints[:len(old.Endpoints):len(old.Endpoints)], dataplanetest.BenchEndpoint(fmt.Sprint("ep-new-", i), dataplanetest.BenchEndpointAddr(n*fsEndpoints+i)))}
					snap[i%n] = se
					next := s.set(se)
					r := s.sync(b, next, &m, b)
					// Target: exactly one destination write.
					expect(b, "one-endpoint sync", r, counts(0, 0, ipvs.OpCreateDestination, 1))
					m.add(r)
				}
				m.reportInc(b, s)
			})
		}
	}
}

func BenchmarkIncrementalOnePercent(b *testing.B) {
	base := dataplanetest.BenchCluster(fsServices, fsEndpoints)
	which := make([]int, 0, fsChanged)
	for i := 0; i < fsServices; i += fsServices / fsChanged {
		which = append(which, i)
	}
	changed := fsWithReplaced(base, which, func(i int) netip.Addr { return dataplanetest.BenchEndpointAddr(fsServices*fsEndpoints + i) })
	pick := func(snap []*client.ServiceEndpoints) []*client.ServiceEndpoints {
		out := make([]*client.ServiceEndpoints, 0, len(which))
		for _, i := range which {
			out = append(out, snap[i])
		}
		return out
	}
	toChanged, toBase := pick(changed), pick(base)
	for _, k := range incKinds {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			s := k.new(b)
			s.sync(b, s.set(base...), nil, b)
			want := wantReplaced(len(which), s.conn != nil)
			var m metrics
			b.StopTimer()
			b.ResetTimer()
			for i := range b.N {
				ses := toChanged
				if i%2 == 1 {
					ses = toBase
				}
				r := s.sync(b, s.set(ses...), &m, b)
				expect(b, "1% sync", r, want)
				m.add(r)
			}
			m.reportInc(b, s)
		})
	}
}

// TestIncrementalCounts runs the benchmarks' cases at a small scale with
// their exact-count targets, next to TestFullStateCounts.
func TestIncrementalCounts(t *testing.T) {
	const n, eps = 200, 10
	for _, k := range incKinds {
		t.Run(k.name, func(t *testing.T) {
			snap := dataplanetest.BenchCluster(n, eps)
			s := k.new(t)
			expect(t, "initial sync", s.sync(t, s.set(snap...), nil, nil), wantInitial(n, eps))
			expect(t, "no-change sync", s.sync(t, s.set(), nil, nil), counts(0, 0))
			se := &client.ServiceEndpoints{Service: snap[7].Service, Endpoints: append(snap[7].Endpoints[:eps:eps], dataplanetest.BenchEndpoint("ep-new", dataplanetest.BenchEndpointAddr(n*eps)))}
			expect(t, "one-endpoint sync", s.sync(t, s.set(se), nil, nil), counts(0, 0, ipvs.OpCreateDestination, 1))
		})
	}
}
