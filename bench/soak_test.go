package bench

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/link"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// TestSoak (`make soak`; skipped unless SOAK_DURATION is set) churns a
// 10,000-service cluster through both IPVS sinks (full-state and
// incremental, each on its own fake kernel; SOAK_SINKS=fullstate or
// incremental for one) for SOAK_DURATION: every round
// replaces one endpoint of 1% of the services and removes 100 services or
// brings them back. Every SOAK_INTERVAL (default 10s) it logs the
// process's RSS, live heap (after a GC) and goroutines. It passes when,
// after the warm-up (the first fifth), RSS and goroutines grow by at most
// 5%, the last sync of each sink left no error, and each fake kernel
// equals a fresh sync of the final state into an empty fake kernel.
//
// With SOAK_KERNEL=real each sink programs the real kernel instead, in a
// network namespace of its own prepared as the sink prepares a node
// (dataplane.Node.Setup: sets, kube-ipvs0, rules, sysctls); the VM runs it
// so (`make soak-vm`, vmtests.TestSoakVM), with fewer services.
func TestSoak(t *testing.T) {
	dur, err := time.ParseDuration(os.Getenv("SOAK_DURATION"))
	if err != nil || dur <= 0 {
		t.Skip("SOAK_DURATION not set (make soak)")
	}
	interval := 10 * time.Second
	if v := os.Getenv("SOAK_INTERVAL"); v != "" {
		if interval, err = time.ParseDuration(v); err != nil {
			t.Fatalf("SOAK_INTERVAL: %v", err)
		}
	}
	services := fsServices
	if v := os.Getenv("SOAK_SERVICES"); v != "" {
		if services, err = strconv.Atoi(v); err != nil {
			t.Fatalf("SOAK_SERVICES: %v", err)
		}
	}
	base := dataplanetest.BenchCluster(services, fsEndpoints)
	cur := slices.Clone(base)

	sinks := os.Getenv("SOAK_SINKS")
	if sinks == "" {
		sinks = "fullstate,incremental"
	}
	runFS, runInc := strings.Contains(sinks, "fullstate"), strings.Contains(sinks, "incremental")
	fs, fsKernel := newSoakFullState(t)
	inc, incKernel := newSoakIncremental(t)
	present := make([]bool, len(base))
	for i := range present {
		present[i] = true
	}
	apply := func(changed []int) {
		var live []*client.ServiceEndpoints
		for i, se := range cur {
			if present[i] {
				live = append(live, se)
			}
		}
		if runFS {
			fsFeed(fs.c, live)
			if fs.last.Err != nil || fs.last.Failed != 0 {
				t.Fatalf("full-state sync: %d failed: %v", fs.last.Failed, fs.last.Err)
			}
		}
		if !runInc {
			return
		}
		for _, i := range changed {
			k := base[i].Service.Key()
			if present[i] {
				inc.tr.Set(k, cur[i])
			} else {
				inc.tr.Set(k, nil)
			}
		}
		inc.ev.Apply(inc.tr.Snapshot())
		if inc.last.Err != nil || inc.last.Failed != 0 {
			t.Fatalf("incremental sync: %d failed: %v", inc.last.Failed, inc.last.Err)
		}
	}
	all := make([]int, len(base))
	for i := range all {
		all[i] = i
	}
	apply(all)

	type sample struct {
		at         time.Duration
		rss, heap  uint64
		goroutines int
		rounds     int
	}
	var samples []sample
	take := func(at time.Duration, rounds int) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s := sample{at: at.Round(time.Second), rss: rssBytes(t), heap: ms.HeapAlloc, goroutines: runtime.NumGoroutine(), rounds: rounds}
		samples = append(samples, s)
		t.Logf("soak %6s rounds=%d rss=%.1fMiB heap=%.1fMiB goroutines=%d", s.at, s.rounds, mib(s.rss), mib(s.heap), s.goroutines)
	}
	start := time.Now()
	take(0, 0)
	next := start.Add(interval)
	round := 0
	for time.Since(start) < dur {
		round++
		// 1%: one endpoint replaced, alternating between two addresses.
		var changed []int
		for j := range services / 100 {
			i := (round*(services/100) + j) % services
			se := *cur[i]
			se.Endpoints = slices.Clone(se.Endpoints)
			se.Endpoints[0] = dataplanetest.BenchEndpoint(fmt.Sprintf("ep-r%d", round%2), dataplanetest.BenchEndpointAddr(services*fsEndpoints+i*2+round%2))
			cur[i] = &se
			changed = append(changed, i)
		}
		// 100 services removed (odd rounds), then the same ones back.
		for j := range 100 {
			i := ((round-1)/2*100 + j + services/2) % services
			present[i] = round%2 == 0
			changed = append(changed, i)
		}
		apply(changed)
		if now := time.Now(); !now.Before(next) {
			take(now.Sub(start), round)
			next = now.Add(interval)
		}
	}
	// End with every service present, then check.
	var back []int
	for i := range present {
		if !present[i] {
			present[i] = true
			back = append(back, i)
		}
	}
	apply(back)
	take(time.Since(start), round)

	warm := 0
	for i, s := range samples {
		if s.at >= dur/5 {
			warm = i
			break
		}
	}
	if len(samples)-warm < 2 {
		t.Fatalf("only %d samples after the warm-up: lower SOAK_INTERVAL", len(samples)-warm)
	}
	// Growth: the mean of the last third of the samples after the
	// warm-up against the mean of the first third (single RSS samples are
	// noisy).
	after := samples[warm:]
	k := max(1, len(after)/3)
	mean := func(ss []sample) (rss float64, g float64) {
		for _, s := range ss {
			rss += float64(s.rss)
			g += float64(s.goroutines)
		}
		return rss / float64(len(ss)), g / float64(len(ss))
	}
	refRSS, refG := mean(after[:k])
	endRSS, endG := mean(after[len(after)-k:])
	var maxRSS uint64
	maxG := 0
	for _, s := range after {
		maxRSS, maxG = max(maxRSS, s.rss), max(maxG, s.goroutines)
	}
	last := samples[len(samples)-1]
	t.Logf("soak: %d rounds in %s; after the warm-up (%s), first third -> last third: rss %.1f -> %.1f MiB (%+.1f%%, max %.1f), goroutines %.0f -> %.0f (max %d), live heap at the end %.1f MiB",
		round, last.at, after[0].at, refRSS/(1<<20), endRSS/(1<<20), 100*(endRSS/refRSS-1), mib(maxRSS), refG, endG, maxG, mib(last.heap))
	if endRSS > 1.05*refRSS {
		t.Errorf("RSS grew after the warm-up: %.1f -> %.1f MiB (more than 5%%)", refRSS/(1<<20), endRSS/(1<<20))
	}
	if endG > 1.05*refG {
		t.Errorf("goroutines grew after the warm-up: %.0f -> %.0f", refG, endG)
	}

	// Each kernel equals a fresh sync of the final state.
	fresh, freshKernel := newSoakFullState(t)
	fsFeed(fresh.c, cur)
	if fresh.last.Err != nil {
		t.Fatalf("fresh sync: %v", fresh.last.Err)
	}
	want := readKernel(t, freshKernel)
	if n := len(want.Servers); n != services {
		t.Fatalf("fresh sync: %d virtual servers, want %d", n, services)
	}
	kernels := map[string]*dataplane.Kernel{}
	if runFS {
		kernels["full-state"] = fsKernel
	}
	if runInc {
		kernels["incremental"] = incKernel
	}
	for name, k := range kernels {
		if diff := cmp.Diff(want, readKernel(t, k), cmpopts.IgnoreFields(dataplane.State{}, "Visible"), cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}),
			cmpopts.SortSlices(func(a, b netip.Addr) bool { return a.Less(b) }),
			cmpopts.SortSlices(func(a, b render.SetEntry) bool { return fmt.Sprint(a) < fmt.Sprint(b) })); diff != "" {
			t.Errorf("%s sink's kernel after the soak differs from a fresh sync (-fresh +soaked):\n%s", name, diff)
		}
	}
}

