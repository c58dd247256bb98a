package benchmatrix

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The nftables sink's rows and its baseline.
const (
	nftSink = "nftables"
	nftKP   = "kube-proxy nftables"
)

// The nftables sink's targets (issue 33), against kube-proxy nftables in
// the same run.
const (
	nftInitialX  = 10   // initial sync, from process start and own sync
	nftFloorX    = 1.5  // own sync at most this times the pre-encoded floor
	nft30kSecs   = 10.0 // 30,000 x 10 from process start, seconds
	nftEndpointX = 100  // one endpoint changed, own sync
)

// nftFloorSize is the size whose nftables sink row has the pre-encoded
// nf_tables floor beside it: the floor's transaction is of 10,000 services.
var nftFloorSize = [2]int{10000, 10}

// The reasons of missed nftables targets, each explained below the
// section's list (nftWhy).
const (
	whyInitial  = "why: the kernel's set lookups (below)"
	whyEndpoint = "why: the kernel's validation of the table (below)"
	whyIdle     = "why: the periodic resync (below)"
)

// The issue 33 targets' names in the summary.
const (
	goalNFTStart    = "nftables initial sync: ≥ 10x faster than kube-proxy nftables from process start"
	goalNFTOwn      = "nftables initial sync: ≥ 10x less own sync time than kube-proxy nftables"
	goalNFTEndpoint = "nftables one endpoint changed: ≥ 100x less own sync time than kube-proxy nftables"
)

// nftGoal is an issue 33 goal of the nftables sink; a missed one links to
// the section's explanation.
func nftGoal(target, at string) goal {
	return goal{Issue: 33, Target: target, Sink: nftSink, At: at}
}

// nftSection is the address of the nftables targets' section, which says
// why each missed one is missed.
const nftSection = "#targets-of-the-nftables-sink-issue-33"

// nftTargets writes the nftables sink's targets (issue 33).
func nftTargets(b *strings.Builder, tables map[sizeKey]*table, keys []sizeKey, g *goals) {
	tw := &targetWriter{b: b, tables: tables, keys: keys, goals: g}
	tw.w("## Targets of the nftables sink (issue 33)\n\nAgainst kube-proxy nftables in the same run, each at the size the target names (or, where it was not measured there, the one with 10 endpoints closest to 10,000 services, said so). Time is wall time on a shared machine (see the runs' load): the CPU ratio beside it is the steadier measure of the same work. Each missed target says by how much, and why below the list.\n\n")
	k, t := tw.pick(nftSink, nftKP)
	if t == nil {
		tw.w("- nftables against kube-proxy nftables: not measured.\n\n")
		tw.goals.add(nftGoal(goalNFTStart, ""))
		return
	}
	at := measuredAt(k, t, nftKP, ScInitial)
	tw.checkNote(nftGoal(goalNFTStart, k.String()), "nftables initial sync, from process start to programmed, vs kube-proxy nftables "+at, ratio(t, nftSink, nftKP, ScInitial, seconds, median), nftInitialX, whyInitial)
	self := func(x Sample) float64 {
		if x.SelfSeconds <= 0 {
			return math.NaN()
		}
		return x.SelfSeconds
	}
	if r := ratio(t, nftSink, nftKP, ScInitial, self, median); !math.IsNaN(r) {
		g := nftGoal(goalNFTStart, k.String())
		g.Sink += " (own metrics)"
		tw.checkNote(g, fmt.Sprintf("nftables initial sync, from process start to the end of its sync by the proxies' own metrics (process_start_time_seconds, kubeproxy_sync_proxy_rules_last_timestamp_seconds: without the kernel probe's resolution) vs kube-proxy nftables %s (%s s against %s s)",
			at, fmtSec(median(t.get(nftSink, ScInitial).values(self))), fmtSec(median(t.get(nftKP, ScInitial).values(self)))), r, nftInitialX, whyInitial)
	}
	tw.checkNote(nftGoal(goalNFTOwn, k.String()), "nftables initial sync, own sync time (kubeproxy_sync_proxy_rules_duration_seconds until programmed) vs kube-proxy nftables "+at, ratio(t, nftSink, nftKP, ScInitial, ownSeconds, median), nftInitialX, whyInitial)
	if r := ratio(t, nftSink, nftKP, ScInitial, cpu, mean); !math.IsNaN(r) {
		tw.w("- nftables initial sync, CPU (the process and its children) vs kube-proxy nftables %s: %.1fx less (%s against %s CPU-s; no target, the load-independent view of the two above).\n",
			at, r, fmtSec(mean(t.get(nftSink, ScInitial).values(cpu))), fmtSec(mean(t.get(nftKP, ScInitial).values(cpu))))
	}
	tw.nftFloor()
	tw.nft30k()
	tw.nftEndpoint()
	tw.nftRestart()
	tw.nftIdle()
	tw.nftMemory()
	tw.nftWhy()
	tw.w("\n")
}

