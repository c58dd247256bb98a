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

// whyNFT points at the notes' explanation of the missed nftables targets.
const whyNFT = `why: "The nftables sink's initial sync" in the notes above`

// nftTargets writes the nftables sink's targets (issue 33).
func nftTargets(b *strings.Builder, tables map[sizeKey]*table, keys []sizeKey) {
	tw := &targetWriter{b: b, tables: tables, keys: keys}
	tw.w("## Targets of the nftables sink (issue 33)\n\nAgainst kube-proxy nftables in the same run, each at the size the target names (or, where it was not measured there, the one with 10 endpoints closest to 10,000 services, said so). Time is wall time on a shared machine (see the runs' load): the CPU ratio beside it is the steadier measure of the same work.\n\n")
	k, t := tw.pick(nftSink, nftKP)
	if t == nil {
		tw.w("- nftables against kube-proxy nftables: not measured.\n\n")
		return
	}
	at := measuredAt(k, t, nftKP, ScInitial)
	tw.checkWhy("nftables initial sync, from process start to programmed, vs kube-proxy nftables "+at, ratio(t, nftSink, nftKP, ScInitial, seconds, median), nftInitialX)
	self := func(x Sample) float64 {
		if x.SelfSeconds <= 0 {
			return math.NaN()
		}
		return x.SelfSeconds
	}
	if r := ratio(t, nftSink, nftKP, ScInitial, self, median); !math.IsNaN(r) {
		tw.checkWhy(fmt.Sprintf("nftables initial sync, from process start to the end of its sync by the proxies' own metrics (process_start_time_seconds, kubeproxy_sync_proxy_rules_last_timestamp_seconds: without the kernel probe's resolution) vs kube-proxy nftables %s (%s s against %s s)",
			at, fmtSec(median(t.get(nftSink, ScInitial).values(self))), fmtSec(median(t.get(nftKP, ScInitial).values(self)))), r, nftInitialX)
	}
	tw.checkWhy("nftables initial sync, own sync time (kubeproxy_sync_proxy_rules_duration_seconds until programmed) vs kube-proxy nftables "+at, ratio(t, nftSink, nftKP, ScInitial, ownSeconds, median), nftInitialX)
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
	tw.w("\n")
}

// ownSeconds is a sample's own sync time; NaN before the driver read it.
func ownSeconds(s Sample) float64 {
	if s.Syncs <= 0 {
		return math.NaN()
	}
	return s.SyncSeconds
}

// checkWhy is check for a ratio target, pointing at the notes (why) where
// it is missed.
func (tw *targetWriter) checkWhy(name string, got, want float64) {
	tw.checkNote(name, got, want, whyNFT)
}

// checkNote writes whether a ratio meets its target, and where it is
// missed, by how much and why.
func (tw *targetWriter) checkNote(name string, got, want float64, why string) {
	if math.IsNaN(got) || got >= want {
		tw.check(name, got, want, "x")
		return
	}
	tw.w("- %s: **missed**, %.1fx against %.0fx: short by a factor %.1f; %s.\n", name, got, want, want/got, why)
}

// nftFloor writes the sink's own initial sync against the pre-encoded
// nf_tables floor measured just before it.
func (tw *targetWriter) nftFloor() {
	k := sizeKey{nftFloorSize[0], nftFloorSize[1]}
	t := tw.tables[k]
	if t == nil || len(t.get(nftSink, ScNFTFloor).ok) == 0 {
		tw.w("- nftables own initial sync ≤ %.1fx the pre-encoded nf_tables floor: not measured (no run with the floor beside the sink at %s).\n", nftFloorX, k)
		return
	}
	fc := t.get(nftSink, ScNFTFloor)
	floor, floorBytes := median(fc.values(seconds)), median(fc.values(func(x Sample) float64 { return float64(x.NFTBytes) }))
	syncs, _ := syncTimes(t.get(nftSink, ScInitial))
	own := median(syncs)
	ownBytes := median(t.get(nftSink, ScInitial).values(func(x Sample) float64 { return float64(x.NFTBytes) }))
	if math.IsNaN(own) {
		tw.w("- nftables own initial sync ≤ %.1fx the pre-encoded nf_tables floor at %s: the floor %s s, the sink's own sync not measured.\n", nftFloorX, k, fmtSec(floor))
		return
	}
	verdict := "**met**"
	if own > nftFloorX*floor {
		verdict = fmt.Sprintf("**missed** by a factor %.1f (%s)", own/(nftFloorX*floor), whyNFT)
	}
	tw.w("- nftables own initial sync ≤ %.1fx the pre-encoded nf_tables floor at %s, run %s (the floor measured on the same host just before): %s; %s s against the floor's %s s: %.1fx.",
		nftFloorX, k, t.label(nftSink, ScInitial), verdict, fmtSec(own), fmtSec(floor), own/floor)
	if floorBytes > 0 && ownBytes > 0 {
		scaled := floor * ownBytes / floorBytes
		tw.w(" The floor's transaction is smaller than the sink's (%s bytes against the sink's %s over its first sync): scaled by the bytes, the floor of the sink's transaction would be about %s s, and the sink's own sync %.1fx that.",
			fmtCount(floorBytes), fmtCount(ownBytes), fmtSec(scaled), own/scaled)
	}
	tw.w("\n")
}

