package dataplane

import (
	"slices"
	"sort"

	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
)

// entries writes set entries grouped by set, in a stable set order, and
// within a set in the order given.
func (a *Applier) entries(res *Result, es []render.SetEntry, write func(string, []ipset.Entry) []error) {
	if len(es) == 0 {
		return
	}
	count := map[string]int{}
	for i := range es {
		count[es[i].Set]++
	}
	sets := make([]string, 0, len(count))
	for s := range count {
		sets = append(sets, s)
	}
	sort.Strings(sets)
	// One conversion buffer for all sets, each set's entries together in
	// the order given (a counting sort), and where each entry came from.
	next := make(map[string]int, len(sets))
	off := 0
	for _, set := range sets {
		next[set] = off
		off += count[set]
	}
	conv := make([]ipset.Entry, len(es))
	from := make([]int32, len(es))
	for i := range es {
		j := next[es[i].Set]
		next[es[i].Set] = j + 1
		conv[j], from[j] = Entry(es[i]), int32(i)
	}
	start := 0
	for _, set := range sets {
		end := start + count[set]
		group := conv[start:end:end]
		for i, err := range write(set, group) {
			if err != nil {
				put(&res.Failed.Entries, es[from[start+i]], err)
			}
		}
		res.Writes += len(group)
		start = end
	}
}

// entryRules runs EntryRules for the families whose KUBE-LOAD-BALANCER-FW
// or KUBE-LOAD-BALANCER-SOURCE-IP members the plan changed.
func (a *Applier) entryRules(res *Result, p Plan) {
	if a.EntryRules == nil {
		return
	}
	var fams []xtables.Family
	for _, l := range [][]render.SetEntry{p.AddEntries, p.DelEntries} {
		for _, e := range l {
			for _, f := range []xtables.Family{xtables.IPv4, xtables.IPv6} {
				if (e.Set == rules.SetName(f, rules.SetLoadBalancerFW) || e.Set == rules.SetName(f, rules.SetLoadBalancerSrcIP)) && !slices.Contains(fams, f) {
					fams = append(fams, f)
				}
			}
		}
	}
	if len(fams) == 0 {
		return
	}
	slices.Sort(fams)
	wrote, err := a.EntryRules(fams)
	if wrote {
		res.Writes++
	}
	res.RulesErr = err
}
