package benchmatrix

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The chain names kube-proxy v1.37.2 wrote for default/web port "http" TCP
// and its endpoint 10.244.1.5:8080 (checked against a real run; see
// REFERENCE.md).
func TestKubeChainNames(t *testing.T) {
	if got := svcChain("default/web:http"); got != "KUBE-SVC-CDGGSHYLG3RE2FKL" {
		t.Errorf("service chain %s, want KUBE-SVC-CDGGSHYLG3RE2FKL", got)
	}
	if got := sepChain("default/web:http", "10.244.1.5:8080"); got != "KUBE-SEP-AFGSLHOD2HFNCBX4" {
		t.Errorf("endpoint chain %s, want KUBE-SEP-AFGSLHOD2HFNCBX4", got)
	}
}

func TestAddresses(t *testing.T) {
	got := []string{VIP(0).String(), VIP(300).String(), EndpointIP(2, 3, 10).String(), nth(netip.MustParseAddr("10.0.0.255"), 1).String()}
	want := []string{"10.96.1.0", "10.96.2.44", "10.128.0.23", "10.0.1.0"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("addresses (-want +got):\n%s", d)
	}
	// The largest full size stays inside the service range and below the
	// scenarios' extra services.
	if last := VIP(30000 - 1); last.Compare(extraVIP) >= 0 {
		t.Errorf("VIP of service 29999 %s reaches the extra services' %s", last, extraVIP)
	}
}

func TestParseStatCPU(t *testing.T) {
	// Fields 14..17: utime 150, stime 50, cutime 30, cstime 20 ticks.
	stat := "1234 (kube proxy) S 1 1234 1234 0 -1 4194560 100 0 0 0 150 50 30 20 20 0 12 0 100 1000 100"
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2500 * time.Millisecond; got != want {
		t.Errorf("CPU %s, want %s", got, want)
	}
	if _, err := parseStatCPU("1234 no parenthesis"); err == nil {
		t.Error("a stat line without ')' parsed")
	}
}

func TestParseStraceTotal(t *testing.T) {
	out := "    calls syscall\n--------- ----------------\n       20 read\n        9 write\n        4 sendmsg\n       12 recvmsg\n        3 sendto\n--------- ----------------\n       48 total\n"
	got, err := parseStrace(out)
	if want := (straceCounts{total: 48, messages: 19}); err != nil || got != want {
		t.Errorf("counts %+v, %v; want %+v", got, err, want)
	}
	if _, err := parseStrace("garbage"); err == nil {
		t.Error("no total line parsed")
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP x y
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7e+09
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.6e+09
process_start_time_seconds 1.5e+09
proxysinks_kernel_operations_total{kind="ipvs"} 10
proxysinks_kernel_operations_total{kind="set, entry"} 5
`
	got, err := parseMetrics(strings.NewReader(text), false)
	if err != nil {
		t.Fatal(err)
	}
	// Instants: the latest of the label sets, not their sum.
	want := map[string]float64{"kubeproxy_sync_proxy_rules_last_timestamp_seconds": 1.7e9, "process_start_time_seconds": 1.5e9, "proxysinks_kernel_operations_total": 15}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("metrics (-want +got):\n%s", d)
	}
}

// TestParseMetricsFamilies: a sink reports its one sync under each
// ip_family (copies, counted once); kube-proxy's per-family series are two
// proxiers' syncs (summed), but a timestamp is the latest of them. Other
// labels are summed either way.
func TestParseMetricsFamilies(t *testing.T) {
	text := `kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="1"} 3
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv6",le="1"} 3
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 1.5
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv6"} 1.5
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 3
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv6"} 3
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7e+09
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.7e+09
kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="internal",ip_family="IPv4"} 2
kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="internal",ip_family="IPv6"} 2
kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="external",ip_family="IPv4"} 1
kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="external",ip_family="IPv6"} 1
go_gc_duration_seconds_count 7
`
	for _, tc := range []struct {
		familyCopies bool
		want         map[string]float64
	}{
		{true, map[string]float64{
			"kubeproxy_sync_proxy_rules_duration_seconds_bucket": 3, "kubeproxy_sync_proxy_rules_duration_seconds_sum": 1.5,
			"kubeproxy_sync_proxy_rules_duration_seconds_count": 3, "kubeproxy_sync_proxy_rules_last_timestamp_seconds": 1.7e9,
			"kubeproxy_sync_proxy_rules_no_local_endpoints_total": 3, "go_gc_duration_seconds_count": 7}},
		{false, map[string]float64{
			"kubeproxy_sync_proxy_rules_duration_seconds_bucket": 6, "kubeproxy_sync_proxy_rules_duration_seconds_sum": 3,
			"kubeproxy_sync_proxy_rules_duration_seconds_count": 6, "kubeproxy_sync_proxy_rules_last_timestamp_seconds": 1.7e9,
			"kubeproxy_sync_proxy_rules_no_local_endpoints_total": 6, "go_gc_duration_seconds_count": 7}},
	} {
		got, err := parseMetrics(strings.NewReader(text), tc.familyCopies)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("familyCopies %v: metrics (-want +got):\n%s", tc.familyCopies, d)
		}
	}
}

func TestStats(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := []float64{median(v), percentile(v, 50), percentile(v, 90), percentile(v, 99), mean(v)}; !cmp.Equal(got, []float64{5.5, 5, 9, 10, 5.5}) {
		t.Errorf("median, p50, p90, p99, mean = %v", got)
	}
}

func TestCountDNAT(t *testing.T) {
	text := `	chain service-X {
		meta l4proto tcp dnat ip to numgen random mod 2 map { 0 : 10.128.0.10 . 8080, 1 : 10.128.0.11 . 8080 }
	}
	chain service-Y {
		meta l4proto tcp dnat ip to numgen random mod 1 map { 0 : 10.128.0.1 . 8080 }
	}