// ownSeconds is a sample's own sync time; NaN before the driver read it.
func ownSeconds(s Sample) float64 {
	if s.Syncs <= 0 {
		return math.NaN()
	}
	return s.SyncSeconds
}

// checkNote writes whether a ratio meets its target, and where it is
// missed, by how much and why; it records the goal g.
func (tw *targetWriter) checkNote(g goal, name string, got, want float64, why string) {
	if math.IsNaN(got) || got >= want {
		tw.check(g, name, got, want, "x")
		return
	}
	tw.w("- %s: **missed**, %.1fx against %.0fx: short by a factor %.1f; %s.\n", name, got, want, want/got, tw.because(why))
	g.Verdict, g.Got, g.Why = missed, fmt.Sprintf("%.1fx (short by %.1fx)", got, want/got), nftSection
	tw.goals.add(g)
}

// nftFloor writes the sink's own initial sync against the pre-encoded
// nf_tables floor measured just before it.
func (tw *targetWriter) nftFloor() {
	k := sizeKey{nftFloorSize[0], nftFloorSize[1]}
	t := tw.tables[k]
	g := nftGoal("nftables own initial sync ≤ 1.5x the pre-encoded nf_tables floor", k.String())
	if t != nil && len(t.get(nftSink, ScNFTOwnFloor).ok) > 0 {
		tw.nftOwnFloor(g)
		return
	}
	if t == nil || len(t.get(nftSink, ScNFTFloor).ok) == 0 {
		tw.w("- nftables own initial sync ≤ %.1fx the pre-encoded nf_tables floor: not measured (no run with the floor beside the sink at %s).\n", nftFloorX, k)
		g.At = ""
		tw.goals.add(g)
		return
	}
	fc := t.get(nftSink, ScNFTFloor)
	floor, floorBytes := median(fc.values(seconds)), median(fc.values(func(x Sample) float64 { return float64(x.NFTBytes) }))
	syncs, _ := syncTimes(t.get(nftSink, ScInitial))
	own := median(syncs)
	ownBytes := median(t.get(nftSink, ScInitial).values(func(x Sample) float64 { return float64(x.NFTBytes) }))
	if math.IsNaN(own) {
		tw.w("- nftables own initial sync ≤ %.1fx the pre-encoded nf_tables floor at %s: the floor %s s, the sink's own sync not measured.\n", nftFloorX, k, fmtSec(floor))
		g.Got = "(the sink's own sync)"
		tw.goals.add(g)
		return
	}
	verdict := "**met**"
	g.Verdict, g.Got = met, fmt.Sprintf("%.1fx the floor", own/floor)
	if own > nftFloorX*floor {
		verdict = fmt.Sprintf("**missed** by a factor %.1f (%s; the floor's transaction has no anonymous set, so none of those lookups)", own/(nftFloorX*floor), tw.because(whyInitial))
		g.Verdict, g.Got, g.Why = missed, fmt.Sprintf("%.1fx the floor (over by %.1fx)", own/floor, own/(nftFloorX*floor)), nftSection
	}
	tw.goals.add(g)
	tw.w("- nftables own initial sync ≤ %.1fx the pre-encoded nf_tables floor at %s, run %s (the floor measured on the same host just before): %s; %s s against the floor's %s s: %.1fx.",
		nftFloorX, k, t.label(nftSink, ScInitial), verdict, fmtSec(own), fmtSec(floor), own/floor)
	if floorBytes > 0 && ownBytes > 0 {
		scaled := floor * ownBytes / floorBytes
		tw.w(" The floor's transaction is smaller than the sink's (%s bytes against the sink's %s over its first sync): scaled by the bytes, the floor of the sink's transaction would be about %s s, and the sink's own sync %.1fx that.",
			fmtCount(floorBytes), fmtCount(ownBytes), fmtSec(scaled), own/scaled)
	}
	tw.w("\n")
}

