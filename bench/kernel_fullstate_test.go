package bench

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/link"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// BenchmarkFullStateKernel is the full-state sink's initial sync on the
// real kernel: a fresh controller (adopting the empty namespace first, as
// a starting sink does) receives N services x 10 endpoints and programs
// IPVS, the ipsets and kube-ipvs0. Every iteration uses a fresh network
// namespace (IPVS's destination trash list would slow a reused one). After
// the timed initial sync, each iteration also times, untimed by the
// benchmark clock, a sync without change and one with one endpoint added,
// reported as nochange-ms and one-endpoint-ms. The writes overlap as the
// sinks run them (dataplane.Applier.Overlap); at 10,000 services the
// ".../sequential" sub-benchmarks write them one after the other, for the
// gain in the same run.
//
// The sub-benchmark moby-ipvs-baseline creates the same 1,000 services x
// 10 destinations through moby/ipvs (kube-proxy's library), IPVS only, in
// the same run, for the ratio.
//
// It needs IPVS and dummy links: run it in the VM (`PROXYSINKS_BENCH_VM=1
// go test -run FullStateBench ./e2e/vmtests`); elsewhere it skips.
func BenchmarkFullStateKernel(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, binding := range []dataplane.Binding{dataplane.BindAddresses, dataplane.BindRoutes} {
			benchFullStateKernel(b, n, binding, true)
		}
		if n == 10000 {
			// The same without Applier.Overlap: every write in
			// sequence, for the gain of overlapping them.
			for _, binding := range []dataplane.Binding{dataplane.BindAddresses, dataplane.BindRoutes} {
				benchFullStateKernel(b, n, binding, false)
			}
		}
		if n == 1000 {
			w := newWorkload(n)
			b.Run(fmt.Sprintf("services=%d/moby-ipvs-baseline", n), func(b *testing.B) { benchMoby(b, w) })
		}
	}
}

