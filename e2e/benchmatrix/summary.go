package benchmatrix

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// verdict is a target's outcome.
type verdict int

const (
	unmeasured verdict = iota
	met
	missed
)

func (v verdict) String() string {
	switch v {
	case met:
		return "**met**"
	case missed:
		return "**missed**"
	}
	return "not measured"
}

// goal is one target's outcome for one proxy, as a targets section states
// it; the summary lists them, grouped by target.
type goal struct {
	Issue   int
	Target  string // what the issue asks, e.g. "initial sync ≥ 10x faster than kube-proxy ipvs"
	Sink    string
	Verdict verdict
	// Got is the figure, e.g. "59.9x" or "2.8x, short by 3.6x"; for an
	// unmeasured goal, what is missing.
	Got string
	// At is the size (or sizes) the figure is from.
	At string
	// Why is the address of the explanation of a missed target.
	Why string
}

// goals collects the targets' outcomes in the order the sections write
// them. A nil *goals records nothing.
type goals struct{ list []goal }

func (g *goals) add(x goal) {
	if g != nil {
		g.list = append(g.list, x)
	}
}

// summaryModes are the summary's rows: each kube-proxy mode with the
// sinks that replace it (the IPVS sinks' "routes" variants are in the
// tables only).
var summaryModes = []struct {
	mode, kp string
	sinks    []string
}{
	{"ipvs", "kube-proxy ipvs", []string{"ipvs-fullstate", "ipvs-incremental"}},
	{"iptables", "kube-proxy iptables", []string{"iptables"}},
	{"nftables", nftKP, []string{nftSink}},
}

// summaryRow is one line of the summary's table: a sink against the
// kube-proxy of its mode at one size, each cell formatted (a ratio is
// kube-proxy's figure over the sink's).
type summaryRow struct {
	Mode, Size, Sink string
	// Initial sync: time from process start to programmed, own sync time,
	// CPU.
	Time, Own, CPU string
	// Endpoint is the own sync time of one endpoint change.
	Endpoint string
	// Restart is the bytes written on a restart with the cluster
	// unchanged, sink / kube-proxy.
	Restart string
	// RSS is the initial sync's peak RSS in MB, sink / kube-proxy.
	RSS string
}

// Cells that hold no figure.
const (
	notMeasured  = "not measured"
	kpUnfinished = "kube-proxy unfinished"
)

// summaryRows builds the summary's table at the full matrix's sizes.
func summaryRows(tables map[sizeKey]*table) []summaryRow {
	var rows []summaryRow
	for _, md := range summaryModes {
		for _, sz := range fullSizes {
			k := sizeKey{sz[0], sz[1]}
			t := tables[k]
			if t == nil {
				t = &table{}
			}
			for _, s := range md.sinks {
				rows = append(rows, summaryRow{
					Mode: md.mode, Size: k.String(), Sink: s,
					Time:     timeCell(t, s, md.kp),
					Own:      ratioCell(t, s, md.kp, ScInitial, ownSeconds, median),
					CPU:      ratioCell(t, s, md.kp, ScInitial, cpu, mean),
					Endpoint: endpointCell(t, s, md.kp),
					Restart:  restartCell(t, s, md.kp),
					RSS:      rssCell(t, s, md.kp),
				})
			}
		}
	}
	return rows
}

// finite drops the NaNs (figures a sample lacks) from sorted values.
func finite(v []float64) []float64 {
	return slices.DeleteFunc(v, math.IsNaN)
}

// unfinished reports whether kube-proxy's initial sync at this size timed
// out: it has no figure in any scenario then.
func unfinished(t *table, kp string) bool {
	c := t.get(kp, ScInitial)
	return len(c.ok) == 0 && c.timedOut() > 0
}

// missingKP is the cell of a figure the sink has and kube-proxy lacks.
func missingKP(t *table, kp string) string {
	if unfinished(t, kp) {
		return kpUnfinished
	}
	return notMeasured
}

// fmtX formats a ratio of kube-proxy's figure over the sink's.
func fmtX(kp, sink float64) string {
	switch r := kp / sink; {
	case sink <= 0:
		return "sink 0 (below the resolution)"
	case r >= 100:
		return thousands(int(math.Round(r))) + "x"
	default:
		return fmt.Sprintf("%.1fx", r)
	}
}

// ratioCell is kube-proxy's aggregate of f over the sink's in scenario sc.
func ratioCell(t *table, s, kp, sc string, f func(Sample) float64, agg func([]float64) float64) string {
	sv := finite(t.get(s, sc).values(f))
	if len(sv) == 0 {
		return notMeasured
	}
	kv := finite(t.get(kp, sc).values(f))
	if len(kv) == 0 {
		return missingKP(t, kp)
	}
	return fmtX(agg(kv), agg(sv))
}

// timeCell is the initial sync's time ratio, a lower bound where
// kube-proxy's timed out.
func timeCell(t *table, s, kp string) string {
	sv := t.get(s, ScInitial).values(seconds)
	if len(sv) == 0 || !unfinished(t, kp) {
		return ratioCell(t, s, kp, ScInitial, seconds, median)
	}
	return "> " + fmtX(t.get(kp, ScInitial).timedOut(), median(sv))
}

// endpointCell is the ratio of the own sync times of one endpoint
// changes (added and removed, the medians).
func endpointCell(t *table, s, kp string) string {
	sv := endpointOwn(t, s)
	if len(sv) == 0 {
		return notMeasured
	}
	kv := endpointOwn(t, kp)
	if len(kv) == 0 {
		return missingKP(t, kp)
	}
	return fmtX(median(kv), median(sv))
}