// nftOwnFloor writes the floor target from the nftables package's
// BenchmarkFirstSyncFloor (ScNFTOwnFloor) at nftFloorSize, where the sink's
// sync and the floor of its own transactions are measured in the same
// process, and the floor and ratio at every other size measured; and what
// the floor leaves of the targets against kube-proxy: a sink of no cost
// of its own would be at most kube-proxy's own sync over the floor
// faster.
func (tw *targetWriter) nftOwnFloor(g goal) {
	sync := func(x Sample) float64 { return x.SyncSeconds }
	for _, k := range tw.keys {
		t := tw.tables[k]
		c := t.get(nftSink, ScNFTOwnFloor)
		if len(c.ok) == 0 {
			continue
		}
		floor, own := median(c.values(seconds)), median(c.values(sync))
		r := own / floor
		head := fmt.Sprintf("- nftables own initial sync ≤ %.1fx the pre-encoded floor of its own transactions at %s, run %s (the nftables package's BenchmarkFirstSyncFloor: a first sync into a fresh namespace, then the very transactions it committed, encoded before the clock, committed into another)", nftFloorX, k, t.label(nftSink, ScNFTOwnFloor))
		verdict := "**met**"
		if r > nftFloorX {
			verdict = fmt.Sprintf("**missed** by a factor %.2f", r/nftFloorX)
		}
		if k == (sizeKey{nftFloorSize[0], nftFloorSize[1]}) {
			g.Verdict, g.Got = met, fmt.Sprintf("%.2fx the floor", r)
			if r > nftFloorX {
				g.Verdict, g.Got, g.Why = missed, fmt.Sprintf("%.2fx the floor (over by %.2fx)", r, r/nftFloorX), nftSection
			}
			tw.goals.add(g)
		} else {
			head = fmt.Sprintf("- nftables own initial sync against the pre-encoded floor of its own transactions at %s, run %s (no target at this size)", k, t.label(nftSink, ScNFTOwnFloor))
			verdict = ""
		}
		tw.w("%s: %s%s s against the floor's %s s (%s CPU-s): %.2fx.", head, verdict+map[bool]string{true: "; ", false: ""}[verdict != ""], fmtSec(own), fmtSec(floor), fmtSec(median(c.values(cpu))), r)
		if kc := t.get(nftKP, ScInitial); len(kc.ok) > 0 {
			if kp := median(kc.values(ownSeconds)); !math.IsNaN(kp) {
				room := "the floor leaves room for the 10x targets against it here"
				if kp/floor < nftInitialX {
					room = "so the 10x targets against it are beyond the kernel's floor here; " + tw.because(whyInitial)
				}
				tw.w(" The floor alone is %.1fx less than kube-proxy nftables' own sync at this size (%s s, run %s): no sink could be more than that much faster, %s.", kp/floor, fmtSec(kp), t.label(nftKP, ScInitial), room)
			}
		}
		tw.w("\n")
	}
}

