package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/conntrack"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// sameMultiset reports whether two chains hold the same rules, in any
// order, and end with the same rule (service rules in top-level chains are
// independent of each other, but KUBE-SERVICES' node-port rule must stay
// last).
func sameMultiset(have, want []string) bool {
	if len(have) != len(want) {
		return false
	}
	if len(have) > 0 && have[len(have)-1] != want[len(want)-1] {
		return false
	}
	a, b := slices.Clone(have), slices.Clone(want)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// syncFull renders every service, compares each owned chain with the
// kernel and rewrites those that differ: service chains in bounded
// transactions first, then the top-level chains, stale chains' deletion
// and missing jumps in one last transaction.
func (p *Proxier) syncFull(f *family, s *client.Snapshot) (SyncStats, []conntrack.Target, error) {
	var st SyncStats
	st.Full = true
	f.full = true
	var list []*rendered // in key order
	var svcs map[client.ServiceKey]*rendered
	var eps int
	var errs []error
	rendered := f.from != s
	if !rendered {
		// A resync of the snapshot the last full sync rendered and wrote,
		// with no partial sync since: rendering is pure and a snapshot
		// does not change, so its services render as they did. Only the
		// kernel is compared again.
		for se := range s.All() {
			if r := f.svcs[se.Service.Key()]; r != nil {
				list = append(list, r)
			}
		}
		svcs, eps, errs = f.svcs, f.eps, slices.Clone(f.renderErrs)
	} else {
		total := 0
		for se := range s.All() {
			if total += countEndpoints(se, f.fc.fam == xtables.IPv6); total > p.largeAt {
				break
			}
		}
		f.large = total > p.largeAt
		list, svcs, eps, errs = f.renderAll(s, f.large)
		f.renders++
	}
	f.from = nil
	kern, err := p.read(f)
	if err != nil {
		return st, nil, errors.Join(append(errs, err)...)
	}
	nat := kern["nat"]
	// existing counts the nat rules in the kernel: with nft, every
	// transaction costs in proportion to them, and within one transaction
	// the cost grows with the square of its size, so the adaptive bound
	// grows as the square root of the table.
	existing := 0
	for _, l := range nat.rules {
		existing += len(l)
	}
	limit := p.cfg.MaxRestoreRules
	adaptive := limit == 0 && f.backend != xtables.Legacy
	if limit == 0 && f.backend == xtables.Legacy {
		// Legacy rewrites the whole table on every restore: one
		// transaction is fastest and stays linear.
		limit = -1
	}
	if adaptive {
		limit = adaptiveLimit(existing)
	}
	t := &txn{}
	// Service chains in the kernel, and how many of them we keep: when
	// we keep them all, none is stale and no set of names is needed.
	kernSvc, kept := 0, 0
	for name := range nat.chains {
		if isServiceChain(name) {
			kernSvc++
		}
	}
	// Top-level chains: those service chains refer to (KUBE-MARK-MASQ) and
	// the other service-independent ones first, those that refer to
	// service chains last, after every service chain exists.
	statics := staticChains(&p.cfg, &f.fc)
	// A top-level chain the kernel does not have yet (a first sync) is
	// filled progressively when transactions are bounded: declared in the
	// first transaction, each service's rules added in the transaction of
	// its chains, the static rules (KUBE-SERVICES' node-port rule, last)
	// in the last one. iptables-nft-restore's cost grows with the square
	// of the chains one transaction's rules jump to, so 10,000 jumps in
	// one last transaction cost more than the rest of the sync together.
	// A chain the kernel has is rewritten whole in the last transaction,
	// so it never lacks a service's rule in between.
	var progressive [numTop]bool
	writeTop := func(sc staticChain) {
		if sc.slot >= 0 && progressive[sc.slot] {
			for _, l := range sc.rules {
				t.lines(sc.table, []byte(l+"\n"), 1)
			}
			return
		}
		have := kern[sc.table]
		if have.chains[sc.chain] {
			lines := slices.Clone(sc.rules)
			if sc.slot >= 0 {
				var svcLines []string
				for _, r := range list {
					svcLines = append(svcLines, r.topLines(sc.slot)...)
				}
				for i := range svcLines {
					svcLines[i] = strings.TrimSuffix(svcLines[i], "\n")
				}
				lines = append(svcLines, lines...)
			}
			if sameMultiset(have.rules[sc.chain], lines) {
				return
			}
		}
		t.declare(sc.table, sc.chain)
		if sc.slot >= 0 {
			for _, r := range list {
				for _, s := range r.tops {
					if int(s.slot) == sc.slot {
						t.lines(sc.table, r.topText(s), 1)
					}
				}
			}
		}
		for _, l := range sc.rules {
			t.lines(sc.table, []byte(l+"\n"), 1)
		}
	}
	for _, sc := range statics {
		switch {
		case sc.slot < 0:
			writeTop(sc)
		case limit > 0 && !kern[sc.table].chains[sc.chain]:
			progressive[sc.slot] = true
			t.declare(sc.table, sc.chain)
		}
	}
	for _, r := range list {
		for _, c := range r.chains {
			text := r.text(c)
			if nat.chains[c.name] {
				kept++
				if bytes.Equal(nat.text(c.name), text) {
					continue
				}
			}
			t.declare("nat", c.name)
			t.lines("nat", text, int(c.lines))
		}
		for _, s := range r.tops {
			if progressive[s.slot] {
				t.lines(topChains[s.slot].table, r.topText(s), 1)
			}
		}
		if limit > 0 && t.rules >= limit {
			existing += t.rules
			if err := p.restore(f, t, &st, false); err != nil {
				return st, nil, errors.Join(append(errs, err)...)
			}
			t.reset()
			if adaptive {
				limit = adaptiveLimit(existing)
			}
		}
	}
	for _, sc := range statics {
		if sc.slot >= 0 {
			writeTop(sc)
		}
	}
	// Chains of services that are gone.
	var stale []string
	if kept < kernSvc {
		want := make(map[string]bool, kept)
		for _, r := range svcs {
			for _, c := range r.chains {
				if nat.chains[c.name] {
					want[c.name] = true
				}
			}
		}
		for name := range nat.chains {
			if isServiceChain(name) && !want[name] {
				stale = append(stale, name)
			}
		}
	}
	slices.Sort(stale)
	for _, name := range stale {
		t.declare("nat", name)
		fmt.Fprintf(&t.tail[tableIndex("nat")], "-X %s\n", name)
		t.st.DeletedChains++
	}
	for _, j := range jumps(p.cfg.LocalhostNodePorts, f.fc.fam) {
		line := "-A " + j.from + " " + j.rule
		if slices.Contains(kern[j.table].rules[j.from], line) {
			continue
		}
		fmt.Fprintf(&t.tail[tableIndex(j.table)], "-I %s 1 %s\n", j.from, j.rule)
		t.st.Rules++
	}
	if err := p.restore(f, t, &st, false); err != nil {
		return st, nil, errors.Join(append(errs, err)...)
	}
	// The first sync of a process has nothing to compare with: it flushes
	// nothing (a restart with an unchanged cluster writes nothing).
	var targets []conntrack.Target
	if f.synced {
		targets = f.staleFlows(svcs)
	}
	f.svcs, f.eps, f.full, f.synced = svcs, eps, false, true
	if rendered {
		f.gens = f.nextGens
	}
	f.from, f.renderErrs = s, errs
	return st, targets, errors.Join(errs...)
}

// syncPartial writes only what the snapshot's changes alter: the changed
// chains of changed services, their rules in the top-level chains (deleted
// and added rule by rule) and the deletion of chains they no longer have.
func (p *Proxier) syncPartial(f *family, s *client.Snapshot) (SyncStats, []conntrack.Target, error) {
	var st SyncStats
	f.from = nil
	var errs []error
	type change struct {
		key      client.ServiceKey
		old, new *rendered
	}
	var changes []change
	eps := f.eps
	for _, c := range s.Changes {
		ch := change{key: c.Key, old: f.svcs[c.Key]}
		if c.Service != nil {
			r := &rendered{}
			if err := render(&f.fc, c.Service, f.large, r); err != nil {
				// Keep what the kernel has for a service we cannot
				// render: the rest keeps working.
				errs = append(errs, err)
				continue
			}
			ch.new = r
			eps += r.eps
		}
		if ch.old != nil {
			eps -= ch.old.eps
		}
		changes = append(changes, ch)
	}
	if (eps > p.largeAt) != f.large {
		st, t, err := p.syncFull(f, s)
		return st, t, errors.Join(append(errs, err)...)
	}
	t := &txn{}
	nat := tableIndex("nat")
	for _, ch := range changes {
		var newChains map[string]bool
		if ch.new != nil {
			newChains = make(map[string]bool, len(ch.new.chains))
			for _, c := range ch.new.chains {
				newChains[c.name] = true
				text := ch.new.text(c)
				if ch.old != nil {
					if old, ok := ch.old.chainText(c.name); ok && bytes.Equal(old, text) {
						continue
					}
				}
				t.declare("nat", c.name)
				t.lines("nat", text, int(c.lines))
			}
		}
		for slot := range numTop {
			var oldLines, newLines []string
			if ch.old != nil {
				oldLines = ch.old.topLines(slot)
			}
			if ch.new != nil {
				newLines = ch.new.topLines(slot)
			}
			removed, added := multisetDiff(oldLines, newLines)
			tb := tableIndex(topChains[slot].table)
			for _, l := range removed {
				t.tail[tb].WriteString("-D " + strings.TrimPrefix(l, "-A "))
				t.st.Rules++
			}
			for _, l := range added {
				rest := strings.TrimPrefix(l, "-A "+topChains[slot].chain+" ")
				if slot == topNATServices {
					t.tail[tb].WriteString("-I " + topChains[slot].chain + " 1 " + rest)
				} else {
					t.tail[tb].WriteString("-A " + topChains[slot].chain + " " + rest)
				}
				t.st.Rules++
			}
		}
		if ch.old != nil {
			for _, c := range ch.old.chains {
				if !newChains[c.name] {
					t.declare("nat", c.name)
				}
			}
		}
	}
	// Deletions go after every rule that referred to the chains is gone.
	for _, ch := range changes {
		if ch.old == nil {
			continue
		}
		for _, c := range ch.old.chains {
			gone := ch.new == nil
			if !gone {
				_, has := ch.new.chainText(c.name)
				gone = !has
			}
			if gone {
				fmt.Fprintf(&t.tail[nat], "-X %s\n", c.name)
				t.st.DeletedChains++
			}
		}
	}
	if err := p.restore(f, t, &st, true); err != nil {
		f.full = true
		return st, nil, errors.Join(append(errs, err)...)
	}
	old := make(map[client.ServiceKey]*rendered, len(changes))
	for _, ch := range changes {
		old[ch.key] = ch.old
		if ch.new == nil {
			delete(f.svcs, ch.key)
		} else {
			f.svcs[ch.key] = ch.new
		}
	}
	f.eps = eps
	var targets []conntrack.Target
	for _, ch := range changes {
		targets = append(targets, udpTargets(ch.old, ch.new)...)
	}
	return st, targets, errors.Join(errs...)
}

// multisetDiff returns the lines of old missing from new and those of new
// missing from old, counting repeats.
func multisetDiff(old, new []string) (removed, added []string) {
	if slices.Equal(old, new) {
		return nil, nil
	}
	count := map[string]int{}
	for _, l := range old {
		count[l]++
	}
	for _, l := range new {
		if count[l] > 0 {
			count[l]--
		} else {
			added = append(added, l)
		}
	}
	for _, l := range old {
		if count[l] > 0 {
			count[l]--
			removed = append(removed, l)
		}
	}
	return removed, added
}