// readKernel reads everything on a fake kernel: the sink's objects, and
// the count of every virtual server (a leak of one the sink no longer
// sees as its own shows there).
func readKernel(t *testing.T, k *dataplane.Kernel) *dataplane.State {
	t.Helper()
	n := &dataplane.Node{Cfg: dataplane.NodeConfig{Families: []xtables.Family{xtables.IPv4}, Dummy: k.Dummy, NodeAddresses: []netip.Addr{fsNodeIP}}, Kernel: k}
	st, err := n.Read()
	if err != nil {
		t.Fatal(err)
	}
	all, err := k.IPVSConn.Services()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(st.Servers) {
		t.Errorf("%d virtual servers on the kernel, %d of them the sink's", len(all), len(st.Servers))
	}
	return st
}

// newSoakKernel returns a fresh fake node, or with SOAK_KERNEL=real a
// fresh network namespace on the real kernel, prepared as a node.
func newSoakKernel(t *testing.T) *dataplane.Kernel {
	if os.Getenv("SOAK_KERNEL") == "real" {
		return newRealSoakKernel(t)
	}
	return fakeKernel(t)
}

func newSoakFullState(t *testing.T) (*fsSink, *dataplane.Kernel) {
	k := newSoakKernel(t)
	return newFsSink(newCounting(k), nil), k
}

func newSoakIncremental(t *testing.T) (*incSink, *dataplane.Kernel) {
	k := newSoakKernel(t)
	return newIncSink(newCounting(k), nil), k
}

// rssBytes is the process's resident set size (VmRSS).
func rssBytes(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// newRealSoakKernel returns the real kernel in a fresh network namespace,
// prepared by dataplane.Node.Setup for the node of the soak's cluster (its
// iptables rules written from inside the namespace).
func newRealSoakKernel(t *testing.T) *dataplane.Kernel {
	ns := nstest.New(t)
	k := dialNS(t, ns)
	n := &dataplane.Node{Cfg: dataplane.NodeConfig{Families: []xtables.Family{xtables.IPv4}, Dummy: k.Dummy, NodeAddresses: []netip.Addr{fsNodeIP}}, Kernel: k}
	if err := ns.Do(n.Setup); err != nil {
		t.Fatalf("prepare the node: %v", err)
	}
	return k
}

// dialNS connects IPVS, ipset and rtnetlink clients to the network
// namespace ns (closed when the test ends), kube-ipvs0 the dummy link. It
// calls nstest.Missing when the kernel has no IPVS.
func dialNS(tb testing.TB, ns *nstest.NetNS) *dataplane.Kernel {
	tb.Helper()
	conn, err := ipvs.Dial(&ipvs.Options{NetNS: ns.FD()})
	if err != nil {
		nstest.Missing(tb, "IPVS in the kernel: %v", err)
	}
	tb.Cleanup(func() { conn.Close() })
	sets, err := ipset.Dial(&ipset.Config{NetNS: ns.FD()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sets.Close() })
	links, err := link.Dial(&link.Config{NetNS: ns.FD()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { links.Close() })
	return &dataplane.Kernel{IPVSConn: conn, IPSet: sets, Link: links, Dummy: link.DefaultDummy}
}
