package incremental

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/diff"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
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
// interval, which delays a snapshot on purpose, is not in them).
// thread-cpu-p50-us and thread-cpu-p99-us are the CPU time of the syncing
// thread over the same spans: what a change costs when nothing else
// competes for the CPU (on a loaded host, or a VM whose virtual CPUs wait
// for the host's, the wall-clock tail is mostly waiting for a CPU), and
// cpu-us/op is the whole process's CPU time over the spans, the garbage
// collector's work on other threads included. Every
// change must be exactly one kernel write, and at the end the kernel read
// back must hold every destination.
//
// With change=remove, every iteration first adds one endpoint, untimed,
// and then removes it, timed: the destination, which has no connections,
// is set to weight 0, its server's destinations are read for their
// connection counts (Applier.Reap) and it is removed, so every removal
// must be exactly two kernel writes, and at the end the kernel must hold
// the initial destinations alone.
//
// With resync=beside, split resyncs (StartResync) run back to back, as the
// runtime runs the periodic one: their kernel reads on another goroutine
// (through IPVS sockets of their own) during changes made 10 ms apart,
// each finish (the repair, which must write nothing)
// on the syncing goroutine between two changes, untimed: the longest a
// change arriving during a finish would wait is resync-finish-max-us, and
// resync-read-ms the mean read, which no change waits for.
//
// In the VM: `PROXYSINKS_BENCH_VM=1 go test -run IncrementalLatencyBenchVM
// ./e2e/vmtests`.
func BenchmarkLatencyKernel(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, beside := range []bool{false, true} {
			for _, remove := range []bool{false, true} {
				b.Run(fmt.Sprintf("services=%d/resync=%s/change=%s", n,
					map[bool]string{false: "none", true: "beside"}[beside],
					map[bool]string{false: "add", true: "remove"}[remove]), func(b *testing.B) {
					latencyKernel(b, n, beside, remove)
				})
			}
		}
	}
}

// latencyKernel is one case of BenchmarkLatencyKernel.
func latencyKernel(b *testing.B, n int, beside, remove bool) {
	requireKernel(b)
	node := newKernelNodeTB(b)
	a, nd := node.parts(b)
	if beside {
		// The applier writes through a second IPVS socket, the reads
		// go through nd's, as the sink's reads and writes do.
		node.parts(b)
	}
	c := New(render.Config{Scheduler: "rr", NodeAddresses: nodeIPs}, a, nd, benchLog)
	var last dataplane.SyncStats
	c.OnSync = func(s dataplane.SyncStats) { last = s }
	ev := diff.NewEvents(c)
	tr := client.NewTracker()
	ses := dataplanetest.BenchCluster(n, benchEndpoints)
	for _, se := range ses {
		tr.Set(se.Service.Key(), se)
	}
	t0 := time.Now()
	ev.Apply(tr.Snapshot())
	initial := time.Since(t0)
	if want := n*benchEndpoints + 5*n; last.Err != nil || last.Writes != want {
		b.Fatalf("initial sync: %d writes (want %d), %d failed: %v", last.Writes, want, last.Failed, last.Err)
	}
	var lat, onCPU, finishes []time.Duration
	var cpu float64
	var readTime time.Duration
	i := 0
	// The syncing goroutine keeps its thread, whose CPU time is
	// then the change's own (its system calls and the kernel's
	// work in them included).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// With beside, reads hands over the finish of each resync
	// read, and finished lets the next one start.
	type resyncRead struct {
		finish func() dataplane.SyncStats
		took   time.Duration
	}
	reads := make(chan resyncRead)
	finished := make(chan bool)
	if beside {
		go func() {
			for {
				read := c.StartResync()
				t := time.Now()
				finish := read()
				reads <- resyncRead{finish, time.Since(t)}
				if !<-finished {
					return
				}
			}
		}()
		defer func() { <-reads; finished <- false }()
	}
	for b.Loop() {
		if beside {
			// Changes 10 ms apart, untimed: two thousand of them span
			// several reads of 10,000 services.
			time.Sleep(10 * time.Millisecond)
		}
		select {
		case r := <-reads:
			readTime += r.took
			t := time.Now()
			st := r.finish()
			finishes = append(finishes, time.Since(t))
			if st.Err != nil || st.Writes != 0 {
				b.Fatalf("a resync beside the changes wrote %d objects: %v", st.Writes, st.Err)
			}
			finished <- true
		default:
		}
		j := i % n
		old := ses[j]
		eps := append(old.Endpoints[:len(old.Endpoints):len(old.Endpoints)],
			dataplanetest.BenchEndpoint(fmt.Sprint("ep-new-", i), dataplanetest.BenchEndpointAddr(n*benchEndpoints+i)))
		added := &client.ServiceEndpoints{Service: old.Service, Endpoints: eps}
		next, what, writes := added, "added", 1
		if remove {
			// Untimed: the endpoint the timed change removes.
			tr.Set(old.Service.Key(), added)
			ev.Apply(tr.Snapshot())
			if last.Err != nil || last.Writes != 1 {
				b.Fatalf("one endpoint added: %d writes, want 1: %v", last.Writes, last.Err)
			}
			// Weight 0, then Reap's removal.
			next, what, writes = old, "removed", 2
		}
		ses[j] = next
		tr.Set(old.Service.Key(), next)
		snap := tr.Snapshot()
		c0, th, t := cpuSeconds(), threadCPU(), time.Now()
		ev.Apply(snap)
		lat = append(lat, time.Since(t))
		onCPU = append(onCPU, threadCPU()-th)
		cpu += cpuSeconds() - c0
		if last.Err != nil || last.Writes != writes {
			b.Fatalf("one endpoint %s: %d writes, want %d: %v", what, last.Writes, writes, last.Err)
		}
		i++
	}
	want := n*benchEndpoints + i
	if remove {
		want = n * benchEndpoints
	}
	if got := len(read(b, nd).Dests); got != want {
		b.Fatalf("the kernel holds %d destinations, want %d", got, want)
	}
	pct := func(l []time.Duration, p float64) float64 {
		return float64(l[min(len(l)-1, int(p*float64(len(l))))].Microseconds())
	}
	slices.Sort(lat)
	slices.Sort(onCPU)
	b.ReportMetric(pct(lat, 0.5), "p50-us")
	b.ReportMetric(pct(lat, 0.99), "p99-us")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-us")
	b.ReportMetric(pct(onCPU, 0.5), "thread-cpu-p50-us")
	b.ReportMetric(pct(onCPU, 0.99), "thread-cpu-p99-us")
	b.ReportMetric(cpu*1e6/float64(i), "cpu-us/op")
	b.ReportMetric(initial.Seconds(), "initial-s")
	if beside {
		if len(finishes) == 0 {
			b.Fatal("no resync read ended during the changes")
		}
		slices.Sort(finishes)
		b.ReportMetric(float64(len(finishes)), "resyncs")
		b.ReportMetric(float64(readTime.Milliseconds())/float64(len(finishes)), "resync-read-ms")
		b.ReportMetric(float64(finishes[len(finishes)-1].Microseconds()), "resync-finish-max-us")
	}
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