// nft30k writes the sink's initial sync at 30,000 x 10 from process start.
func (tw *targetWriter) nft30k() {
	k := sizeKey{30000, 10}
	t := tw.tables[k]
	if t == nil || len(t.get(nftSink, ScInitial).ok) == 0 {
		tw.w("- nftables initial sync at 30,000 x 10 under %.0f s from process start: not measured.\n", nft30kSecs)
		return
	}
	v := median(t.get(nftSink, ScInitial).values(seconds))
	verdict := "**met**"
	if v >= nft30kSecs {
		verdict = fmt.Sprintf("**missed** by %s s (a factor %.1f; %s)", fmtSec(v-nft30kSecs), v/nft30kSecs, whyNFT)
	}
	tw.w("- nftables initial sync at 30,000 x 10 under %.0f s from process start, run %s: %s, %s s", nft30kSecs, t.label(nftSink, ScInitial), verdict, fmtSec(v))
	if kc := t.get(nftKP, ScInitial); len(kc.ok) > 0 {
		tw.w(" (kube-proxy nftables, run %s: %s s, %.1fx)", t.label(nftKP, ScInitial), fmtSec(median(kc.values(seconds))), ratio(t, nftSink, nftKP, ScInitial, seconds, median))
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
	} else {
		o, kp := endpointOwn(t, nftSink), endpointOwn(t, nftKP)
		r := median(kp) / median(o)
		name := fmt.Sprintf("nftables one endpoint changed (added and removed), own sync time per change vs kube-proxy nftables %s (medians over %d and %d changes: %s ms against %s ms)",
			measuredAt(k, t, nftKP, ScEndpointAdd), len(o), len(kp), fmtMS(median(o)), fmtMS(median(kp)))
		if len(o) == 0 || len(kp) == 0 || median(o) <= 0 {
			r = math.NaN()
		}
		tw.checkNote(name, r, nftEndpointX, `why: "The nftables sink's one-endpoint change" in the notes above`)
	}
	var parts []string
	for _, k := range tw.keys {
		t := tw.tables[k]
		if v := endpointBytes(t, nftSink); len(v) > 0 {
			p := fmt.Sprintf("%s: %s (min %s, max %s)", k, fmtCount(median(v)), fmtCount(slices.Min(v)), fmtCount(slices.Max(v)))
			if kp := endpointBytes(t, nftKP); len(kp) > 0 {
				p += fmt.Sprintf(", kube-proxy nftables' nft -f input %s", fmtCount(median(kp)))
			}
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		tw.w("- nftables one endpoint changed, netlink bytes per change against cluster size: not measured.\n")
		return
	}
	tw.w("- nftables one endpoint changed, netlink bytes sent per change (median over the changes), independent of the cluster's size: %s.\n", strings.Join(parts, "; "))
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
	measured := false
	for _, k := range tw.keys {
		t := tw.tables[k]
		c := t.get(nftSink, ScRestart)
		if len(c.ok) == 0 {
			continue
		}
		measured = true
		written := slices.Max(c.values(writtenBytes(KindNFTables)))
		changed := 0
		for _, x := range c.ok {
			if x.KernelChanged {
				changed++
			}
		}
		verdict := "**met**"
		if written > 0 || changed > 0 {
			verdict = "**missed**"
		}
		tw.w("- nftables restart with the cluster unchanged writes nothing, at %s, run %s: %s, at most %s bytes sent over %d restarts, the ruleset changed in %d of them",
			k, t.label(nftSink, ScRestart), verdict, fmtCount(written), len(c.ok), changed)
		if kc := t.get(nftKP, ScRestart); len(kc.ok) > 0 {
			tw.w(" (kube-proxy nftables: %s bytes of nft -f input per restart, the median)", fmtCount(median(kc.values(writtenBytes(KindNFTables)))))
		}
		tw.w(".\n")
	}
	if !measured {
		tw.w("- nftables restart with the cluster unchanged writes nothing: not measured.\n")
	}
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
		verdict := "**met**"
		switch {
		case a > c+tick:
			verdict = "**missed**"
		case a > c:
			verdict = "**met** within one 10 ms tick"
		}
		tw.w("- nftables idle CPU per minute ≤ kube-proxy nftables' at %s, run %s: %s, %s CPU-s against %s (the window includes the 30 s periodic resyncs; one tick is %s CPU-s per minute here).\n",
			k, t.label(nftSink, ScSteady), verdict, fmtSec(a), fmtSec(c), fmtSec(tick))
	}
	if !measured {
		tw.w("- nftables idle CPU per minute ≤ kube-proxy nftables': not measured.\n")
	}
}

// nftMemory writes the peak RSS of the initial syncs against kube-proxy's
// at 10,000 x 10 (the target) and the other sizes.
func (tw *targetWriter) nftMemory() {
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
		}
		tw.w("- nftables peak RSS of the initial sync ≤ kube-proxy nftables' at %s, run %s%s: %s, %.0f MB against %.0f MB (the largest over the repetitions): %.2fx.\n",
			k, t.label(nftSink, ScInitial), target, verdict, a, c, a/c)
	}
}
