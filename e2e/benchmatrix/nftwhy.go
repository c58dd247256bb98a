package benchmatrix

import (
	"fmt"
	"strings"
)

// The causes of the nftables sink's missed targets. The texts state what
// the kernel does (nftables/chunk.go and anon.go, the profiles in the
// notes); the figures beside them come from the results.
const (
	causeInitial  = "nf_tables keeps a table's sets in a list and finds a set by walking it, comparing names; kube-proxy's ruleset, which the sink writes, has one anonymous `numgen random mod N map` per service chain, each created, filled and bound by messages that make that walk (and, within one transaction, a walk of the operations before it: nftables/chunk.go), so the kernel's work grows with the square of the services. kube-proxy's `nft -f` sends the same kind of messages and pays the same walks"
	causeEndpoint = "a change commits only the changed service's chain and elements (its bytes above do not grow with the cluster), but on every commit that adds a rule with a jump or a nat statement, as the changed service chain's rules are, nf_tables validates the whole table's jump graph (nf_tables_validate), so the kernel's part of one change grows with the table's chains"
	causeIdle     = "with its default 30 s period the sink resyncs, comparing the whole wanted ruleset with the one it applied"
)

// notesURL is the address of a section of bench/report/NOTES.md, from
// the report, by its heading.
func notesURL(heading string) string { return "report/NOTES.md#" + anchor(heading) }

// notesLink links to a section of bench/report/NOTES.md by its heading.
func notesLink(heading string) string {
	return fmt.Sprintf("[%q](%s)", heading, notesURL(heading))
}

// anchor is the id GitHub gives a heading: lower case, spaces to
// hyphens, punctuation other than hyphens and underscores dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// nftWhy writes, below the nftables targets, the cause of each kind of
// missed target the section named, with the figures that show it.
func (tw *targetWriter) nftWhy() {
	if len(tw.whys) == 0 {
		return
	}
	tw.w("\nWhy:\n\n")
	if tw.whys[whyInitial] {
		tw.w("- **The kernel's set lookups** (the initial sync): %s. Own initial sync by size, %s ([notes](%s): the profile).\n",
			causeInitial, tw.growth(func(t *table, s string) []float64 { return finite(t.get(s, ScInitial).values(ownSeconds)) }, "s"), notesURL("The nftables sink's initial sync"))
	}
	if tw.whys[whyEndpoint] {
		tw.w("- **The kernel's validation of the table** (one endpoint changed): %s. Own sync per change by size, %s ([notes](%s): the profile).\n",
			causeEndpoint, tw.growth(endpointOwn, "ms"), notesURL("The nftables sink's one-endpoint change"))
	}
	if tw.whys[whyIdle] {
		var parts []string
		for _, k := range tw.idleMissed {
			t := tw.tables[k]
			s, kp := t.get(nftSink, ScSteady), t.get(nftKP, ScSteady)
			// syncTimes skips the samples without a sync: none is 0.
			secs, counts := syncTimes(s)
			_, kpCounts := syncTimes(kp)
			syncs := func(v []float64) string {
				if len(v) == 0 {
					return "no sync"
				}
				if n := median(v); n != 1 {
					return fmtCount(n) + " syncs"
				}
				return "1 sync"
			}
			own := 0.0
			if len(secs) > 0 {
				own = median(secs)
			}
			// The CPU cells are per minute; /proc counts 10 ms ticks.
			window := median(s.values(seconds))
			ticks := (mean(s.values(cpu)) - mean(kp.values(cpu))) * window / 60 / 0.01
			p := fmt.Sprintf("at %s the sink used %.0f more 10 ms CPU ticks than kube-proxy nftables in a %s s window and made %s in it (%s s of own sync; medians over the windows), kube-proxy nftables %s",
				k, ticks, fmtSec(window), syncs(counts), fmtSec(own), syncs(kpCounts))
			if len(kpCounts) == 0 {
				p += " (its nftables mode skips the periodic sync while nothing changed)"
			}
			parts = append(parts, p)
		}
		tw.w("- **The periodic resync** (idle): %s; %s ([notes](%s)).\n", causeIdle, strings.Join(parts, "; "), notesURL("Idle at 10,000 x 10"))
	}
}

// growth lists, at each size with 10 endpoints a service, the median of
// a figure of the sink and of kube-proxy nftables (in unit, "s" or
// "ms"), and the sink's growth from one size to the next.
func (tw *targetWriter) growth(f func(*table, string) []float64, unit string) string {
	scale := 1.0
	if unit == "ms" {
		scale = 1000
	}
	var parts []string
	var prev sizeKey
	prevV := 0.0
	for _, k := range tw.keys {
		if k.m != 10 {
			continue
		}
		t := tw.tables[k]
		v := f(t, nftSink)
		if len(v) == 0 {
			continue
		}
		p := fmt.Sprintf("%s: the sink %s %s", k, fmtSec(scale*median(v)), unit)
		if kv := f(t, nftKP); len(kv) > 0 {
			p += fmt.Sprintf(", kube-proxy nftables %s %s", fmtSec(scale*median(kv)), unit)
		}
		if prevV > 0 {
			p += fmt.Sprintf(" (the sink's %.1fx for %.0fx the services)", median(v)/prevV, float64(k.n)/float64(prev.n))
		}
		parts = append(parts, p)
		prev, prevV = k, median(v)
	}
	if len(parts) == 0 {
		return "not measured"
	}
	return strings.Join(parts, "; ")
}