// nft30k writes the sink's initial sync at 30,000 x 10 from process start.
func (tw *targetWriter) nft30k() {
	k := sizeKey{30000, 10}
	t := tw.tables[k]
	g := nftGoal("nftables initial sync at 30,000 x 10 under 10 s from process start", "")
	if t == nil || len(t.get(nftSink, ScInitial).ok) == 0 {
		tw.w("- nftables initial sync at 30,000 x 10 under %.0f s from process start: not measured.\n", nft30kSecs)
		tw.goals.add(g)
		return
	}
	v := median(t.get(nftSink, ScInitial).values(seconds))
	verdict := "**met**"
	g.Verdict, g.Got = met, fmtSec(v)+" s"
	if v >= nft30kSecs {
		verdict = fmt.Sprintf("**missed** by %s s (a factor %.1f; %s)", fmtSec(v-nft30kSecs), v/nft30kSecs, tw.because(whyInitial))
		g.Verdict, g.Got, g.Why = missed, fmt.Sprintf("%s s (%.1fx the limit)", fmtSec(v), v/nft30kSecs), nftSection
	}
	tw.goals.add(g)
	tw.w("- nftables initial sync at 30,000 x 10 under %.0f s from process start, run %s: %s, %s s", nft30kSecs, t.label(nftSink, ScInitial), verdict, fmtSec(v))
	if kc := t.get(nftKP, ScInitial); len(kc.ok) > 0 {
		tw.w(" (kube-proxy nftables, run %s: %s s, %.1fx)", t.label(nftKP, ScInitial), fmtSec(median(kc.values(seconds))), ratio(t, nftSink, nftKP, ScInitial, seconds, median))
	}
	if fc := t.get(nftSink, ScNFTOwnFloor); len(fc.ok) > 0 {
		if floor := median(fc.values(seconds)); floor >= nft30kSecs {
			tw.w("; the floor of the sink's own transactions at this size alone takes %s s (run %s), beyond the limit", fmtSec(floor), t.label(nftSink, ScNFTOwnFloor))
		}
	}
	tw.w(".\n")
}

// endpointOwn returns the own sync time of a proxy's one-endpoint
// changes (added and removed), one value per change.
func endpointOwn(t *table, s string) []float64 {
	var v []float64
	for _, sc := range []string{ScEndpointAdd, ScEndpointRemove} {
		for _, x := range t.get(s, sc).ok {
			if x.Syncs > 0 {
				v = append(v, x.SyncSeconds)
			}
		}
	}
	return v
}

// endpointBytes returns the bytes a proxy wrote per one-endpoint change.
func endpointBytes(t *table, s string) []float64 {
	return append(t.get(s, ScEndpointAdd).values(writtenBytes(KindNFTables)), t.get(s, ScEndpointRemove).values(writtenBytes(KindNFTables))...)
}

// nftEndpoint writes the one-endpoint change targets: own sync time
// against kube-proxy at 10,000 services, and the bytes at every size.
func (tw *targetWriter) nftEndpoint() {
	k, t := tw.pickIn(ScEndpointAdd, nftSink, nftKP)
	if t == nil {
		tw.w("- nftables one endpoint changed, own sync vs kube-proxy nftables: not measured.\n")
		tw.goals.add(nftGoal(goalNFTEndpoint, ""))
	} else {
		o, kp := endpointOwn(t, nftSink), endpointOwn(t, nftKP)
		r := median(kp) / median(o)
		name := fmt.Sprintf("nftables one endpoint changed (added and removed), own sync time per change vs kube-proxy nftables %s (medians over %d and %d changes: %s ms against %s ms)",
			measuredAt(k, t, nftKP, ScEndpointAdd), len(o), len(kp), fmtMS(median(o)), fmtMS(median(kp)))
		if len(o) == 0 || len(kp) == 0 || median(o) <= 0 {
			r = math.NaN()
		}
		tw.checkNote(nftGoal(goalNFTEndpoint, k.String()), name, r, nftEndpointX, whyEndpoint)
	}
	tw.nftEndpointBytes()
}

