package nftables

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
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
			var cpu, sys int64
			for b.Loop() {
				b.StopTimer()
				ns := nstest.New(b)
				p, err := NewProxier(Config{IPv4: true, Ruleset: cfg, NetNS: ns.FD()})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				c0, s0 := processCPU()
				st, err := p.Snapshot(s)
				if err != nil {
					b.Fatal(err)
				}
				c1, s1 := processCPU()
				cpu, sys = cpu+c1-c0, sys+s1-s0
				b.StopTimer()
				tot.add(st)
				p.Close()
				ns.Close()
				b.StartTimer()
			}
			report(b, tot, cpu, sys)
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
			c0, s0 := processCPU()
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
			c1, s1 := processCPU()
			report(b, tot, c1-c0, s1-s0)
		})
	}
}

// report reports per-sync counts of a benchmark's syncs: system calls,
// netlink messages and bytes sent, and the process's CPU time (user and
// system: the kernel's work on the transactions is done in the
// Proxier's system calls), which a loaded machine inflates less than
// wall time, and the system part of it (sys-ns/op: mostly the kernel's
// work on the transactions).
func report(b *testing.B, tot SyncStats, cpu, sys int64) {
	n := float64(b.N)
	b.ReportMetric(float64(cpu)/n, "cpu-ns/op")
	b.ReportMetric(float64(sys)/n, "sys-ns/op")
	b.ReportMetric(float64(tot.Syscalls)/n, "syscalls/op")
	b.ReportMetric(float64(tot.Messages)/n, "msgs/op")
	b.ReportMetric(float64(tot.Bytes)/n, "bytes-sent/op")
}

// processCPU returns the CPU time (user and system, every thread) the
// process used so far, and its system part, in nanoseconds.
func processCPU() (cpu, sys int64) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), ru.Stime.Nano()
}

// recorder is a Proxier's kernel that keeps a copy of every transaction
// committed through it.
type recorder struct {
	kernel
	txs []recordedTx
}

// recordedTx is one committed transaction's family, table and operations.
type recordedTx struct {
	fam   nft.Family
	table string
	ops   []op
}

func (r *recorder) commit(fam nft.Family, table string, ops []op, gen uint32) (uint32, error) {
	r.txs = append(r.txs, recordedTx{fam: fam, table: table, ops: slices.Clone(ops)})
	return r.kernel.commit(fam, table, ops, gen)
}

// BenchmarkFirstSyncFloor sets the Proxier's first sync of a generated
// cluster (render, compile, diff, encode, commit) beside its floor: the
// very transactions that sync committed, encoded before the clock starts,
// then committed into another fresh namespace (only sending them and the
// kernel's work are timed). "chunked" is the Proxier's default first
// write (chunk.go); "one-tx" writes everything in one transaction
// (ChunkChains -1), which shows what the chunks save in the kernel (not
// at 30,000 services: minutes). It
// reports both as wall and CPU milliseconds per sync and their ratios
// (sync/floor): the part of the sync that is the Proxier's own work.
func BenchmarkFirstSyncFloor(b *testing.B) {
	for _, n := range []int{1000, 10000, 30000} {
		s := generated(n, 10, netip.Addr{})
		for _, c := range []struct {
			name  string
			chunk int
		}{{"chunked", 0}, {"one-tx", -1}} {
			if n > 10000 && c.chunk < 0 {
				continue // minutes of the kernel's quadratic walks
			}
			b.Run(fmt.Sprintf("%dx10/%s", n, c.name), func(b *testing.B) {
				var syncWall, syncCPU, floorWall, floorCPU time.Duration
				txs := 0
				for b.Loop() {
					sw, sc, rec := firstSyncRecorded(b, s, c.chunk)
					fw, fc := commitFloor(b, rec)
					syncWall, syncCPU = syncWall+sw, syncCPU+sc
					floorWall, floorCPU = floorWall+fw, floorCPU+fc
					txs = len(rec)
				}
				n := float64(b.N)
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / n }
				b.ReportMetric(ms(syncWall), "sync-ms/op")
				b.ReportMetric(ms(syncCPU), "sync-cpu-ms/op")
				b.ReportMetric(ms(floorWall), "floor-ms/op")
				b.ReportMetric(ms(floorCPU), "floor-cpu-ms/op")
				b.ReportMetric(float64(syncWall)/float64(floorWall), "sync/floor")
				b.ReportMetric(float64(syncCPU)/float64(floorCPU), "sync-cpu/floor-cpu")
				b.ReportMetric(float64(txs), "transactions")
			})
		}
	}
}

