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

// memory writes the memory section from every run's initial syncs.
func memory(b *strings.Builder, runs []*Results) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Memory (issue 31)\n\nPeak RSS (VmHWM) of the initial sync from empty, the largest over a run's repetitions; each figure from the newest run that measured it (sink-only runs included: they never replace kube-proxy's rows in the tables).\n\n")
	for _, s := range []struct{ sink, kind string }{{"ipvs-fullstate", KindIPVS}, {"ipvs-incremental", KindIPVS}, {"iptables", KindIPTables}, {"nftables", KindNFTables}} {
		small := initialPeak(runs, s.sink, memSmall, nil)
		if small.run == nil {
			w("- %s at %s x 10: not measured.\n", s.sink, thousands(memSmall))
			continue
		}
		kp := baseline(s.kind)
		base := initialPeak(runs, kp, memSmall, nil)
		switch {
		case base.run == nil && base.error != "":
			w("- %s at %s x 10: %.0f MB (run %s); %s has no figure to compare: it never finished its initial sync at this size (%s)", s.sink, thousands(memSmall), small.mb, small.run.Label, kp, base.error)
			if nft := initialPeak(runs, "kube-proxy nftables", memSmall, nil); s.kind == KindIPTables && nft.run != nil {
				w("; kube-proxy nftables, its other mode on this host: %.0f MB (run %s)", nft.mb, nft.run.Label)
			}
			w(".\n")
		case base.run == nil:
			w("- %s at %s x 10: %.0f MB (run %s); %s not measured at this size.\n", s.sink, thousands(memSmall), small.mb, small.run.Label, kp)
		default:
			verdict := "**met**"
			if small.mb > base.mb {
				verdict = "**missed**"
			}
			w("- %s at %s x 10, peak RSS ≤ %s's: %s, %.0f MB (run %s) against %.0f MB (run %s): %.2fx.\n", s.sink, thousands(memSmall), kp, verdict, small.mb, small.run.Label, base.mb, base.run.Label, small.mb/base.mb)
		}
		// The growth within one run: the newest that has both sizes.
		var large peak
		for i := len(runs) - 1; i >= 0 && large.run == nil; i-- {
			if sm := initialPeak(runs, s.sink, memSmall, runs[i]); sm.run != nil {
				if large = initialPeak(runs, s.sink, memLarge, runs[i]); large.run != nil {
					small = sm
				}
			}
		}
		if large.run == nil {
			w("- %s from %s to %s x 10: not measured in one run.\n", s.sink, thousands(memSmall), thousands(memLarge))
			continue
		}
		g := large.mb / small.mb
		verdict := "**met**"
		if g > memGrowth {
			verdict = "**missed**"
		}
		w("- %s from %s to %s x 10 (5x the cluster), growth ≤ %.1fx: %s, %.0f MB to %.0f MB (run %s): %.2fx.\n", s.sink, thousands(memSmall), thousands(memLarge), memGrowth, verdict, small.mb, large.mb, large.run.Label, g)
	}
	w("\n")
}