// nftEndpointBytes writes the bytes of one-endpoint changes at every size,
// and whether they are independent of the cluster's size: at the most
// services with 10 endpoints each within nftBytesSlack of the fewest.
func (tw *targetWriter) nftEndpointBytes() {
	var parts []string
	var sizes []sizeKey // with 10 endpoints, measured
	for _, k := range tw.keys {
		t := tw.tables[k]
		if v := endpointBytes(t, nftSink); len(v) > 0 {
			if k.m == 10 {
				sizes = append(sizes, k)
			}
			p := fmt.Sprintf("%s: %s (min %s, max %s)", k, fmtCount(median(v)), fmtCount(slices.Min(v)), fmtCount(slices.Max(v)))
			if kp := endpointBytes(t, nftKP); len(kp) > 0 {
				p += fmt.Sprintf(", kube-proxy nftables' nft -f input %s", fmtCount(median(kp)))
			}
			parts = append(parts, p)
		}
	}
	g := nftGoal("nftables one endpoint changed: bytes sent independent of the cluster's size", "")
	if len(parts) == 0 {
		tw.w("- nftables one endpoint changed, netlink bytes per change against cluster size: not measured.\n")
		tw.goals.add(g)
		return
	}
	tw.w("- nftables one endpoint changed, netlink bytes sent per change (median over the changes), independent of the cluster's size: %s", strings.Join(parts, "; "))
	if len(sizes) < 2 {
		tw.w(" (one size with 10 endpoints a service: growth not measured).\n")
		g.Got = "(one size only)"
		tw.goals.add(g)
		return
	}
	lo, hi := sizes[0], sizes[0]
	for _, k := range sizes {
		if k.n < lo.n {
			lo = k
		}
		if k.n > hi.n {
			hi = k
		}
	}
	a, c := median(endpointBytes(tw.tables[lo], nftSink)), median(endpointBytes(tw.tables[hi], nftSink))
	g.Verdict, g.At = met, fmt.Sprintf("%s to %s", lo, hi)
	if c > a*(1+nftBytesSlack) {
		g.Verdict = missed
	}
	g.Got = fmt.Sprintf("%+.1f%% for %.0fx the services", 100*(c/a-1), float64(hi.n)/float64(lo.n))
	tw.w(": %s, %s bytes at %s and %s at %s (%s; the target: at most %.0f%% more).\n", g.Verdict, fmtCount(a), lo, fmtCount(c), hi, g.Got, 100*nftBytesSlack)
	tw.goals.add(g)
}

// nftBytesSlack is how much more a one-endpoint change may send at the
// most services than at the fewest and count as independent of the
// cluster's size (longer names and addresses of larger clusters).
const nftBytesSlack = 0.1

// goalNFTIdle is the idle target's name in the summary.
const goalNFTIdle = "nftables idle: CPU per minute ≤ kube-proxy nftables'"

// ratioText is the sink's a against kube-proxy's c: "3.0x kube-proxy's".
func ratioText(a, c float64) string {
	if c <= 0 {
		return "against kube-proxy's 0"
	}
	return fmt.Sprintf("%.1fx kube-proxy's", a/c)
}

// fmtMS formats seconds as milliseconds.
func fmtMS(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.2f", 1000*v)
}

// nftRestart writes, at each size, what a restart with the cluster
// unchanged wrote: nothing is the target.
func (tw *targetWriter) nftRestart() {
	// One goal over every size: the bytes and changes summed up.
	g := goal{Issue: 33, Target: "nftables restart with the cluster unchanged writes nothing", Sink: nftSink, Verdict: met}
	var sizes []string
	most, restarts, changes, uncounted := 0.0, 0, 0, false
	measured := false
	for _, k := range tw.keys {
		t := tw.tables[k]
		c := t.get(nftSink, ScRestart)
		if len(c.ok) == 0 {
			continue
		}
		measured = true
		written := slices.Max(c.values(writtenBytes(KindNFTables)))
		counted := t.runOf[nftSink][ScRestart].CountsNFT
		changed := 0
		for _, x := range c.ok {
			if x.KernelChanged {
				changed++
			}
		}
		verdict := met
		if written > 0 || changed > 0 {
			verdict, g.Verdict = missed, missed
		}
		sent := fmt.Sprintf("at most %s bytes sent", fmtCount(written))
		if !counted {
			sent, uncounted = "bytes not counted", true
		}
		sizes, most, restarts, changes = append(sizes, k.String()), max(most, written), restarts+len(c.ok), changes+changed
		tw.w("- nftables restart with the cluster unchanged writes nothing, at %s, run %s: %s, %s over %d restarts, the ruleset changed in %d of them",
			k, t.label(nftSink, ScRestart), verdict, sent, len(c.ok), changed)
		if kc := t.get(nftKP, ScRestart); len(kc.ok) > 0 {
			tw.w(" (kube-proxy nftables: %s bytes of nft -f input per restart, the median)", fmtCount(median(kc.values(writtenBytes(KindNFTables)))))
		}
		tw.w(".\n")
	}
	if !measured {
		tw.w("- nftables restart with the cluster unchanged writes nothing: not measured.\n")
		g.Verdict = unmeasured
		tw.goals.add(g)
		return
	}
	g.Got = fmt.Sprintf("at most %s bytes sent, the ruleset changed in %d of %d restarts", fmtCount(most), changes, restarts)
	if uncounted {
		g.Got = fmt.Sprintf("the ruleset changed in %d of %d restarts (bytes not counted in every run)", changes, restarts)
	}
	g.At = strings.Join(sizes, ", ")
	tw.goals.add(g)
}

