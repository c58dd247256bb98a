package iptables

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// benchClusters caches the benchmark clusters (building them through
// client/nodelocal takes longer than a sync).
var benchClusters = map[int]*client.Snapshot{}

func benchCluster(n int) *client.Snapshot {
	if s, ok := benchClusters[n]; ok {
		return s
	}
	s := snapshot(cluster(n, 10)...)
	benchClusters[n] = s
	return s
}

// BenchmarkFullSync is the sink's CPU for a first sync of n services x 10
// endpoints with the kernel left out (dry run into io.Discard): render,
// compare, build the restore input. Target at 10,000 services: <= 100 ms.
func BenchmarkFullSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			s := benchCluster(n)
			var st SyncStats
			cpu := processCPU()
			b.ResetTimer()
			for b.Loop() {
				p, err := NewProxier(Config{IPv4: true, MasqueradeBit: 14, DryRun: io.Discard})
				if err != nil {
					b.Fatal(err)
				}
				if st, err = p.Snapshot(s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(st.Rules), "rules/op")
			b.ReportMetric(float64(st.Bytes), "restore-bytes/op")
			b.ReportMetric(float64(st.Restores), "restores/op")
		})
	}
}

// matrixCluster is the cluster of the benchmark matrix
// (e2e/benchmatrix/objects.go) as a snapshot: n ClusterIP services
// bench/svc-NNNNN, cluster IPs from 10.96.1.0, one TCP port "http" 80 ->
// 8080, m ready endpoints each on another node (addresses from
// 10.128.0.0), and the apiserver's default/kubernetes service.
func matrixCluster(n, m int) *client.Snapshot {
	nth := func(base string, i int) string {
		b := netip.MustParseAddr(base).As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + uint32(i)
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
	}
	specs := []svcSpec{{name: "kubernetes", clusterIPs: []string{"10.96.0.1"}, ports: []client.Port{tcp("https", 443, 6443)},
		eps: []ep{{ip: "192.168.50.1", remote: true}}}}
	for i := range n {
		s := svcSpec{ns: "bench", name: fmt.Sprintf("svc-%05d", i), clusterIPs: []string{nth("10.96.1.0", i)},
			ports: []client.Port{tcp("http", 80, 8080)}}
		for j := range m {
			s.eps = append(s.eps, ep{ip: nth("10.128.0.0", i*m+j), remote: true})
		}
		specs = append(specs, s)
	}
	return snapshot(specs...)
}

// BenchmarkFullSyncMatrix is the first sync of the benchmark matrix's
// cluster of 1,000 services x 10 endpoints as the sink binary runs there
// (IPv4 and IPv6, --nodeport-addresses 192.168.50.0/24, node
// 192.168.50.10), dry run: restore-bytes/op is what the matrix's initial
// sync measures, against kube-proxy's iptables mode (with the default
// bound; in dry run the tables are empty, so transactions of about 1,000
// rules).
func BenchmarkFullSyncMatrix(b *testing.B) {
	s := matrixCluster(1000, 10)
	node := []netip.Addr{netip.MustParseAddr("192.168.50.10")}
	var st SyncStats
	for b.Loop() {
		p, err := NewProxier(Config{IPv4: true, IPv6: true, MasqueradeBit: 14, DryRun: io.Discard, NodeIPs: node,
			NodePortCIDRs: []netip.Prefix{netip.MustParsePrefix("192.168.50.0/24")}, NodePortIPs: node})
		if err != nil {
			b.Fatal(err)
		}
		if st, err = p.Snapshot(s); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.Bytes), "restore-bytes/op")
	b.ReportMetric(float64(st.Restores), "restores/op")
	b.ReportMetric(float64(st.Rules), "rules/op")
}

// BenchmarkFullSyncChanged is a full sync (a snapshot marked Full, as
// after a source's relist) of n services x 10 endpoints of which 1% lost
// an endpoint since the last sync, dry run: the sink's CPU for a full
// sync of a running Proxier. The snapshots are built anew, so unchanged
// services are equal but not the same objects.
func BenchmarkFullSyncChanged(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			specs := cluster(n, 10)
			s0 := benchCluster(n)
			var alt [2]*client.Snapshot
			for i := range alt {
				changed := slices.Clone(specs)
				for j := i; j < n; j += 100 {
					changed[j].eps = changed[j].eps[1:]
				}
				alt[i] = snapshot(changed...)
				alt[i].Full = true
			}
			p, err := NewProxier(Config{IPv4: true, MasqueradeBit: 14, DryRun: io.Discard})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Snapshot(s0); err != nil {
				b.Fatal(err)
			}
			var st SyncStats
			i := 0
			cpu := processCPU()
			b.ResetTimer()
			for b.Loop() {
				if st, err = p.Snapshot(alt[i%2]); err != nil {
					b.Fatal(err)
				}
				if !st.Full {
					b.Fatalf("not a full sync: %+v", st)
				}
				i++
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(i)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(st.Bytes), "restore-bytes/op")
		})
	}
}

