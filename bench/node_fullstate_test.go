package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/controller"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/fullstate"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
)

// This file holds what the full-state benchmarks share: the cluster they
// sync, the writers they sync through, and the measurements they report.

// fsNodeIP is the node's address (NodePorts; none in the benchmark cluster).
var fsNodeIP = netip.MustParseAddr("192.168.1.10")

// fsWithReplaced returns a copy of snap where the first endpoint of every
// service whose index is in which is replaced by one with address ip(i).
// The other services are shared with snap.
func fsWithReplaced(snap []*client.ServiceEndpoints, which []int, ip func(i int) netip.Addr) []*client.ServiceEndpoints {
	out := slices.Clone(snap)
	for _, i := range which {
		se := *snap[i]
		se.Endpoints = slices.Clone(se.Endpoints)
		se.Endpoints[0] = dataplanetest.BenchEndpoint("ep-replaced", ip(i))
		out[i] = &se
	}
	return out
}

// fsFeed hands a snapshot to the controller as the sink runtime does
// (fullstate.Controller.Snapshot): the services one after the other.
func fsFeed(c *fullstate.Controller, snap []*client.ServiceEndpoints) {
	c.Sync(slices.Values(snap))
}

// discard is a dataplane.Writer that writes nothing and fails nothing: a
// sync through it costs only the sink's own work (render, diff, plan,
// batch), which is what the "sink CPU excluding the kernel" target bounds.
type discard struct{}

func (discard) IPVS(ops []ipvs.Op) []error                    { return make([]error, len(ops)) }
func (discard) AddEntries(_ string, es []ipset.Entry) []error { return make([]error, len(es)) }
func (discard) DelEntries(_ string, es []ipset.Entry) []error { return make([]error, len(es)) }
func (discard) Bind(as []netip.Addr) []error                  { return make([]error, len(as)) }
func (discard) Unbind(as []netip.Addr) []error                { return make([]error, len(as)) }
func (discard) Destinations(ipvs.Service) ([]ipvs.DestinationEntry, error) {
	return nil, nil
}

// writeCounts counts the objects a Writer was asked to write, by kind.
type writeCounts struct {
	ipvs    map[ipvs.OpKind]int
	entries int
	addrs   int
}

// writeTimes is the time spent inside a Writer (the kernel's share of a
// sync, and the client library's) by kind of object, and busy, the time
// some call ran (less than the kinds' sum where calls overlapped:
// Applier.Overlap).
type writeTimes struct {
	ipvs, entries, addrs time.Duration
	busy                 time.Duration
}

func (w writeCounts) total() int {
	n := w.entries + w.addrs
	for _, c := range w.ipvs {
		n += c
	}
	return n
}

func (w writeCounts) String() string {
	kinds := make([]ipvs.OpKind, 0, len(w.ipvs))
	for k := range w.ipvs {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	s := ""
	for _, k := range kinds {
		s += fmt.Sprintf("%s: %d, ", k, w.ipvs[k])
	}
	return s + fmt.Sprintf("set entries: %d, addresses: %d", w.entries, w.addrs)
}

// counting wraps a Writer and counts what passes through it, and the time
// it takes.
type counting struct {
	dataplane.Writer
	mu sync.Mutex
	n  writeCounts
	t  writeTimes
	// active is the number of calls running, busyFrom when the first of
	// them started.
	active   int
	busyFrom time.Time
}

func newCounting(w dataplane.Writer) *counting {
	return &counting{Writer: w, n: writeCounts{ipvs: map[ipvs.OpKind]int{}}}
}

// take returns the counts so far and starts again from zero.
func (c *counting) take() writeCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = writeCounts{ipvs: map[ipvs.OpKind]int{}}
	return n
}

// takeTimes returns the time spent in the writer so far and starts again
// from zero.
func (c *counting) takeTimes() writeTimes {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.t
	c.t = writeTimes{}
	return t
}

// track starts timing a call of the kind whose total is *d; the function
// it returns ends it.
func (c *counting) track(d *time.Duration) func() {
	c.mu.Lock()
	t0 := time.Now()
	if c.active == 0 {
		c.busyFrom = t0
	}
	c.active++
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		now := time.Now()
		*d += now.Sub(t0)
		if c.active--; c.active == 0 {
			c.t.busy += now.Sub(c.busyFrom)
		}
		c.mu.Unlock()
	}
}

func (c *counting) IPVS(ops []ipvs.Op) []error {
	c.mu.Lock()
	for _, op := range ops {
		c.n.ipvs[op.Kind]++
	}
	c.mu.Unlock()
	defer c.track(&c.t.ipvs)()
	return c.Writer.IPVS(ops)
}

func (c *counting) AddEntries(set string, es []ipset.Entry) []error {
	c.mu.Lock()
	c.n.entries += len(es)
	c.mu.Unlock()
	defer c.track(&c.t.entries)()
	return c.Writer.AddEntries(set, es)
}

func (c *counting) DelEntries(set string, es []ipset.Entry) []error {
	c.mu.Lock()
	c.n.entries += len(es)
	c.mu.Unlock()
	defer c.track(&c.t.entries)()
	return c.Writer.DelEntries(set, es)
}

func (c *counting) Bind(as []netip.Addr) []error {
	c.mu.Lock()
	c.n.addrs += len(as)
	c.mu.Unlock()
	defer c.track(&c.t.addrs)()
	return c.Writer.Bind(as)
}

func (c *counting) Unbind(as []netip.Addr) []error {
	c.mu.Lock()
	c.n.addrs += len(as)
	c.mu.Unlock()
	defer c.track(&c.t.addrs)()
	return c.Writer.Unbind(as)
}

// fsController returns a controller writing through w, without adoption
// (the fakes start empty), and a pointer to the stats of its last sync.
func fsController(w dataplane.Writer) (*fullstate.Controller, *dataplane.SyncStats) {
	return fsControllerReading(w, nil)
}

// fsControllerReading is fsController adopting what r reads before the
// first sync, as a starting sink does.
func fsControllerReading(w dataplane.Writer, r controller.Reader) (*fullstate.Controller, *dataplane.SyncStats) {
	return fsControllerWith(dataplane.NewApplier(w), r)
}

// fsControllerWith is fsControllerReading with the applier given.
func fsControllerWith(a *dataplane.Applier, r controller.Reader) (*fullstate.Controller, *dataplane.SyncStats) {
	c := fullstate.NewController(render.Config{Scheduler: "rr", NodeAddresses: []netip.Addr{fsNodeIP}},
		a, r, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var last dataplane.SyncStats
	c.OnSync = func(s dataplane.SyncStats) { last = s }
	return c, &last
}

// cpuTime returns the process's user plus system CPU time so far.
func cpuTime() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// resetPeakRSS resets the process's peak resident set size (VmHWM), so
// that the next reading is this benchmark's peak. It is best effort
// (Linux >= 4.0, writing "5" to clear_refs).
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS returns VmHWM from /proc/self/status, in bytes, or 0.
func peakRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "VmHWM:" {
			kb, err := strconv.ParseFloat(string(f[1]), 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}

// memReport measures a benchmark's memory: the live heap after its
// syncs, and the process's peak RSS while it ran.
type memReport struct{}

// startMem returns the heap to the OS and resets the peak RSS, so that
// what earlier benchmarks left behind does not count.
func startMem() memReport {
	debug.FreeOSMemory()
	resetPeakRSS()
	return memReport{}
}

func (memReport) report(b *testing.B) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
	if p := peakRSS(); p > 0 {
		b.ReportMetric(p/(1<<20), "peak-RSS-MB")
	}
}
