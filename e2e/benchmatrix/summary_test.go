package benchmatrix

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/e2e/vm"
)

// sample is a synthetic sample of a proxy at n x 10.
func sample(sink, kind, sc string, n int, f func(*Sample)) Sample {
	s := Sample{Sink: sink, Kind: kind, KubeProxy: strings.HasPrefix(sink, "kube-proxy"), Scenario: sc, Services: n, Endpoints: 10, Seconds: 1}
	if f != nil {
		f(&s)
	}
	return s
}

// initialSample is an initial sync of secs, own sync own, cpu CPU-s and
// rss MB.
func initialSample(sink, kind string, n int, secs, own, cpu, rss float64) Sample {
	return sample(sink, kind, ScInitial, n, func(s *Sample) {
		s.Seconds, s.SyncSeconds, s.Syncs, s.CPUSeconds, s.PeakRSSMB = secs, own, 1, cpu, rss
	})
}

// changeSample is a one-endpoint change (sc) with own sync own.
func changeSample(sink, kind, sc string, n int, own float64) Sample {
	return sample(sink, kind, sc, n, func(s *Sample) { s.SyncSeconds, s.Syncs = own, 1 })
}

// TestSummaryRows: the summary's ratios at 10,000 x 10 from synthetic
// runs: kube-proxy's figure over the sink's, a lower bound where
// kube-proxy timed out, "kube-proxy unfinished" for its other figures,
// "not measured" for cells nobody measured, and bytes a run did not count.
func TestSummaryRows(t *testing.T) {
	const n = 10000
	timeout := "kernel not programmed in time after 6m0s (last probe error: <nil>)"
	for _, tc := range []struct {
		name string
		runs []*Results
		want []summaryRow
	}{{
		name: "ratios against kube-proxy",
		runs: []*Results{{Label: "r", CountsNFT: true, Samples: []Sample{
			initialSample("ipvs-fullstate", KindIPVS, n, 2, 1, 4, 200),
			initialSample("kube-proxy ipvs", KindIPVS, n, 100, 50, 80, 250),
			changeSample("ipvs-fullstate", KindIPVS, ScEndpointAdd, n, 0.01),
			changeSample("ipvs-fullstate", KindIPVS, ScEndpointRemove, n, 0.03),
			changeSample("kube-proxy ipvs", KindIPVS, ScEndpointAdd, n, 2),
			sample("ipvs-fullstate", KindIPVS, ScRestart, n, nil),
			sample("kube-proxy ipvs", KindIPVS, ScRestart, n, func(s *Sample) { s.RestoreBytes = 1873 }),
			initialSample(nftSink, KindNFTables, n, 10, 5, 6, 220),
			initialSample(nftKP, KindNFTables, n, 30, 15, 18, 250),
			sample(nftSink, KindNFTables, ScRestart, n, nil),
			sample(nftKP, KindNFTables, ScRestart, n, func(s *Sample) { s.NFTBytes = 5_000_000 }),
		}}},
		want: []summaryRow{
			{Mode: "ipvs", Size: "10,000 x 10", Sink: "ipvs-fullstate", Time: "50.0x", Own: "50.0x", CPU: "20.0x", Endpoint: "100x", Restart: "0 / 1,873", RSS: "200 / 250"},
			{Mode: "ipvs", Size: "10,000 x 10", Sink: "ipvs-incremental", Time: notMeasured, Own: notMeasured, CPU: notMeasured, Endpoint: notMeasured, Restart: notMeasured, RSS: notMeasured},
			{Mode: "iptables", Size: "10,000 x 10", Sink: "iptables", Time: notMeasured, Own: notMeasured, CPU: notMeasured, Endpoint: notMeasured, Restart: notMeasured, RSS: notMeasured},
			{Mode: "nftables", Size: "10,000 x 10", Sink: nftSink, Time: "3.0x", Own: "3.0x", CPU: "3.0x", Endpoint: notMeasured, Restart: "0 / 5,000,000", RSS: "220 / 250"},
		},
	}, {
		name: "kube-proxy never finished",
		runs: []*Results{{Label: "r", Samples: []Sample{
			initialSample("iptables", KindIPTables, n, 9, 6, 6, 150),
			sample("kube-proxy iptables", KindIPTables, ScInitial, n, func(s *Sample) { s.Error = timeout }),
			changeSample("iptables", KindIPTables, ScEndpointAdd, n, 0.2),
			sample("iptables", KindIPTables, ScRestart, n, nil),
		}}},
		want: []summaryRow{
			{Mode: "ipvs", Size: "10,000 x 10", Sink: "ipvs-fullstate", Time: notMeasured, Own: notMeasured, CPU: notMeasured, Endpoint: notMeasured, Restart: notMeasured, RSS: notMeasured},
			{Mode: "ipvs", Size: "10,000 x 10", Sink: "ipvs-incremental", Time: notMeasured, Own: notMeasured, CPU: notMeasured, Endpoint: notMeasured, Restart: notMeasured, RSS: notMeasured},
			{Mode: "iptables", Size: "10,000 x 10", Sink: "iptables", Time: "> 40.0x", Own: kpUnfinished, CPU: kpUnfinished, Endpoint: kpUnfinished, Restart: "0 / " + kpUnfinished, RSS: "150 / " + kpUnfinished},
			{Mode: "nftables", Size: "10,000 x 10", Sink: nftSink, Time: notMeasured, Own: notMeasured, CPU: notMeasured, Endpoint: notMeasured, Restart: notMeasured, RSS: notMeasured},
		},
	}, {
		name: "nft bytes not counted, own sync not read, the sink below a tick",
		runs: []*Results{{Label: "old", Samples: []Sample{
			sample(nftSink, KindNFTables, ScInitial, n, func(s *Sample) { s.Seconds, s.CPUSeconds, s.PeakRSSMB = 10, 0, 200 }),
			sample(nftKP, KindNFTables, ScInitial, n, func(s *Sample) { s.Seconds, s.CPUSeconds, s.PeakRSSMB = 30, 18, 250 }),
			sample(nftSink, KindNFTables, ScRestart, n, nil),
			sample(nftKP, KindNFTables, ScRestart, n, nil),
		}}},
		want: []summaryRow{
			{Mode: "ipvs", Size: "10,000 x 10", Sink: "ipvs-fullstate", Time: notMeasured, Own: notMeasured, CPU: notMeasured, Endpoint: notMeasured, Restart: notMeasured, RSS: notMeasured},
			{Mode: "ipvs", Size: "10,000 x 10", Sink: "ipvs-incremental", Time: notMeasured, Own: notMeasured, CPU: notMeasured, Endpoint: notMeasured, Restart: notMeasured, RSS: notMeasured},
			{Mode: "iptables", Size: "10,000 x 10", Sink: "iptables", Time: notMeasured, Own: notMeasured, CPU: notMeasured, Endpoint: notMeasured, Restart: notMeasured, RSS: notMeasured},
			{Mode: "nftables", Size: "10,000 x 10", Sink: nftSink, Time: "3.0x", Own: notMeasured, CPU: "sink 0 (below the resolution)", Endpoint: notMeasured, Restart: "not counted / not counted", RSS: "200 / 250"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var got []summaryRow
			for _, r := range summaryRows(merge(tc.runs)) {
				if r.Size == "10,000 x 10" {
					got = append(got, r)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rows at 10,000 x 10 (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSummaryRowsSizes: one row per mode's sink and size of the full
// matrix, whatever the runs measured (a size the runs add, 50,000 x 10,
// is not one).
func TestSummaryRowsSizes(t *testing.T) {
	rows := summaryRows(merge([]*Results{{Label: "r", Samples: []Sample{initialSample("iptables", KindIPTables, 50000, 1, 1, 1, 1)}}}))
	if len(rows) != 4*len(fullSizes) {
		t.Fatalf("%d rows, want %d", len(rows), 4*len(fullSizes))
	}
	for _, r := range rows {
		if r.Time != notMeasured || r.RSS != notMeasured {
			t.Errorf("row of a size nobody measured: %+v", r)
		}
	}
}

// TestOutcome: the summary's outcome of one target from its goals.
func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target string
		goals  []goal
		want   string
	}{{
		name:   "one verdict and size: said once",
		target: "IPVS sinks: initial sync ≥ 10x faster",
		goals: []goal{
			{Sink: "a", Verdict: met, Got: "59.9x", At: "10,000 x 10"},
			{Sink: "b", Verdict: met, Got: "43.7x", At: "10,000 x 10"},
		},
		want: "**met**: a 59.9x, b 43.7x at 10,000 x 10",
	}, {
		name:   "the only sink, named by the target, left out; sizes apart; why once",
		target: "nftables idle",
		goals: []goal{
			{Sink: "nftables", Verdict: missed, Got: "3.0x", At: "1,000 x 10", Why: "#w"},
			{Sink: "nftables", Verdict: missed, Got: "4.0x", At: "10,000 x 10", Why: "#w"},
			{Sink: "nftables", Verdict: met, Got: "0.06 against 0.06", At: "1,000 x 100"},
		},
		want: "**missed**: 3.0x at 1,000 x 10, 4.0x at 10,000 x 10 ([why](#w)); **met**: 0.06 against 0.06 at 1,000 x 100",
	}, {
		name:   "not measured: no figure",
		target: "growth",
		goals:  []goal{{Sink: "a"}, {Sink: "b"}},
		want:   "not measured: a, b",
	}, {
		name:   "not measured, the only sink",
		target: "nftables restart",
		goals:  []goal{{Sink: "nftables"}},
		want:   "not measured",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcome(tc.target, tc.goals); got != tc.want {
				t.Errorf("outcome:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestSummaryTargets: goals of one target grouped, in the order the
// sections gave them.
func TestSummaryTargets(t *testing.T) {
	got := summaryTargets([]goal{
		{Issue: 13, Target: "x", Sink: "a", Verdict: met, Got: "1x"},
		{Issue: 33, Target: "y", Sink: "c", Verdict: missed, Got: "2x", Why: "#y"},
		{Issue: 13, Target: "x", Sink: "b", Verdict: met, Got: "3x"},
	})
	want := []summaryTarget{{13, "x", "**met**: a 1x, b 3x"}, {33, "y", "**missed**: c 2x ([why](#y))"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
}

// TestRenderSummary: the report opens with the summary, one screen long,
// whose targets are those the sections state, missed ones with their
// cause below the nftables targets.
func TestRenderSummary(t *testing.T) {
	const n = 10000
	r := &Results{Label: "r", Started: time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC), CountsNFT: true, Samples: []Sample{
		initialSample(nftSink, KindNFTables, 1000, 0.9, 0.1, 0.3, 70),
		initialSample(nftKP, KindNFTables, 1000, 3, 0.76, 1.5, 80),
		initialSample(nftSink, KindNFTables, n, 12, 5, 6, 220),
		initialSample(nftKP, KindNFTables, n, 34, 15, 17, 250),
		changeSample(nftSink, KindNFTables, ScEndpointAdd, n, 0.026),
		changeSample(nftKP, KindNFTables, ScEndpointAdd, n, 0.46),
	}}
	report, meth, err := renderText([]*Results{r})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(report, "# Benchmark report") || !strings.Contains(report, "\n\n## Summary\n\n") {
		t.Fatalf("no summary after the title:\n%s", report)
	}
	summary, _, _ := strings.Cut(report[strings.Index(report, "## Summary"):], "## Runs")
	if lines := strings.Count(summary, "\n"); lines > 45 {
		t.Errorf("summary of %d lines, more than a screen:\n%s", lines, summary)
	}
	for _, want := range []string{
		"| nftables | 10,000 x 10 | nftables | 2.8x | 3.0x | 2.8x | 17.7x | not measured | 220 / 250 |\n",
		"| 33 | " + goalNFTOwn + " | **missed**: 3.0x (short by 3.3x) at 10,000 x 10 ([why](#targets-of-the-nftables-sink-issue-33)) |\n",
		"| 33 | " + goalNFTEndpoint + " | **missed**: 17.7x (short by 5.7x) at 10,000 x 10 ([why](#targets-of-the-nftables-sink-issue-33)) |\n",
		"| 31 | " + goalMemGrowth + " | not measured: ipvs-fullstate, ipvs-incremental, iptables, nftables |\n",
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	for _, want := range []string{
		"Own initial sync by size, 1,000 x 10: the sink 0.10 s, kube-proxy nftables 0.76 s; 10,000 x 10: the sink 5.00 s, kube-proxy nftables 15.0 s (the sink's 50.0x for 10x the services)",
		"- [Notes on these runs](report/NOTES.md)",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(report, "## Method") || !strings.Contains(meth, "## Method") || !strings.Contains(meth, "## Runs' commands") {
		t.Errorf("the method is not on its own page:\n%s", meth)
	}
}

// TestReportUpToDate: bench/REPORT.md and the method page are what the
// results files in bench/report give (regenerate them with
// PROXYSINKS_BENCH_RENDER=1 go test -run TestMatrixRender ./e2e/benchmatrix/).
func TestReportUpToDate(t *testing.T) {
	root, err := vm.WorkspaceRoot()
	if err != nil {
		t.Skipf("no workspace: %v", err)
	}
	dir := filepath.Join(root, "bench", "report")
	runs, err := readRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	report, meth, err := renderText(runs)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{filepath.Join(root, "bench", "REPORT.md"): report, filepath.Join(dir, MethodFile): meth} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, string(got)); diff != "" {
			t.Errorf("%s is not what the results give; run %s=1 go test -run TestMatrixRender ./e2e/benchmatrix/ (-generated +checked in):\n%s", path, RenderEnv, diff)
		}
	}
	// Every link into the hand-written notes names one of their headings.
	notes, err := os.ReadFile(filepath.Join(dir, "NOTES.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, l := range strings.Split(string(notes), "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			headings[anchor(h)] = true
		}
	}
	for _, m := range notesLinkRE.FindAllStringSubmatch(report, -1) {
		if !headings[m[1]] {
			t.Errorf("the report links to report/NOTES.md#%s, which no heading of the notes is", m[1])
		}
	}
}

var notesLinkRE = regexp.MustCompile(`report/NOTES\.md#([^)\s]+)`)

// TestAnchor: the ids GitHub gives the notes' headings.
func TestAnchor(t *testing.T) {
	for h, want := range map[string]string{
		"The nftables sink's initial sync": "the-nftables-sinks-initial-sync",
		"Idle at 10,000 x 10":              "idle-at-10000-x-10",
		"Event-to-programmed":              "event-to-programmed",
		"The floor target is missed, by less with routes and overlapping writes": "the-floor-target-is-missed-by-less-with-routes-and-overlapping-writes",
	} {
		if got := anchor(h); got != want {
			t.Errorf("anchor(%q) = %q, want %q", h, got, want)
		}
	}
}
