package iptables

import (
	"fmt"
	"testing"

	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// BenchmarkKernelIdleResync is the periodic resync of an idle node: n
// services x 10 endpoints (PROXYSINKS_BENCH_SERVICES, default 1000)
// synced into a fresh namespace on nf_tables, IPv4 and IPv6 as the sink
// binary runs, then Resync after Resync with nothing changed. "compare"
// reads and compares every table at every resync (the Proxier without a
// generation: the behaviour before the generation check); "generation"
// is the default configuration, which skips the read while the nf_tables
// generation stands still and still compares every CompareEvery-th resync
// (amortized in the figures: run at least 10 resyncs, -benchtime 20x);
// "skip" never forces a compare: the cost of a skipped resync alone.
// tools-cpu-ms/op is the CPU of the iptables-save runs, cpu-ms/op the
// sink's (rendering reused, parsing and comparing, the generation reads).
func BenchmarkKernelIdleResync(b *testing.B) {
	sizes := benchSizes(b)
	for _, n := range sizes {
		for _, mode := range []string{"compare", "generation", "skip"} {
			b.Run(fmt.Sprintf("services=%d/%s", n, mode), func(b *testing.B) {
				nstest.LookPath(b, xtables.NFT.Command(xtables.IPv4, "restore"))
				ns, err := nstest.Create()
				if err != nil {
					b.Fatal(err)
				}
				defer ns.Close()
				c := &toolCounter{}
				cfg := Config{IPv4: true, IPv6: true, MasqueradeBit: 14, Backend: xtables.NFT, Run: c.wrap(xtables.ExecWith(ns.Do))}
				if mode != "compare" {
					cfg.Generation = nsGeneration(ns)
				}
				if mode == "skip" {
					cfg.CompareEvery, cfg.CompareInterval = 1<<30, 1<<62
				}
				p, err := NewProxier(cfg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Snapshot(benchCluster(n)); err != nil {
					b.Fatal(err)
				}
				c.saves = 0
				skipped, i := 0, 0
				tools, cpu := childCPU(), processCPU()
				for b.Loop() {
					st, err := p.Resync()
					if err != nil {
						b.Fatal(err)
					}
					if st.Restores != 0 {
						b.Fatalf("idle resync wrote: %+v", st)
					}
					skipped += st.ReadsSkipped
					i++
				}
				b.ReportMetric(float64(childCPU()-tools)/float64(i)/1e6, "tools-cpu-ms/op")
				b.ReportMetric(float64(processCPU()-cpu)/float64(i)/1e6, "cpu-ms/op")
				b.ReportMetric(float64(c.saves)/float64(i), "saves/op")
				b.ReportMetric(float64(skipped)/float64(i), "skipped-families/op")
			})
		}
	}
}
