package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/client"
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
func (p *Proxier) syncFull(f *family, s *client.Snapshot) (SyncStats, error) {
	f.full = true
	list, svcs, eps, errs, rendered := p.renderFull(f, s)
	f.from = nil
	list = p.hold(f, list, svcs, &eps)
	st := SyncStats{Full: true}
	for refusals := 0; ; refusals++ {
		kern, err := p.read(f)
		if err != nil {
			return st, errors.Join(append(errs, err)...)
		}
		w := fullWrite{p: p, f: f, kern: kern, list: list, t: &txn{}, st: SyncStats{Full: true}}
		err = w.write(svcs)
		st.add(w.st)
		if err == nil {
			break
		}
		// One service's rule refused: quarantine it, and write the rest
		// again, keeping what the kernel has of it.
		var svc client.ServiceKey
		ok := false
		if refusals < maxRefusals {
			svc, ok = p.refuse(f, err, list)
		}
		if !ok {
			return st, errors.Join(append(errs, err)...)
		}
		list = f.substitute(svc, list, svcs, &eps)
	}
	quarantined := p.settle(f, s, svcs)
	f.svcs, f.eps, f.full, f.synced = svcs, eps, false, true
	if rendered {
		f.gens = f.nextGens
	}
	f.from, f.renderErrs = s, errs
	if quarantined {
		// The renderings are not all the snapshot's: render again.
		f.from = nil
	}
	return st, errors.Join(errs...)
}

// renderFull returns the renderings of every service of s for a full
// sync: list in key order, svcs by key, their endpoints and the render
// errors. rendered is false when they are those of the last full sync,
// which rendered and wrote s with no partial sync since: rendering is
// pure and a snapshot does not change, so its services render as they
// did and only the kernel is compared again.
func (p *Proxier) renderFull(f *family, s *client.Snapshot) (list []*rendered, svcs map[client.ServiceKey]*rendered, eps int, errs []error, rendered bool) {
	if f.from == s {
		for se := range s.All() {
			if r := f.svcs[se.Service.Key()]; r != nil {
				list = append(list, r)
			}
		}
		return list, f.svcs, f.eps, slices.Clone(f.renderErrs), false
	}
	total := 0
	for se := range s.All() {
		if total += countEndpoints(se, f.fc.fam == xtables.IPv6); total > p.largeAt {
			break
		}
	}
	f.large = total > p.largeAt
	list, svcs, eps, errs = f.renderAll(s, f.large)
	f.renders++
	return list, svcs, eps, errs, true
}

// fullWrite writes one family's full sync: what differs between the
// renderings and the kernel's tables, in transactions of bounded size.
type fullWrite struct {
	p    *Proxier
	f    *family
	kern map[string]kernelTable
	list []*rendered // in key order
	t    *txn
	st   SyncStats
	// limit bounds the rules of one transaction (<= 0: no bound);
	// adaptive makes it follow existing, the nat rules in the kernel.
	limit    int
	adaptive bool
	existing int
	// progressive marks the top-level chains filled progressively
	// (writeTop).
	progressive [numTop]bool
}

// write writes the service chains, then the top-level chains, the
// deletion of stale service chains (those the kernel has that no
// rendering of svcs has) and the missing jumps from the built-in chains.
func (w *fullWrite) write(svcs map[client.ServiceKey]*rendered) error {
	w.bound()
	// Top-level chains: those service chains refer to (KUBE-MARK-MASQ) and
	// the other service-independent ones first, those that refer to
	// service chains last, after every service chain exists.
	statics := staticChains(&w.p.cfg, &w.f.fc)
	for _, sc := range statics {
		switch {
		case sc.slot < 0:
			w.writeTop(sc)
		case w.limit > 0 && !w.kern[sc.table].chains[sc.chain]:
			w.progressive[sc.slot] = true
			w.t.declare(sc.table, sc.chain)
		}
	}
	kept, err := w.writeServices()
	if err != nil {
		return err
	}
	for _, sc := range statics {
		if sc.slot >= 0 {
			w.writeTop(sc)
		}
	}
	w.deleteStale(svcs, kept)
	w.addJumps()
	return w.p.restore(w.f, w.t, &w.st, false)
}