`
	if n := countDNAT(text); n != 3 {
		t.Errorf("%d endpoints counted, want 3", n)
	}
	if !strings.Contains(text, dnatTo(netip.MustParseAddr("10.128.0.1"))) || strings.Contains(text, dnatTo(netip.MustParseAddr("10.128.0.12"))) {
		t.Error("dnatTo does not single out an endpoint")
	}
}

func TestChildOf(t *testing.T) {
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	defer cmd.Process.Kill()
	got, err := childOf(os.Getpid())
	if err != nil || got != cmd.Process.Pid {
		t.Errorf("childOf = %d, %v; want %d", got, err, cmd.Process.Pid)
	}
}

func TestParseFloor(t *testing.T) {
	for _, c := range []struct {
		line string
		want Sample
		ok   bool
	}{
		{"BenchmarkFloor/services=10000/pre-encoded-2   \t       3\t1412345678 ns/op\t    110000 kernel-ops/op\t        56.00 syscalls/op",
			Sample{Scenario: ScFloor, Seconds: 1.412345678, KernelOps: 110000, NetlinkSyscalls: 56}, true},
		{"[  12.5] console: BenchmarkFloor/services=1000/endpoints=100/pre-encoded-2 3 250000000 ns/op",
			Sample{Scenario: ScFloor, Seconds: 0.25, KernelOps: -1, NetlinkSyscalls: -1}, true},
		{"BenchmarkFloor/services=1000/pre-encoded", Sample{}, false},
		{"--- FAIL: BenchmarkFloor/services=1000/pre-encoded", Sample{}, false},
		{"BenchmarkFloor/x 3 abc ns/op", Sample{}, false},
		{"MATRIX-SAMPLE {}", Sample{}, false},
	} {
		got, ok := parseFloor(c.line)
		if ok != c.ok {
			t.Errorf("parseFloor(%q) ok %v, want %v", c.line, ok, c.ok)
			continue
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("parseFloor(%q) (-want +got):\n%s", c.line, d)
		}
	}
}

// TestMerge: a newer run replaces, for its group of proxies, only the
// scenarios it measured; the floor goes with the initial sync.
func TestMerge(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 12, 1, h, 0, 0, 0, time.UTC) }
	smp := func(sink, kind, sc string, secs float64) Sample {
		return Sample{Sink: sink, Kind: kind, Scenario: sc, Services: 10, Endpoints: 1, Seconds: secs}
	}
	old := &Results{Label: "old", Started: at(1), Samples: []Sample{
		smp("ipvs-fullstate", KindIPVS, ScFloor, 1),
		smp("ipvs-fullstate", KindIPVS, ScInitial, 2),
		smp("kube-proxy ipvs", KindIPVS, ScInitial, 3),
		smp("ipvs-fullstate", KindIPVS, ScInitialStrace, 4),
		smp("kube-proxy ipvs", KindIPVS, ScInitialStrace, 5),
		smp("iptables", KindIPTables, ScInitial, 6),
	}}
	straceOnly := &Results{Label: "strace", Started: at(2), Samples: []Sample{
		smp("ipvs-fullstate", KindIPVS, ScInitialStrace, 14),
		smp("kube-proxy ipvs", KindIPVS, ScInitialStrace, 15),
	}}
	initialOnly := &Results{Label: "initial", Started: at(3), Samples: []Sample{
		smp("ipvs-incremental", KindIPVS, ScInitial, 22),
	}}
	tables := merge([]*Results{old, straceOnly, initialOnly})
	tb := tables[sizeKey{10, 1}]
	type got struct{ Sink, Scenario, Run string }
	var gotRuns []got
	for _, sink := range []string{"ipvs-fullstate", "ipvs-incremental", "kube-proxy ipvs", "iptables"} {
		for _, sc := range []string{ScFloor, ScInitial, ScInitialStrace} {
			if c := tb.get(sink, sc); len(c.ok) > 0 {
				gotRuns = append(gotRuns, got{sink, sc, tb.label(sink, sc)})
			}
		}
	}
	want := []got{
		// The newest initial sync of the VM's proxies ("initial") replaced
		// the old initial syncs and the floor beside them.
		{"ipvs-fullstate", ScInitialStrace, "strace"},
		{"ipvs-incremental", ScInitial, "initial"},
		{"kube-proxy ipvs", ScInitialStrace, "strace"},
		// Another group: untouched.
		{"iptables", ScInitial, "old"},
	}
	if d := cmp.Diff(want, gotRuns); d != "" {
		t.Errorf("merged runs -want +got:\n%s", d)
	}
	if l := tb.labels(); l != "initial, old, strace" {
		t.Errorf("labels = %q", l)
	}
}

// TestMergeSupplement: a supplement run fills only the sizes and
// scenarios no other run measured; it takes out no kube-proxy row.
func TestMergeSupplement(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 12, 1, h, 0, 0, 0, time.UTC) }
	smp := func(sink, kind string, n int, sc string) Sample {
		return Sample{Sink: sink, Kind: kind, Scenario: sc, Services: n, Endpoints: 10, Seconds: 1}
	}
	old := &Results{Label: "old", Started: at(1), Samples: []Sample{
		smp("ipvs-fullstate", KindIPVS, 10000, ScInitial),
		smp("kube-proxy ipvs", KindIPVS, 10000, ScInitial),
	}}
	sup := &Results{Label: "sup", Started: at(2), Supplement: true, Samples: []Sample{
		smp("ipvs-fullstate", KindIPVS, 10000, ScFloor),
		smp("ipvs-fullstate", KindIPVS, 10000, ScInitial),
		smp("ipvs-fullstate", KindIPVS, 50000, ScInitial),
		smp("iptables", KindIPTables, 10000, ScInitial),
	}}
	tables := merge([]*Results{old, sup})
	type got struct {
		N          int
		Sink, Run  string
		Floor, Ini int
	}
	var runs []got
	for _, k := range []sizeKey{{10000, 10}, {50000, 10}} {
		for _, sink := range []string{"ipvs-fullstate", "kube-proxy ipvs", "iptables"} {
			if tb := tables[k]; tb != nil && tb.label(sink, ScInitial) != "—" {
				runs = append(runs, got{k.n, sink, tb.label(sink, ScInitial), len(tb.get(sink, ScFloor).ok), len(tb.get(sink, ScInitial).ok)})
			}
		}
	}
	want := []got{
		{10000, "ipvs-fullstate", "old", 0, 1}, // the supplement's initial and floor left out
		{10000, "kube-proxy ipvs", "old", 0, 1},
		{10000, "iptables", "sup", 0, 1}, // the host's group: nobody else measured it
		{50000, "ipvs-fullstate", "sup", 0, 1},
	}
	if d := cmp.Diff(want, runs); d != "" {
		t.Errorf("merged runs -want +got:\n%s", d)
	}
}

// TestMemory: the memory section's figures, verdicts and the runs they
// come from; a failed kube-proxy sync is named, not compared.
func TestMemory(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 12, 1, h, 0, 0, 0, time.UTC) }
	smp := func(sink, kind string, n int, mb float64, err string) Sample {
		return Sample{Sink: sink, Kind: kind, Scenario: ScInitial, Services: n, Endpoints: 10, Seconds: 1, PeakRSSMB: mb, Error: err}
	}
	kp := &Results{Label: "kp", Started: at(1), Samples: []Sample{
		smp("kube-proxy ipvs", KindIPVS, 10000, 230, ""),
		smp("kube-proxy ipvs", KindIPVS, 10000, 234, ""),
		smp("kube-proxy iptables", KindIPTables, 10000, 0, "kernel not programmed in time after 6m0s\nmore"),
		smp("kube-proxy nftables", KindNFTables, 10000, 270, ""),
	}}
	sup := &Results{Label: "sup", Started: at(2), Supplement: true, Samples: []Sample{
		smp("ipvs-fullstate", KindIPVS, 10000, 200, ""),
		smp("ipvs-fullstate", KindIPVS, 50000, 900, ""),
		smp("ipvs-incremental", KindIPVS, 10000, 240, ""),
		smp("ipvs-incremental", KindIPVS, 50000, 1400, ""),
		smp("iptables", KindIPTables, 10000, 150, ""),
		smp("nftables", KindNFTables, 10000, 200, ""),
	}}
	// A later run of 50,000 x 10 alone: the growth spans two runs.
	fifty := &Results{Label: "fifty", Started: at(3), Supplement: true, Samples: []Sample{
		smp("iptables", KindIPTables, 50000, 600, ""),
	}}
	var b strings.Builder
	var g goals
	memory(&b, []*Results{kp, sup, fifty}, &g)
	for _, want := range []string{
		"- ipvs-fullstate at 10,000 x 10, peak RSS ≤ kube-proxy ipvs's: **met**, 200 MB (run sup) against 234 MB (run kp): 0.85x.\n",
		"- ipvs-fullstate from 10,000 to 50,000 x 10 (5x the cluster), growth ≤ 5.5x: **met**, 200 MB to 900 MB (run sup): 4.50x.\n",
		"- ipvs-incremental at 10,000 x 10, peak RSS ≤ kube-proxy ipvs's: **missed**, 240 MB (run sup) against 234 MB (run kp): 1.03x.\n",
		"growth ≤ 5.5x: **missed**, 240 MB to 1400 MB (run sup): 5.83x.\n",
		"- iptables at 10,000 x 10: 150 MB (run sup); kube-proxy iptables has no figure to compare: it never finished its initial sync at this size (kernel not programmed in time after 6m0s (run kp)); kube-proxy nftables, its other mode on this host: 270 MB (run kp).\n",
		"- iptables from 10,000 to 50,000 x 10 (5x the cluster), growth ≤ 5.5x: **met**, 150 MB to 600 MB (run sup to run fifty): 4.00x.\n",
		"- nftables from 10,000 to 50,000 x 10: not measured.\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("memory section lacks %q:\n%s", want, b.String())
		}
	}
	want := []summaryTarget{
		{31, goalMemSmall, "**met**: ipvs-fullstate 200 against 234 MB (0.85x) at 10,000 x 10; **missed**: ipvs-incremental 240 against 234 MB (1.03x) at 10,000 x 10; not measured: iptables 150 MB (kube-proxy iptables never finished; kube-proxy nftables 270 MB) at 10,000 x 10; **met**: nftables 200 against 270 MB (0.74x) at 10,000 x 10"},
		{31, goalMemGrowth, "**met**: ipvs-fullstate 4.50x (200 to 900 MB, run sup); **missed**: ipvs-incremental 5.83x (240 to 1400 MB, run sup); **met**: iptables 4.00x (150 to 600 MB, run sup to run fifty); not measured: nftables"},
	}
	if diff := cmp.Diff(want, summaryTargets(g.list)); diff != "" {
		t.Errorf("memory goals (-want +got):\n%s", diff)
	}
}

// TestSectionUnmeasured: a proxy whose initial sync timed out keeps a row
// in the later scenarios' tables, saying why it has no numbers there.
func TestSectionUnmeasured(t *testing.T) {
	smp := func(sink, sc, err string) Sample {
		return Sample{Sink: sink, Kind: KindIPVS, Scenario: sc, Services: 10, Endpoints: 1, Seconds: 1, Error: err}
	}
	timeout := fmt.Errorf("%w after 25m0s (last probe error: <nil>)", errTimeout).Error()
	tables := merge([]*Results{{Label: "r", Samples: []Sample{
		smp("ipvs-incremental", ScInitial, ""),
		smp("kube-proxy ipvs", ScInitial, timeout),
		smp("ipvs-incremental", ScEndpointAdd, ""),
	}}})
	var b strings.Builder
	sectionTable(&b, tables[sizeKey{10, 1}], ScEndpointAdd)
	want := "| kube-proxy ipvs | 0 | not measured: its initial sync had not programmed the kernel after 1500 s |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
	b.Reset()
	sectionTable(&b, tables[sizeKey{10, 1}], ScRestart)
	if b.Len() != 0 {
		t.Errorf("a scenario nobody measured has a table:\n%s", b.String())
	}
}

// TestPlanFromEnv: the knobs of make bench-report, and a clear error
// naming the variable for each bad value.
func TestPlanFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		want    func(p *plan) // the expected changes to the full plan
		wantErr string
	}{
		{env: nil, want: func(*plan) {}},
		{env: map[string]string{SizesEnv: "30000x10,1000x100", RepsEnv: "2", EndpointRepsEnv: "5", SteadyEnv: "31s", TimeoutEnv: "25m", ProbeGapEnv: "20ms", LabelEnv: "x", SinksEnv: "iptables, kube-proxy iptables"},
			want: func(p *plan) {
				p.sizes, p.reps, p.endpointReps, p.steady, p.timeout, p.probeGap, p.label = [][2]int{{30000, 10}, {1000, 100}}, 2, 5, 31*time.Second, 25*time.Minute, 20*time.Millisecond, "x"
				p.sinks = []string{"iptables", "kube-proxy iptables"}
			}},
		{env: map[string]string{ScenariosEnv: "initial, strace"}, want: func(p *plan) { p.only = map[string]bool{"initial": true, "strace": true} }},
		{env: map[string]string{SupplementEnv: "1"}, want: func(p *plan) { p.supplement = true }},
		{env: map[string]string{SupplementEnv: "yes"}, wantErr: `PROXYSINKS_BENCH_SUPPLEMENT: bad value "yes" (want 1 or 0)`},
		{env: map[string]string{SizesEnv: "1000"}, wantErr: `PROXYSINKS_BENCH_SIZES: bad size "1000" (want NxM)`},
		{env: map[string]string{SizesEnv: "0x10"}, wantErr: `PROXYSINKS_BENCH_SIZES: bad size "0x10" (want NxM)`},
		{env: map[string]string{RepsEnv: "0"}, wantErr: `PROXYSINKS_BENCH_REPS: bad count "0" (want a positive integer)`},
		{env: map[string]string{EndpointRepsEnv: "many"}, wantErr: `PROXYSINKS_BENCH_ENDPOINT_REPS: bad count "many" (want a positive integer)`},
		{env: map[string]string{SteadyEnv: "-1s"}, wantErr: `PROXYSINKS_BENCH_STEADY: bad duration "-1s" (want a positive Go duration, such as 30m)`},
		{env: map[string]string{TimeoutEnv: "30"}, wantErr: `PROXYSINKS_BENCH_TIMEOUT: bad duration "30" (want a positive Go duration, such as 30m)`},
		{env: map[string]string{ProbeGapEnv: "0s"}, wantErr: `PROXYSINKS_BENCH_PROBE_GAP: bad duration "0s" (want a positive Go duration, such as 30m)`},
		{env: map[string]string{ScenariosEnv: "initial,floor"}, wantErr: `PROXYSINKS_BENCH_SCENARIOS: no scenario "floor" (want some of endpoint, initial, nft-floor, percent, restart, service, steady, strace)`},
	} {
		got, err := planFromEnv(func(k string) string { return tc.env[k] }, false)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%v: error %v, want %s", tc.env, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		want, _ := planFromEnv(func(string) string { return "" }, false)
		tc.want(&want)
		if d := cmp.Diff(want, got, cmp.AllowUnexported(plan{})); d != "" {
			t.Errorf("%v: plan -want +got:\n%s", tc.env, d)
		}
	}
}

// TestNeedsProxy: the strace cell and the nftables floor need no initial
// sync before them; any other cell does.
func TestNeedsProxy(t *testing.T) {
	for only, want := range map[string]bool{"": true, "strace": false, "endpoint": true, "strace,initial": true, "nft-floor": false, "nft-floor,strace": false, "nft-floor,initial": true} {
		c := Config{}
		if only != "" {
			c.Only = map[string]bool{}
			for _, f := range strings.Split(only, ",") {
				c.Only[f] = true
			}
		}
		if got := c.needsProxy(); got != want {
			t.Errorf("needsProxy with %q = %v, want %v", only, got, want)
		}
	}
}

// TestInitialReps: the initial syncs are repeated when measured; the
// other cells alone need one.
func TestInitialReps(t *testing.T) {
	for only, want := range map[string]int{"": 3, "initial": 3, "endpoint,initial": 3, "endpoint": 1, "restart,steady": 1} {
		c := Config{Reps: 3}
		if only != "" {
			c.Only = map[string]bool{}
			for _, f := range strings.Split(only, ",") {
				c.Only[f] = true
			}
		}
		if got := c.initialReps(); got != want {
			t.Errorf("initialReps with %q = %d, want %d", only, got, want)
		}
	}
}

func TestRelaunchForChanges(t *testing.T) {
	for _, tc := range []struct {
		only       string
		changeArgs bool
		want       bool
	}{
		{"", true, false}, // the restart cells set the period
		{"initial,restart,endpoint", true, false},
		{"initial,endpoint", true, true}, // no restart cell: started again, unmeasured
		{"service", true, true},
		{"initial,percent,steady", true, true},
		{"initial,steady", true, false},    // no change cell
		{"initial,endpoint", false, false}, // nothing to change
	} {
		c := Config{}
		if tc.only != "" {
			c.Only = map[string]bool{}
			for _, f := range strings.Split(tc.only, ",") {
				c.Only[f] = true
			}
		}
		if tc.changeArgs {
			c.ChangeArgs = []string{"--sync-period=1h"}
		}
		if got := c.relaunchForChanges(); got != tc.want {
			t.Errorf("relaunchForChanges with %q, ChangeArgs %v = %v, want %v", tc.only, c.ChangeArgs, got, tc.want)
		}
	}
}

// TestParseOwnFloor: BenchmarkFirstSyncFloor's line of the size asked
// for, chunked, is a sample; other sizes, variants and lines are not.
func TestParseOwnFloor(t *testing.T) {
	line := "BenchmarkFirstSyncFloor/10000x10/chunked-2         \t       1\t10570864093 ns/op\t      4361 floor-cpu-ms/op\t      4521 floor-ms/op\t      5462 sync-cpu-ms/op\t         1.252 sync-cpu/floor-cpu\t      5930 sync-ms/op\t         1.312 sync/floor\t        13.00 transactions"
	for _, c := range []struct {
		line string
		n    int
		want Sample
		ok   bool
	}{
		{line, 10000, Sample{Scenario: ScNFTOwnFloor, Services: 10000, Endpoints: 10, Seconds: 4.521, CPUSeconds: 4.361, SyncSeconds: 5.93, Syncs: 1, KernelOps: -1, NetlinkSyscalls: -1}, true},
		{line, 1000, Sample{}, false},
		{strings.Replace(line, "chunked", "one-tx", 1), 10000, Sample{}, false},
		{"BenchmarkFirstSyncFloor/10000x10/chunked-2 1 100 ns/op", 10000, Sample{}, false},
		{"--- FAIL: BenchmarkFirstSyncFloor/10000x10/chunked-2", 10000, Sample{}, false},
	} {
		got, ok := parseOwnFloor(c.line, c.n, 10)
		if ok != c.ok {
			t.Errorf("parseOwnFloor(%q, %d) ok %v, want %v", c.line, c.n, ok, c.ok)
			continue
		}
		if d := cmp.Diff(c.want, got, cmpopts.EquateApprox(0, 1e-9)); d != "" {
			t.Errorf("parseOwnFloor(%q, %d) (-want +got):\n%s", c.line, c.n, d)
		}
	}
}

// TestSyncLogBytes: the nftables sink's sync lines count their bytes,
// split across writes; other lines and attributes named like it do not.
func TestSyncLogBytes(t *testing.T) {
	var l lockedBuffer
	for _, w := range []string{
		"time=2026-12-06T05:00:00Z level=INFO msg=sync full=true transactions=2 rules=3 messages=40 bytes=1200 duration=1.5s\n",
		"time=2026-12-06T05:00:01Z level=INFO msg=sync full=false transactions=1 messages=4 by",
		"tes=300 duration=1ms\ntime=x level=ERROR msg=\"sync failed\" full=false bytes=50 error=\"refused\"\n",
		"time=x level=INFO msg=\"nftables proxier\" bytes=9999\n",
		"time=x level=INFO msg=sync restore-bytes=77 duration=1ms\n",
		"time=x level=INFO msg=sync bytes=5", // unfinished: not counted yet
	} {
		if _, err := l.Write([]byte(w)); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.syncBytes(); got != 1550 {
		t.Errorf("syncBytes = %d, want 1550", got)
	}
	if _, err := l.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	if got := l.syncBytes(); got != 1555 {
		t.Errorf("syncBytes after the line ended = %d, want 1555", got)
	}
}

func TestParseRestoreLog(t *testing.T) {
	r, n := parseRestoreLog("120 iptables-restore\n30 ip6tables-nft-restore\n500 nft\n7 nft\n\n")
	if r != 150 || n != 507 {
		t.Errorf("parseRestoreLog = %d, %d; want 150, 507", r, n)
	}
}

// TestNFTWrapper: the nft wrapper counts the input of nft -f only (not
// nft --check -f, not nft list), and hands nft its arguments and input.
func TestNFTWrapper(t *testing.T) {
	real := t.TempDir()
	// A fake nft first on PATH when the wrappers are written: it echoes
	// its arguments and input.
	if err := os.WriteFile(real+"/nft", []byte("#!/bin/sh\necho \"args: $*\"\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", real+":"+os.Getenv("PATH"))
	wrap := t.TempDir()
	if err := writeWrappers(wrap); err != nil {
		t.Fatal(err)
	}
	log := t.TempDir() + "/log"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-f", "-"}, "args: -f -\nadd table ip kube-proxy\n"},
		{[]string{"--check", "-f", "-"}, "args: --check -f -\nadd table ip kube-proxy\n"},
		{[]string{"--json", "list", "table", "ip", "kube-proxy"}, "args: --json list table ip kube-proxy\nadd table ip kube-proxy\n"},
	} {
		cmd := exec.Command(wrap+"/nft", c.args...)
		cmd.Env = append(os.Environ(), restoreLogEnv+"="+log)
		cmd.Stdin = strings.NewReader("add table ip kube-proxy\n")
		out, err := cmd.Output()
		if err != nil || string(out) != c.want {
			t.Errorf("nft %v = %q, %v; want %q", c.args, out, err, c.want)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if r, n := parseRestoreLog(string(b)); r != 0 || n != 24 {
		t.Errorf("wrapper log %q: restore %d, nft %d; want 0, 24", b, r, n)
	}
}

// TestMergeBackEnds: on the host, a run of the nftables proxies alone
// replaces the nftables rows of its scenarios, not the iptables ones.
func TestMergeBackEnds(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 12, 1, h, 0, 0, 0, time.UTC) }
	smp := func(sink, kind string) Sample {
		return Sample{Sink: sink, Kind: kind, Scenario: ScInitial, Services: 10, Endpoints: 1, Seconds: 1}
	}
	old := &Results{Label: "old", Started: at(1), Samples: []Sample{
		smp("iptables", KindIPTables), smp("kube-proxy iptables", KindIPTables), smp("kube-proxy nftables", KindNFTables),
	}}
	nft := &Results{Label: "nft", Started: at(2), Samples: []Sample{smp("nftables", KindNFTables), smp("kube-proxy nftables", KindNFTables)}}
	tb := merge([]*Results{old, nft})[sizeKey{10, 1}]
	got := map[string]string{}
	for _, s := range []string{"iptables", "kube-proxy iptables", "nftables", "kube-proxy nftables"} {
		got[s] = tb.label(s, ScInitial)
	}
	want := map[string]string{"iptables": "old", "kube-proxy iptables": "old", "nftables": "nft", "kube-proxy nftables": "nft"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("runs of the rows (-want +got):\n%s", d)
	}
}
