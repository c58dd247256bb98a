package bench

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
)

// The scaffolding both IPVS sinks' benchmarks share (fullstate_test.go,
// incremental_test.go): the writers every case runs against, one round's
// result and its checks, and the metrics reported.

// ipvsSink is what the benchmarks read of an IPVS controller (either
// sink): its last round's stats, its writer, and the fake IPVS connection.
type ipvsSink struct {
	last *dataplane.SyncStats
	w    *counting
	conn *ipvs.Conn // the fake IPVS connection; nil for discard
}

// writerKinds are the two writers every case runs against: "fake-kernel"
// writes to a fresh fake node (dataplanetest.Node, IPv4), and reports the
// IPVS send/receive calls; "discard" writes to nothing.
var writerKinds = []struct {
	name string
	new  func(testing.TB) (*counting, *ipvs.Conn)
}{
	{"fake-kernel", fakeWriter},
	{"discard", discardWriter},
}

// onePercent returns the services of the 1% case (fsChanged of base's,
// spread evenly) and a copy of base where each of them has one endpoint
// replaced.
func onePercent(base []*client.ServiceEndpoints) (which []int, changed []*client.ServiceEndpoints) {
	which = make([]int, 0, fsChanged)
	for i := 0; i < fsServices; i += fsServices / fsChanged {
		which = append(which, i)
	}
	return which, fsWithReplaced(base, which, func(i int) netip.Addr { return dataplanetest.BenchEndpointAddr(fsServices*fsEndpoints + i) })
}

// sinkKind is a sink over one of the writers.
type sinkKind[S any] struct {
	name string
	new  func(testing.TB) S
}

// overWriters returns the sink mk builds over each writer.
func overWriters[S any](mk func(*counting, *ipvs.Conn) S) []sinkKind[S] {
	out := make([]sinkKind[S], 0, len(writerKinds))
	for _, k := range writerKinds {
		out = append(out, sinkKind[S]{k.name, func(tb testing.TB) S { return mk(k.new(tb)) }})
	}
	return out
}

// fakeWriter returns a counting writer over a fresh fake node.
func fakeWriter(tb testing.TB) (*counting, *ipvs.Conn) {
	k := fakeKernel(tb)
	return newCounting(k), k.IPVSConn
}

// fakeKernel returns a fresh fake node (IPv4) as a dataplane.Kernel.
func fakeKernel(tb testing.TB) *dataplane.Kernel {
	tb.Helper()
	return dataplanetest.NewNode(tb, []xtables.Family{xtables.IPv4}).Kernel(tb)
}

// discardWriter returns a counting writer over nothing.
func discardWriter(testing.TB) (*counting, *ipvs.Conn) { return newCounting(discard{}), nil }

func (s *ipvsSink) syscalls() uint64 {
	if s.conn == nil {
		return 0
	}
	ctr := s.conn.Counters()
	return ctr.Sendmsg + ctr.Recvmsg
}

// syncResult is what one sync did.
type syncResult struct {
	stats    dataplane.SyncStats
	writes   writeCounts
	times    writeTimes
	syscalls uint64
}

// round runs one round f, timed by m when not nil, and returns what it
// wrote; a failed round fails the benchmark.
func (s *ipvsSink) round(tb testing.TB, m *metrics, b *testing.B, f func()) syncResult {
	tb.Helper()
	s.w.take()
	s.w.takeTimes()
	before := s.syscalls()
	if m != nil {
		m.timed(b, f)
	} else {
		f()
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

// expect fails b unless r wrote exactly want, and adds r to m.
func (m *metrics) expect(b *testing.B, what string, r syncResult, want writeCounts) {
	b.Helper()
	expect(b, what, r, want)
	m.add(r)
}

// done reports m (report) and the heap after the benchmark (mem).
func (m *metrics) done(b *testing.B, s *ipvsSink, cpuMicros bool, mem memReport) {
	m.report(b, s, cpuMicros)
	mem.report(b)
}

// report reports the counts per sync, the process CPU time (in
// microseconds when cpuMicros, else milliseconds), and the time spent in
// the writer (the kernel and its client library; the rest of ns/op is the
// sink's own work).
func (m *metrics) report(b *testing.B, s *ipvsSink, cpuMicros bool) {
	b.ReportMetric(float64(m.writes)/float64(b.N), "kernel-writes/op")
	if s.conn != nil {
		b.ReportMetric(float64(m.syscalls)/float64(b.N), "ipvs-syscalls/op")
	}
	if cpuMicros {
		b.ReportMetric(m.cpu*1e6/float64(b.N), "cpu-us/op")
	} else {
		b.ReportMetric(m.cpu*1e3/float64(b.N), "cpu-ms/op")
	}
	b.ReportMetric(ms(m.times.busy, b.N), "writer-ms/op")
}

// timed runs f between StartTimer and StopTimer and adds its CPU time.
// initialRounds runs the initial-sync benchmark's b.N rounds: each builds
// a new sink with newSink after a GC (the last round's sink is garbage by
// then) and makes its first sync, which must write want. It returns the
// last sink.
func initialRounds[S any](b *testing.B, m *metrics, want writeCounts, newSink func(testing.TB) S, sync func(S) syncResult) S {
	var s, none S
	b.StopTimer()
	b.ResetTimer()
	for range b.N {
		s = none
		runtime.GC()
		s = newSink(b)
		m.expect(b, "initial sync", sync(s), want)
	}
	return s
}

// alternate runs the 1% benchmark's b.N syncs: sync(true) moves to the
// changed state, sync(false) back to the base, in turn (each replaces one
// endpoint in each of the changed services), and every sync must write
// want.
func (m *metrics) alternate(b *testing.B, want writeCounts, sync func(toChanged bool) syncResult) {
	for i := range b.N {
		m.expect(b, "1% sync", sync(i%2 == 0), want)
	}
}

func (m *metrics) timed(b *testing.B, f func()) {
	c0 := cpuTime()
	b.StartTimer()
	f()
	b.StopTimer()
	m.cpu += cpuTime() - c0
}