// BenchmarkEndpointChange is one endpoint removed or added back in one
// service of a cluster of n services x 10 endpoints: a partial sync. Its
// restore bytes must not depend on n; target <= 1 ms of sink CPU.
func BenchmarkEndpointChange(b *testing.B) {
	for _, n := range []int{200, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			specs := cluster(n, 10)
			s0 := benchCluster(n)
			with := specs[n/2]
			without := with
			without.eps = with.eps[1:]
			specs[n/2] = without
			s1 := next(s0, specs...)
			specs[n/2] = with
			s2 := next(s1, specs...)
			p, err := NewProxier(Config{IPv4: true, MasqueradeBit: 14, DryRun: io.Discard})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Snapshot(s0); err != nil {
				b.Fatal(err)
			}
			var bytes, rules int
			i := 0
			cpu := processCPU()
			b.ResetTimer()
			for b.Loop() {
				s := s1
				if i%2 == 1 {
					s = s2
				}
				i++
				st, err := p.Snapshot(s)
				if err != nil {
					b.Fatal(err)
				}
				if st.Full || st.Restores != 1 {
					b.Fatalf("not one partial restore: %+v", st)
				}
				bytes += st.Bytes
				rules += st.Rules
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(i)/1e6, "cpu-ms/op")
			b.ReportMetric(float64(bytes)/float64(i), "restore-bytes/op")
			b.ReportMetric(float64(rules)/float64(i), "rules/op")
		})
	}
}

// BenchmarkKernelFirstSync is the first sync of n services x 10 endpoints
// into a fresh network namespace of this host, wall time from the start to
// every rule in place, for each backend: this Proxier's bounded
// transactions against kube-proxy's approach (the same ruleset in one
// iptables-restore). Sizes come from PROXYSINKS_BENCH_SERVICES
// (comma-separated, default 1000); kube-proxy's approach is given
// PROXYSINKS_BENCH_TIMEOUT (default 120s) and reported as timed out past it.
func BenchmarkKernelFirstSync(b *testing.B) {
	sizes := benchSizes(b)
	timeout := 120 * time.Second
	if v := os.Getenv("PROXYSINKS_BENCH_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		timeout = d
	}
	bounded := 0
	if v := os.Getenv("PROXYSINKS_BENCH_MAX_RESTORE_RULES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		bounded = n
	}
	for _, backend := range []xtables.Backend{xtables.NFT, xtables.Legacy} {
		for _, n := range sizes {
			for _, mode := range []struct {
				name  string
				limit int
			}{{"proxier", bounded}, {"kube-proxy-single-restore", -1}} {
				b.Run(fmt.Sprintf("%s/services=%d/%s", backend, n, mode.name), func(b *testing.B) {
					nstest.LookPath(b, backend.Command(xtables.IPv4, "restore"))
					s := benchCluster(n)
					var st SyncStats
					var tools int64
					for b.Loop() {
						ns, err := nstest.Create()
						if err != nil {
							b.Fatal(err)
						}
						run := timeoutRunner(ns, timeout)
						p, err := NewProxier(Config{IPv4: true, MasqueradeBit: 14, Backend: backend, Run: run, MaxRestoreRules: mode.limit})
						if err != nil {
							b.Fatal(err)
						}
						cpu := childCPU()
						st, err = p.Snapshot(s)
						tools += childCPU() - cpu
						ns.Close()
						if err != nil {
							if errorsIsTimeout(err) {
								b.Skipf("did not finish within %s", timeout)
							}
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(st.Rules), "rules/op")
					b.ReportMetric(float64(st.Restores), "restores/op")
					b.ReportMetric(float64(tools)/float64(b.N)/1e9, "tools-cpu-s/op")
				})
			}
		}
	}
}
