package nftables

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
	"golang.org/x/sys/unix"
)

// BenchmarkSync programs generated clusters of ClusterIP services with 10
// endpoints each into fresh network namespaces: "first" is the first sync
// of a new Proxier into an empty namespace (render, compile, one
// transaction), "one-endpoint" a sync after one endpoint of one service
// changed (render, diff, a transaction of that service's changes). Each
// reports the system calls, netlink messages and bytes sent per sync.
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		s := generated(n, 10, netip.Addr{})
		cfg := generatedConfig()
		b.Run(fmt.Sprintf("%dx10/first", n), func(b *testing.B) {
			var tot SyncStats
			var cpu int64
			for b.Loop() {
				b.StopTimer()
				ns := nstest.New(b)
				p, err := NewProxier(Config{IPv4: true, Ruleset: cfg, NetNS: ns.FD()})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				c0 := processCPU()
				st, err := p.Snapshot(s)
				if err != nil {
					b.Fatal(err)
				}
				cpu += processCPU() - c0
				b.StopTimer()
				tot.add(st)
				p.Close()
				ns.Close()
				b.StartTimer()
			}
			report(b, tot, cpu)
		})
		b.Run(fmt.Sprintf("%dx10/one-endpoint", n), func(b *testing.B) {
			ns := nstest.New(b)
			p, err := NewProxier(Config{IPv4: true, Ruleset: cfg, NetNS: ns.FD()})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			if _, err := p.Snapshot(s); err != nil {
				b.Fatal(err)
			}
			// The first endpoint of the first service moves between two
			// addresses; every other service is the same object.
			alt := [2]netip.Addr{netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")}
			snaps := [2]*client.Snapshot{withFirst(s, alt[0]), withFirst(s, alt[1])}
			var tot SyncStats
			i := 0
			c0 := processCPU()
			for b.Loop() {
				st, err := p.Snapshot(snaps[i%2])
				if err != nil {
					b.Fatal(err)
				}
				if st.Transactions != 1 {
					b.Fatalf("one endpoint changed: %+v", st)
				}
				tot.add(st)
				i++
			}
			report(b, tot, processCPU()-c0)
		})
	}
}

// report reports per-sync counts of a benchmark's syncs: system calls,
// netlink messages and bytes sent, and the process's CPU time (user and
// system: the kernel's work on the transactions is done in the
// Proxier's system calls), which a loaded machine inflates less than
// wall time.
func report(b *testing.B, tot SyncStats, cpu int64) {
	n := float64(b.N)
	b.ReportMetric(float64(cpu)/n, "cpu-ns/op")
	b.ReportMetric(float64(tot.Syscalls)/n, "syscalls/op")
	b.ReportMetric(float64(tot.Messages)/n, "msgs/op")
	b.ReportMetric(float64(tot.Bytes)/n, "bytes-sent/op")
}

// processCPU returns the CPU time (user and system, every thread) the
// process used so far, in nanoseconds.
func processCPU() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
