package ipvssink

import (
	"bytes"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs/ipvstest"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
	"github.com/proxysinks/proxysinks/sinks/healthcheck"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
)

// dumper is a ServiceDumper with fixed entries, counting its dumps.
type dumper struct {
	entries []ipvs.ServiceEntry
	err     error
	dumps   int
}

func (d *dumper) Services() ([]ipvs.ServiceEntry, error) {
	d.dumps++
	return d.entries, d.err
}

// parseText parses exposition text, failing the test on an error.
func parseText(t testing.TB, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("the text does not parse: %v\n%s", err, text)
	}
	return mfs
}

// samples lists the text's samples as "name{label=value,...} value",
// labels sorted by name.
func samples(mfs map[string]*dto.MetricFamily) []string {
	var out []string
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			v := m.GetCounter().GetValue()
			out = append(out, fmt.Sprintf("%s{%s} %g", name, strings.Join(ls, ","), v))
		}
	}
	sort.Strings(out)
	return out
}

func TestStats(t *testing.T) {
	d := &dumper{entries: []ipvs.ServiceEntry{
		{Service: ipvs.Service{Family: ipvs.IPv4, Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.1"), Port: 443},
			Stats: ipvs.Stats{Connections: 7, PacketsIn: 70, PacketsOut: 60, BytesIn: 7000, BytesOut: 6000}},
		{Service: ipvs.Service{Family: ipvs.IPv6, Protocol: ipvs.UDP, Address: netip.MustParseAddr("fd00::10"), Port: 53},
			Stats: ipvs.Stats{Connections: 1, PacketsIn: 2, PacketsOut: 3, BytesIn: 4, BytesOut: 5}},
		{Service: ipvs.Service{Family: ipvs.IPv4, FWMark: 9}, Stats: ipvs.Stats{Connections: 2}},
	}}
	s := NewStats(d)
	mfs := parseText(t, s.AppendText(nil))
	want := []string{
		"proxysinks_ipvs_stats_errors_total{} 0",
		"proxysinks_ipvs_virtual_server_bytes_total{address=,direction=in,port=9,protocol=FWM} 0",
		"proxysinks_ipvs_virtual_server_bytes_total{address=,direction=out,port=9,protocol=FWM} 0",
		"proxysinks_ipvs_virtual_server_bytes_total{address=10.96.0.1,direction=in,port=443,protocol=TCP} 7000",
		"proxysinks_ipvs_virtual_server_bytes_total{address=10.96.0.1,direction=out,port=443,protocol=TCP} 6000",
		"proxysinks_ipvs_virtual_server_bytes_total{address=fd00::10,direction=in,port=53,protocol=UDP} 4",
		"proxysinks_ipvs_virtual_server_bytes_total{address=fd00::10,direction=out,port=53,protocol=UDP} 5",
		"proxysinks_ipvs_virtual_server_connections_total{address=,port=9,protocol=FWM} 2",
		"proxysinks_ipvs_virtual_server_connections_total{address=10.96.0.1,port=443,protocol=TCP} 7",
		"proxysinks_ipvs_virtual_server_connections_total{address=fd00::10,port=53,protocol=UDP} 1",
		"proxysinks_ipvs_virtual_server_packets_total{address=,direction=in,port=9,protocol=FWM} 0",
		"proxysinks_ipvs_virtual_server_packets_total{address=,direction=out,port=9,protocol=FWM} 0",
		"proxysinks_ipvs_virtual_server_packets_total{address=10.96.0.1,direction=in,port=443,protocol=TCP} 70",
		"proxysinks_ipvs_virtual_server_packets_total{address=10.96.0.1,direction=out,port=443,protocol=TCP} 60",
		"proxysinks_ipvs_virtual_server_packets_total{address=fd00::10,direction=in,port=53,protocol=UDP} 2",
		"proxysinks_ipvs_virtual_server_packets_total{address=fd00::10,direction=out,port=53,protocol=UDP} 3",
	}
	if diff := cmp.Diff(want, samples(mfs)); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	if d.dumps != 1 {
		t.Errorf("%d dumps for one scrape, want 1", d.dumps)
	}
	// A failed dump: no per-server series, one error counted.
	d.entries, d.err = nil, errors.New("netlink: boom")
	if diff := cmp.Diff([]string{"proxysinks_ipvs_stats_errors_total{} 1"}, samples(parseText(t, s.AppendText(nil)))); diff != "" {
		t.Errorf("after a failed dump (-want +got):\n%s", diff)
	}
}

// TestStatsServed: with a text source, /metrics serves the registry's
// metrics and the source's, as text whatever the scraper asks for, and
// the whole parses.
func TestStatsServed(t *testing.T) {
	m := httpserve.NewMetrics()
	m.AddText(NewStats(fakeKernel(t, 3)).AppendText)
	h := httpserve.Handler(m, healthcheck.NewProxyHealth(time.Minute, nil), "ipvs")
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0")
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	mfs := parseText(t, rec.Body.Bytes())
	if mfs["kubeproxy_sync_proxy_rules_duration_seconds"] == nil || len(mfs[statsConns].GetMetric()) != 3 {
		t.Errorf("/metrics lacks the registry's or the 3 servers' series:\n%.2000s", rec.Body.String())
	}
}

// fakeKernel returns a fake IPVS holding n TCP virtual servers, and a
// connection to it.
func fakeKernel(tb testing.TB, n int) *ipvs.Conn {
	k := ipvstest.New()
	conn, err := k.Conn()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return withServers(tb, conn, n)
}

// realKernel is a connection to IPVS in a fresh network namespace holding
// n virtual servers; Missing (a skip on this host, which has no IPVS; a
// failure in the VM) without IPVS.
func realKernel(tb testing.TB, n int) *ipvs.Conn {
	ns := nstest.New(tb)
	conn, err := ipvs.Dial(&ipvs.Options{NetNS: ns.FD()})
	if errors.Is(err, ipvs.ErrNotSupported) {
		_ = exec.Command("modprobe", "ip_vs").Run()
		conn, err = ipvs.Dial(&ipvs.Options{NetNS: ns.FD()})
	}
	if errors.Is(err, ipvs.ErrNotSupported) {
		nstest.Missing(tb, "IPVS: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	_ = exec.Command("modprobe", "ip_vs_rr").Run()
	tb.Cleanup(func() { conn.Close() })
	return withServers(tb, conn, n)
}

// withServers creates n TCP virtual servers through conn.
func withServers(tb testing.TB, conn *ipvs.Conn, n int) *ipvs.Conn {
	ops := make([]ipvs.Op, 0, n)
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateService, Service: ipvs.Service{Family: ipvs.IPv4, Protocol: ipvs.TCP, Address: a, Port: 80, Scheduler: "rr", Netmask: 32}})
	}
	if err := conn.Apply(ops); err != nil {
		tb.Fatalf("create %d virtual servers: %v", n, err)
	}
	return conn
}