// firstSyncRecorded runs a new Proxier's first sync of s into a fresh
// namespace and returns its wall and CPU time and the transactions it
// committed.
func firstSyncRecorded(b *testing.B, s *client.Snapshot, chunk int) (wall, cpu time.Duration, txs []recordedTx) {
	b.Helper()
	ns := nstest.New(b)
	defer ns.Close()
	p, err := NewProxier(Config{IPv4: true, Ruleset: generatedConfig(), NetNS: ns.FD(), ChunkChains: chunk})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	rec := &recorder{kernel: p.k}
	p.k = rec
	c0, _ := processCPU()
	t0 := time.Now()
	if _, err := p.Snapshot(s); err != nil {
		b.Fatal(err)
	}
	wall = time.Since(t0)
	c1, _ := processCPU()
	p.k = rec.kernel
	return wall, time.Duration(c1 - c0), rec.txs
}

// commitFloor encodes txs, then commits them in order into a fresh
// namespace, timing only the commits.
func commitFloor(b *testing.B, txs []recordedTx) (wall, cpu time.Duration) {
	b.Helper()
	ns := nstest.New(b)
	defer ns.Close()
	c, err := nft.Dial(&nft.Config{NetNS: ns.FD()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	encoded := make([]*nft.Tx, len(txs))
	for i, t := range txs {
		encoded[i] = encode(t.fam, t.table, t.ops)
	}
	c0, _ := processCPU()
	t0 := time.Now()
	for i, tx := range encoded {
		if _, err := c.Commit(tx, nil); err != nil {
			b.Fatalf("floor: transaction %d of %d: %v", i+1, len(encoded), err)
		}
	}
	wall = time.Since(t0)
	c1, _ := processCPU()
	return wall, time.Duration(c1 - c0)
}

// BenchmarkOneEndpointFloor sets a sync after one endpoint of one service
// changed beside its floor: the same transactions, encoded before the
// clock, committed into another namespace that holds what the Proxier's
// namespace held. The first endpoint of the first service moves between
// two addresses; each iteration times one sync and one floor commit. The
// floor is the kernel's cost of the change (with the whole ruleset in
// the table: the commit validates what its rules reach), which no
// encoding can remove.
func BenchmarkOneEndpointFloor(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("%dx10", n), func(b *testing.B) {
			s := generated(n, 10, netip.Addr{})
			alt := [2]netip.Addr{netip.MustParseAddr("10.99.0.1"), netip.MustParseAddr("10.99.0.2")}
			snaps := [2]*client.Snapshot{withFirst(s, alt[0]), withFirst(s, alt[1])}
			ns := nstest.New(b)
			defer ns.Close()
			p, err := NewProxier(Config{IPv4: true, Ruleset: generatedConfig(), NetNS: ns.FD()})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			rec := &recorder{kernel: p.k}
			p.k = rec
			// The floor's namespace gets what the Proxier's got, and the
			// two transactions of the change, back and forth.
			for _, snap := range []*client.Snapshot{s, snaps[0], snaps[1], snaps[0]} {
				if _, err := p.Snapshot(snap); err != nil {
					b.Fatal(err)
				}
			}
			setup, change := rec.txs[:len(rec.txs)-2], rec.txs[len(rec.txs)-2:]
			fns := nstest.New(b)
			defer fns.Close()
			c, err := nft.Dial(&nft.Config{NetNS: fns.FD()})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			for _, t := range setup {
				if _, err := c.Commit(encode(t.fam, t.table, t.ops), nil); err != nil {
					b.Fatal(err)
				}
			}
			var syncWall, floorWall time.Duration
			var syncCPU, floorCPU int64
			for i := 0; b.Loop(); i++ {
				c0, _ := processCPU()
				t0 := time.Now()
				if _, err := p.Snapshot(snaps[(i+1)%2]); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				c1, _ := processCPU()
				tx := encode(change[i%2].fam, change[i%2].table, change[i%2].ops)
				c2, _ := processCPU()
				t2 := time.Now()
				if _, err := c.Commit(tx, nil); err != nil {
					b.Fatal(err)
				}
				floorWall += time.Since(t2)
				c3, _ := processCPU()
				syncWall += t1.Sub(t0)
				syncCPU, floorCPU = syncCPU+c1-c0, floorCPU+c3-c2
			}
			k := float64(b.N)
			b.ReportMetric(float64(syncWall.Microseconds())/k, "sync-us/op")
			b.ReportMetric(float64(syncCPU)/1e3/k, "sync-cpu-us/op")
			b.ReportMetric(float64(floorWall.Microseconds())/k, "floor-us/op")
			b.ReportMetric(float64(floorCPU)/1e3/k, "floor-cpu-us/op")
			b.ReportMetric(float64(syncWall)/float64(floorWall), "sync/floor")
		})
	}
}