// bound sets the transactions' bound. The kernel's nat rules count: with
// nft, every transaction costs in proportion to them, and within one
// transaction the cost grows with the square of its size, so the
// adaptive bound grows as the square root of the table.
func (w *fullWrite) bound() {
	for _, l := range w.kern["nat"].rules {
		w.existing += len(l)
	}
	w.limit = w.p.cfg.MaxRestoreRules
	legacy := w.f.backend == xtables.Legacy
	w.adaptive = w.limit == 0 && !legacy
	if w.limit == 0 && legacy {
		// Legacy rewrites the whole table on every restore: one
		// transaction is fastest and stays linear.
		w.limit = -1
	}
	if w.adaptive {
		w.limit = adaptiveLimit(w.existing)
	}
}

// writeServices writes each service's nat chains that differ from the
// kernel's and, into progressive top-level chains, its rules there, in
// transactions of at most limit rules (whole services). It returns how
// many of the kernel's service chains the renderings keep.
func (w *fullWrite) writeServices() (kept int, err error) {
	nat, t := w.kern["nat"], w.t
	for _, r := range w.list {
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
			if w.progressive[s.slot] {
				t.lines(topChains[s.slot].table, r.topText(s), 1)
			}
		}
		if w.limit > 0 && t.rules >= w.limit {
			w.existing += t.rules
			if err := w.p.restore(w.f, t, &w.st, false); err != nil {
				return kept, err
			}
			t.reset()
			if w.adaptive {
				w.limit = adaptiveLimit(w.existing)
			}
		}
	}
	return kept, nil
}

// writeTop writes a top-level chain. A chain the kernel does not have yet
// (a first sync) is filled progressively when transactions are bounded:
// declared in the first transaction, each service's rules added in the
// transaction of its chains, the static rules (KUBE-SERVICES' node-port
// rule, last) here, in the last one. iptables-nft-restore's cost grows
// with the square of the chains one transaction's rules jump to, so
// 10,000 jumps in one last transaction cost more than the rest of the sync
// together. A chain the kernel has is rewritten whole in the last
// transaction, when it differs, so it never lacks a service's rule in
// between.
func (w *fullWrite) writeTop(sc staticChain) {
	t := w.t
	if sc.shared {
		if !w.kern[sc.table].chains[sc.chain] {
			t.declare(sc.table, sc.chain)
		}
		return
	}
	if sc.slot >= 0 && w.progressive[sc.slot] {
		for _, l := range sc.rules {
			t.lines(sc.table, []byte(l+"\n"), 1)
		}
		return
	}
	if w.kern[sc.table].chains[sc.chain] && sameMultiset(w.kern[sc.table].rules[sc.chain], w.topRules(sc)) {
		return
	}
	t.declare(sc.table, sc.chain)
	if sc.slot >= 0 {
		for _, r := range w.list {
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

// topRules returns the rules of a top-level chain as iptables-save lines:
// the services' rules, then its static ones.
func (w *fullWrite) topRules(sc staticChain) []string {
	lines := slices.Clone(sc.rules)
	if sc.slot < 0 {
		return lines
	}
	var svcLines []string
	for _, r := range w.list {
		svcLines = append(svcLines, r.topLines(sc.slot)...)
	}
	for i := range svcLines {
		svcLines[i] = strings.TrimSuffix(svcLines[i], "\n")
	}
	return append(svcLines, lines...)
}

// deleteStale deletes the kernel's service chains that no rendering of
// svcs has (services that are gone); when the renderings keep all of
// them (kept), none is stale and no set of names is needed.
func (w *fullWrite) deleteStale(svcs map[client.ServiceKey]*rendered, kept int) {
	nat := w.kern["nat"]
	kernSvc := 0
	for name := range nat.chains {
		if isServiceChain(name) {
			kernSvc++
		}
	}
	if kept >= kernSvc {
		return
	}
	want := make(map[string]bool, kept)
	for _, r := range svcs {
		for _, c := range r.chains {
			if nat.chains[c.name] {
				want[c.name] = true
			}
		}
	}
	var stale []string
	for name := range nat.chains {
		if isServiceChain(name) && !want[name] {
			stale = append(stale, name)
		}
	}
	slices.Sort(stale)
	for _, name := range stale {
		w.t.declare("nat", name)
		fmt.Fprintf(&w.t.tail[tableIndex("nat")], "-X %s\n", name)
		w.t.st.DeletedChains++
	}
}

// addJumps inserts the jumps from the built-in chains that the kernel
// lacks.
func (w *fullWrite) addJumps() {
	for _, j := range jumps() {
		line := "-A " + j.from + " " + j.rule
		if slices.Contains(w.kern[j.table].rules[j.from], line) {
			continue
		}
		fmt.Fprintf(&w.t.tail[tableIndex(j.table)], "-I %s 1 %s\n", j.from, j.rule)
		w.t.st.Rules++
	}
}