// TestStatsFake: through a netlink connection, one scrape is one dump
// and gives one set of series per virtual server.
func TestStatsFake(t *testing.T) {
	conn := fakeKernel(t, 300)
	s := NewStats(conn)
	before := conn.Counters()
	mfs := parseText(t, s.AppendText(nil))
	for name, want := range map[string]int{statsConns: 300, statsPackets: 600, statsBytes: 600} {
		if n := len(mfs[name].GetMetric()); n != want {
			t.Errorf("%d series of %s, want %d", n, name, want)
		}
	}
	if sends := conn.Counters().Sendmsg - before.Sendmsg; sends != 1 {
		t.Errorf("%d requests for one scrape, want one dump", sends)
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStatsScrape writes the --ipvs-stats series of 1,000 and
// 10,000 virtual servers: one dump and the text, against IPVS in a fresh
// network namespace (the VM: e2e/vmtests TestStatsBenchVM; skipped on a
// host without IPVS), against the fake kernel (whose encoding of the dump,
// the kernel's work, is counted too) and against a dump already parsed. The budget is 50 ms of CPU per scrape at
// 10,000 (cpu-ms/scrape).
func BenchmarkStatsScrape(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("kernel/%d", n), func(b *testing.B) {
			benchScrape(b, n, realKernel(b, n))
		})
		b.Run(fmt.Sprintf("fake-kernel/%d", n), func(b *testing.B) {
			benchScrape(b, n, fakeKernel(b, n))
		})
		b.Run(fmt.Sprintf("parsed-dump/%d", n), func(b *testing.B) {
			entries, err := fakeKernel(b, n).Services()
			if err != nil {
				b.Fatal(err)
			}
			benchScrape(b, n, &dumper{entries: entries})
		})
	}
}

// benchScrape scrapes the text of a Stats over d, and reports the CPU
// per scrape.
func benchScrape(b *testing.B, n int, d ServiceDumper) {
	s := NewStats(d)
	var buf []byte
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime(b)
	for range b.N {
		buf = s.AppendText(buf[:0])
	}
	cpu := cpuTime(b) - start
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/scrape")
	b.ReportMetric(float64(5*n), "series")
	b.ReportMetric(float64(len(buf)), "bytes/scrape")
}