// benchFullStateKernel is BenchmarkFullStateKernel at n services with the
// VIPs made local as binding says: "services=N" with addresses (kube-proxy's
// way), "services=N/vips=routes" with local routes; with overlap as the
// sinks run (Applier.Overlap), or else named ".../sequential".
func benchFullStateKernel(b *testing.B, n int, binding dataplane.Binding, overlap bool) {
	snap := dataplanetest.BenchCluster(n, fsEndpoints)
	name := fmt.Sprintf("services=%d", n)
	if binding != dataplane.BindAddresses {
		name += "/vips=" + binding.String()
	}
	if !overlap {
		name += "/sequential"
	}
	b.Run(name, func(b *testing.B) {
		requireIPVS(b)
		requireDummy(b)
		b.ReportAllocs()
		var writes, sys, setSys uint64
		var noChange, oneEndpoint time.Duration
		var times writeTimes
		var cpu float64
		for i := range b.N {
			b.StopTimer()
			s, sets := newKernelSink(b, binding, overlap)
			ctr0, set0 := s.conn.Counters(), sets.Stats()
			s.w.takeTimes()
			c0 := cpuTime()
			b.StartTimer()
			fsFeed(s.c, snap)
			b.StopTimer()
			cpu += cpuTime() - c0
			t := s.w.takeTimes()
			times.ipvs += t.ipvs
			times.entries += t.entries
			times.addrs += t.addrs
			times.busy += t.busy
			ctr, set := s.conn.Counters(), sets.Stats()
			st := *s.last
			if st.Err != nil || st.Failed != 0 {
				b.Fatalf("initial sync of %d services: %d failed: %v", n, st.Failed, st.Err)
			}
			if want := wantInitial(n, fsEndpoints).total(); st.Writes != want {
				b.Fatalf("initial sync of %d services: %d kernel writes, want %d", n, st.Writes, want)
			}
			writes += uint64(st.Writes)
			sys += ctr.Sendmsg + ctr.Recvmsg - ctr0.Sendmsg - ctr0.Recvmsg
			setSys += set.Sendmsg + set.Recvmsg - set0.Sendmsg - set0.Recvmsg

			t0 := time.Now()
			r := s.sync(b, snap)
			noChange += time.Since(t0)
			expect(b, "no-change sync on the kernel", r, counts(0, 0))

			se := snap[i%n]
			saved := se.Endpoints
			se.Endpoints = append(saved[:len(saved):len(saved)], dataplanetest.BenchEndpoint("ep-new", dataplanetest.BenchEndpointAddr(n*fsEndpoints+i)))
			t0 = time.Now()
			r = s.sync(b, snap)
			oneEndpoint += time.Since(t0)
			se.Endpoints = saved
			expect(b, "one-endpoint sync on the kernel", r, counts(0, 0, ipvs.OpCreateDestination, 1))
		}
		b.ReportMetric(float64(writes)/float64(b.N), "kernel-writes/op")
		b.ReportMetric(float64(sys)/float64(b.N), "ipvs-syscalls/op")
		b.ReportMetric(float64(setSys)/float64(b.N), "ipset-syscalls/op")
		b.ReportMetric(cpu*1e3/float64(b.N), "cpu-ms/op")
		// Where the initial sync's time went: inside the writer, by
		// kind (kernel plus client library; the bindings overlap the
		// destinations), the time some write ran, and the rest (the
		// sink: adoption, render, diff, plan).
		b.ReportMetric(ms(times.ipvs, b.N), "ipvs-ms/op")
		b.ReportMetric(ms(times.entries, b.N), "ipset-ms/op")
		b.ReportMetric(ms(times.addrs, b.N), "addr-ms/op")
		b.ReportMetric(ms(times.busy, b.N), "write-ms/op")
		b.ReportMetric(float64(b.Elapsed()-times.busy)/1e6/float64(b.N), "sink-ms/op")
		b.ReportMetric(ms(noChange, b.N), "nochange-ms")
		b.ReportMetric(ms(oneEndpoint, b.N), "one-endpoint-ms")
	})
}

// requireDummy skips the benchmark when the kernel cannot create dummy
// links (failing inside the VM).
func requireDummy(b *testing.B) {
	ns := nstest.New(b)
	l, err := link.Dial(&link.Config{NetNS: ns.FD()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if _, err := l.EnsureDummy(link.DefaultDummy); err != nil {
		nstest.Missing(b, "dummy links: %v", err)
	}
}

// newKernelSink dials IPVS, ipset and rtnetlink into a fresh namespace,
// creates kube-ipvs0 and the IPv4 ipsets as dataplane.Node.Setup does
// (Setup itself also loads modules, writes sysctls and runs iptables in
// the process's own namespace, which a benchmark must not touch), and
// returns a controller that adopts the namespace's state before its first
// sync, and the ipset connection (for its counters).
func newKernelSink(b *testing.B, binding dataplane.Binding, overlap bool) (*fsSink, *ipset.Conn) {
	b.Helper()
	k := dialNS(b, nstest.New(b))
	k.Binding = binding
	sets := k.IPSet.(*ipset.Conn)
	if err := dataplane.CreateSets(sets, []xtables.Family{xtables.IPv4}, 1024, 65536); err != nil {
		b.Fatal(err)
	}
	if _, err := k.Link.EnsureDummy(link.DefaultDummy); err != nil {
		b.Fatal(err)
	}
	node := &dataplane.Node{Kernel: k, Cfg: dataplane.NodeConfig{Families: []xtables.Family{xtables.IPv4}, NodeAddresses: []netip.Addr{fsNodeIP}}}
	w := newCounting(k)
	a := dataplane.NewApplier(w)
	a.Overlap = overlap
	c, last := fsControllerWith(a, node)
	return &fsSink{ipvsSink: ipvsSink{last: last, w: w, conn: k.IPVSConn}, c: c}, sets
}
