package benchmatrix

import (
	"fmt"
	"strings"
)

// The memory targets (issue 31): at memSmall x 10 each sink's peak RSS is
// at most kube-proxy's in the same kernel back end; from memSmall to
// memLarge x 10 (5x the cluster) it grows at most memGrowth times.
const (
	memSmall, memLarge = 10000, 50000
	memGrowth          = 5.5
)

// peak is the largest VmHWM of one proxy's initial syncs at one size, from
// the newest run that has one.
type peak struct {
	mb    float64
	run   *Results
	reps  int
	error string // the newest failed initial sync's first line, when none succeeded
}

// initialPeak finds the proxy's peak at n x 10 in the newest run (runs are
// oldest first) that measured it; only from run when run is not nil.
func initialPeak(runs []*Results, sink string, n int, run *Results) peak {
	var p peak
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		if run != nil && r != run {
			continue
		}
		for _, s := range r.Samples {
			if s.Sink != sink || s.Scenario != ScInitial || s.Services != n || s.Endpoints != 10 {
				continue
			}
			if s.Error != "" {
				if p.error == "" && p.run == nil {
					p.error = fmt.Sprintf("%s (run %s)", firstLine(s.Error), r.Label)
				}
				continue
			}
			p.mb, p.run = max(p.mb, s.PeakRSSMB), r
			p.reps++
		}
		if p.run != nil {
			return p
		}
	}
	return p
}

// The issue 31 targets' names in the summary.
const (
	goalMemSmall  = "peak RSS at 10,000 x 10 ≤ kube-proxy's of the same mode"
	goalMemGrowth = "peak RSS growth from 10,000 to 50,000 x 10 ≤ 5.5x"
)

// memory writes the memory section from every run's initial syncs.
func memory(b *strings.Builder, runs []*Results, g *goals) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Memory (issue 31)\n\nPeak RSS (VmHWM) of the initial sync from empty, the largest over a run's repetitions; each figure from the newest run that measured it (sink-only runs included: they never replace kube-proxy's rows in the tables). The growth is from one run that measured both sizes where there is one, else from the newest run of each size (both named).\n\n")
	for _, s := range []struct{ sink, kind string }{{"ipvs-fullstate", KindIPVS}, {"ipvs-incremental", KindIPVS}, {"iptables", KindIPTables}, {"nftables", KindNFTables}} {
		small := initialPeak(runs, s.sink, memSmall, nil)
		sg := goal{Issue: 31, Target: goalMemSmall, Sink: s.sink}
		if small.run == nil {
			w("- %s at %s x 10: not measured.\n", s.sink, thousands(memSmall))
			g.add(sg)
		} else {
			memSmallLine(w, runs, s.sink, s.kind, small, &sg)
			g.add(sg)
		}
		memGrowthLine(w, runs, s.sink, g)
	}
	w("\n")
}

// memSmallLine writes a sink's peak RSS at memSmall x 10 against
// kube-proxy's in the same kernel back end, and sets the goal's outcome.
func memSmallLine(w func(string, ...any), runs []*Results, sink, kind string, small peak, sg *goal) {
	kp := baseline(kind)
	base := initialPeak(runs, kp, memSmall, nil)
	sg.At = thousands(memSmall) + " x 10"
	switch {
	case base.run == nil && base.error != "":
		w("- %s at %s x 10: %.0f MB (run %s); %s has no figure to compare: it never finished its initial sync at this size (%s)", sink, thousands(memSmall), small.mb, small.run.Label, kp, base.error)
		sg.Got = fmt.Sprintf("%.0f MB (%s never finished", small.mb, kp)
		if nft := initialPeak(runs, "kube-proxy nftables", memSmall, nil); kind == KindIPTables && nft.run != nil {
			w("; kube-proxy nftables, its other mode on this host: %.0f MB (run %s)", nft.mb, nft.run.Label)
			sg.Got += fmt.Sprintf("; kube-proxy nftables %.0f MB", nft.mb)
		}
		w(".\n")
		sg.Got += ")"
	case base.run == nil:
		w("- %s at %s x 10: %.0f MB (run %s); %s not measured at this size.\n", sink, thousands(memSmall), small.mb, small.run.Label, kp)
		sg.Got = fmt.Sprintf("%.0f MB (%s not measured)", small.mb, kp)
	default:
		verdict := "**met**"
		sg.Verdict = met
		if small.mb > base.mb {
			verdict, sg.Verdict = "**missed**", missed
		}
		sg.Got = fmt.Sprintf("%.0f against %.0f MB (%.2fx)", small.mb, base.mb, small.mb/base.mb)
		w("- %s at %s x 10, peak RSS ≤ %s's: %s, %.0f MB (run %s) against %.0f MB (run %s): %.2fx.\n", sink, thousands(memSmall), kp, verdict, small.mb, small.run.Label, base.mb, base.run.Label, small.mb/base.mb)
	}
}

// memGrowthLine writes a sink's growth from memSmall to memLarge x 10:
// within the newest run that measured both, else from the newest run of
// each size.
func memGrowthLine(w func(string, ...any), runs []*Results, sink string, g *goals) {
	gg := goal{Issue: 31, Target: goalMemGrowth, Sink: sink}
	var small, large peak
	for i := len(runs) - 1; i >= 0 && large.run == nil; i-- {
		if sm := initialPeak(runs, sink, memSmall, runs[i]); sm.run != nil {
			if large = initialPeak(runs, sink, memLarge, runs[i]); large.run != nil {
				small = sm
			}
		}
	}
	from := ""
	if large.run == nil {
		small, large = initialPeak(runs, sink, memSmall, nil), initialPeak(runs, sink, memLarge, nil)
		if small.run == nil || large.run == nil {
			w("- %s from %s to %s x 10: not measured.\n", sink, thousands(memSmall), thousands(memLarge))
			g.add(gg)
			return
		}
		from = fmt.Sprintf("run %s to run %s", small.run.Label, large.run.Label)
	} else {
		from = "run " + large.run.Label
	}
	growth := large.mb / small.mb
	verdict := "**met**"
	gg.Verdict = met
	if growth > memGrowth {
		verdict, gg.Verdict = "**missed**", missed
	}
	gg.Got = fmt.Sprintf("%.2fx (%.0f to %.0f MB, %s)", growth, small.mb, large.mb, from)
	g.add(gg)
	w("- %s from %s to %s x 10 (5x the cluster), growth ≤ %.1fx: %s, %.0f MB to %.0f MB (%s): %.2fx.\n", sink, thousands(memSmall), thousands(memLarge), memGrowth, verdict, small.mb, large.mb, from, growth)
}
