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
	"github.com/proxysinks/proxysinks/incremental"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
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
	ipvsSink
	c  *incremental.Controller
	ev *diff.Events
	tr *client.Tracker
}

func newIncSink(w *counting, conn *ipvs.Conn) *incSink {
	c := incremental.New(render.Config{Scheduler: "rr", NodeAddresses: []netip.Addr{fsNodeIP}},
		dataplane.NewApplier(w), nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s := &incSink{ipvsSink: ipvsSink{last: new(dataplane.SyncStats), w: w, conn: conn}, c: c, ev: diff.NewEvents(c), tr: client.NewTracker()}
	c.OnSync = func(st dataplane.SyncStats) { *s.last = st }
	return s
}

// incKinds are the incremental sink over each writer.
var incKinds = overWriters(newIncSink)

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
	return s.round(tb, m, b, func() { s.ev.Apply(snap) })
}

func BenchmarkIncrementalInitial(b *testing.B) {
	snap := dataplanetest.BenchCluster(fsServices, fsEndpoints)
	want := wantInitial(fsServices, fsEndpoints)
	for _, k := range incKinds {
		b.Run(k.name, func(b *testing.B) {
			b.ReportAllocs()
			mem := startMem()
			var m metrics
			s := initialRounds(b, &m, want, k.new, func(s *incSink) syncResult {
				return s.sync(b, s.set(snap...), &m, b)
			})
			m.done(b, &s.ipvsSink, true, mem)
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
					m.expect(b, "one-endpoint sync", r, counts(0, 0, ipvs.OpCreateDestination, 1))
				}
				m.report(b, &s.ipvsSink, true)
			})
		}
	}
}

func BenchmarkIncrementalOnePercent(b *testing.B) {
	base := dataplanetest.BenchCluster(fsServices, fsEndpoints)
	which, changed := onePercent(base)
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
			m.alternate(b, want, func(changed bool) syncResult {
				ses := toBase
				if changed {
					ses = toChanged
				}
				return s.sync(b, s.set(ses...), &m, b)
			})
			m.report(b, &s.ipvsSink, true)
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