// restartBytes is the median bytes a proxy wrote on its restarts, or why
// there is no figure.
func restartBytes(t *table, s string) string {
	c := t.get(s, ScRestart)
	if len(c.ok) == 0 {
		return ""
	}
	if t.kinds[s] == KindNFTables && !t.runOf[s][ScRestart].CountsNFT {
		return "not counted"
	}
	return fmtCount(median(c.values(writtenBytes(t.kinds[s]))))
}

// restartCell is the bytes written on a restart, sink / kube-proxy.
func restartCell(t *table, s, kp string) string {
	sb := restartBytes(t, s)
	if sb == "" {
		return notMeasured
	}
	kb := restartBytes(t, kp)
	if kb == "" {
		kb = missingKP(t, kp)
	}
	return sb + " / " + kb
}

// peakRSS is the largest peak RSS of a proxy's initial syncs, NaN when it
// has none.
func peakRSS(t *table, s string) float64 {
	v := t.get(s, ScInitial).values(func(x Sample) float64 { return x.PeakRSSMB })
	if len(v) == 0 {
		return math.NaN()
	}
	return slices.Max(v)
}

// rssCell is the initial sync's peak RSS, sink / kube-proxy.
func rssCell(t *table, s, kp string) string {
	a := peakRSS(t, s)
	if math.IsNaN(a) {
		return notMeasured
	}
	b := peakRSS(t, kp)
	if math.IsNaN(b) {
		return fmt.Sprintf("%.0f / %s", a, missingKP(t, kp))
	}
	return fmt.Sprintf("%.0f / %.0f", a, b)
}

// summaryTarget is one line of the summary's targets: a target and its
// outcome for each proxy it applies to.
type summaryTarget struct {
	Issue   int
	Target  string
	Outcome string
}

// summaryTargets groups the goals by issue and target, in the order the
// sections stated them.
func summaryTargets(gs []goal) []summaryTarget {
	var out []summaryTarget
	index := map[string]int{}
	var parts [][]goal
	for _, g := range gs {
		key := fmt.Sprint(g.Issue, g.Target)
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, summaryTarget{Issue: g.Issue, Target: g.Target})
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], g)
	}
	for i := range out {
		out[i].Outcome = outcome(out[i].Target, parts[i])
	}
	return out
}

// outcome writes the goals of one target, each run of one verdict
// together ("**met**: a 59.9x, b 43.7x (at 10,000 x 10)"): the size once
// when they share it, the sink's name left out when the target names the
// only one, each link to why a target is missed once.
func outcome(target string, gs []goal) string {
	single := !slices.ContainsFunc(gs, func(g goal) bool { return g.Sink != gs[0].Sink }) && strings.HasPrefix(target, gs[0].Sink+" ")
	var segs []string
	for i := 0; i < len(gs); {
		j := i + 1
		for j < len(gs) && gs[j].Verdict == gs[i].Verdict {
			j++
		}
		run := gs[i:j]
		sameAt := !slices.ContainsFunc(run, func(g goal) bool { return g.At != run[0].At })
		var items, whys []string
		for _, g := range run {
			name := g.Sink
			if single {
				name = ""
			}
			item := strings.TrimSpace(name + " " + g.Got)
			if !sameAt && g.At != "" {
				item += " at " + g.At
			}
			if item != "" {
				items = append(items, item)
			}
			if g.Why != "" && !slices.Contains(whys, g.Why) {
				whys = append(whys, g.Why)
			}
		}
		seg := run[0].Verdict.String()
		if len(items) > 0 {
			seg += ": " + strings.Join(items, ", ")
		}
		if sameAt && run[0].At != "" {
			seg += " at " + run[0].At
		}
		for _, w := range whys {
			seg += fmt.Sprintf(" ([why](%s))", w)
		}
		segs = append(segs, seg)
		i = j
	}
	return strings.Join(segs, "; ")
}

// writeSummary writes the report's summary: the ratios against
// kube-proxy per mode and size, then every target's outcome.
func writeSummary(b *strings.Builder, rows []summaryRow, targets []summaryTarget) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Summary\n\n")
	w("Each sink against kube-proxy v1.37.2 of the same mode, measured in the same run; a ratio is kube-proxy's figure over the sink's (above 1x the sink is better; > a lower bound where kube-proxy never finished). ")
	w("Initial sync from empty: time from process start to programmed, own sync time (kubeproxy_sync_proxy_rules_duration_seconds), CPU; one endpoint changed: own sync time per change; restart with the cluster unchanged: bytes handed to iptables-restore or nf_tables; peak RSS of the initial sync (the memory targets take each proxy's newest run). ")
	w("The IPVS proxies ran in an emulated VM, the others on the host. More in the [targets](#targets-issue-13), the tables per size, the [method](report/%s) and the [notes](report/NOTES.md).\n\n", MethodFile)
	w("| mode | size | sink | initial: time | own sync | CPU | one endpoint: own sync | restart: bytes, sink / kube-proxy | peak RSS MB, sink / kube-proxy |\n")
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Mode, r.Size, r.Sink, r.Time, r.Own, r.CPU, r.Endpoint, r.Restart, r.RSS)
	}
	w("\n| issue | target | outcome |\n| --- | --- | --- |\n")
	for _, t := range targets {
		w("| %d | %s | %s |\n", t.Issue, t.Target, t.Outcome)
	}
	w("\n")
}