// nftIdle writes the steady window's CPU against kube-proxy's, at each
// size where both were measured in one run.
func (tw *targetWriter) nftIdle() {
	measured := false
	for _, k := range tw.keys {
		t := tw.tables[k]
		s, kp := t.get(nftSink, ScSteady), t.get(nftKP, ScSteady)
		if len(s.ok) == 0 || len(kp.ok) == 0 {
			continue
		}
		measured = true
		a, c := mean(s.values(cpu)), mean(kp.values(cpu))
		// One 10 ms tick of /proc's CPU times, scaled to a minute like
		// the cell: a difference below it is not measured.
		tick := 0.01 * 60 / min(mean(s.values(seconds)), mean(kp.values(seconds)))
		g := goal{Issue: 33, Target: goalNFTIdle, Sink: nftSink, Verdict: met, Got: fmt.Sprintf("%s against %s CPU-s", fmtSec(a), fmtSec(c)), At: k.String()}
		verdict := "**met**"
		switch {
		case a > c+tick:
			verdict = fmt.Sprintf("**missed**, %s (%s)", ratioText(a, c), tw.because(whyIdle))
			g.Verdict, g.Got, g.Why = missed, ratioText(a, c), nftSection
			tw.idleMissed = append(tw.idleMissed, k)
		case a > c:
			verdict = "**met** within one 10 ms tick"
		}
		tw.goals.add(g)
		tw.w("- nftables idle CPU per minute ≤ kube-proxy nftables' at %s, run %s: %s, %s CPU-s against %s (the window includes the 30 s periodic resyncs; one tick is %s CPU-s per minute here).\n",
			k, t.label(nftSink, ScSteady), verdict, fmtSec(a), fmtSec(c), fmtSec(tick))
	}
	if !measured {
		tw.w("- nftables idle CPU per minute ≤ kube-proxy nftables': not measured.\n")
		tw.goals.add(goal{Issue: 33, Target: goalNFTIdle, Sink: nftSink})
	}
}

// nftMemory writes the peak RSS of the initial syncs against kube-proxy's
// at 10,000 x 10 (the target) and the other sizes.
func (tw *targetWriter) nftMemory() {
	recorded := false
	for _, k := range tw.keys {
		t := tw.tables[k]
		s, kp := t.get(nftSink, ScInitial), t.get(nftKP, ScInitial)
		if len(s.ok) == 0 || len(kp.ok) == 0 {
			continue
		}
		rss := func(x Sample) float64 { return x.PeakRSSMB }
		a, c := slices.Max(s.values(rss)), slices.Max(kp.values(rss))
		verdict := "**met**"
		if a > c {
			verdict = "**missed**"
		}
		target := ""
		if k.n != 10000 || k.m != 10 {
			target = " (the target is at 10,000 x 10; here for the trend)"
		} else {
			g := goal{Issue: 33, Target: "nftables peak RSS at 10,000 x 10 ≤ kube-proxy nftables'", Sink: nftSink, Verdict: met, Got: fmt.Sprintf("%.0f against %.0f MB", a, c), At: k.String()}
			if a > c {
				g.Verdict, g.Got = missed, fmt.Sprintf("%.0f against %.0f MB (%.2fx)", a, c, a/c)
			}
			tw.goals.add(g)
			recorded = true
		}
		tw.w("- nftables peak RSS of the initial sync ≤ kube-proxy nftables' at %s, run %s%s: %s, %.0f MB against %.0f MB (the largest over the repetitions): %.2fx.\n",
			k, t.label(nftSink, ScInitial), target, verdict, a, c, a/c)
	}
	if !recorded {
		tw.goals.add(goal{Issue: 33, Target: "nftables peak RSS at 10,000 x 10 ≤ kube-proxy nftables'", Sink: nftSink})
	}
}
