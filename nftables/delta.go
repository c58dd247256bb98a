package nftables

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// errNoDelta stops a delta plan that the state cannot take (a changed
// definition, an affinity set, a state read from the kernel): the sync
// plans from the whole ruleset instead.
var errNoDelta = errors.New("the change needs a full plan")

// planDelta plans the transaction that applies a render's Delta to cur,
// which must hold exactly the previous render's ruleset (family.synced).
// It costs in proportion to the change: the operations are the ones plan
// gives for the whole ruleset, in the same order, and apply (to be called
// once they are committed) brings cur to the new ruleset in place.
func planDelta(cur *applied, d *ruleset.Delta, tc tableCompiler, newID func() uint32, fam string) ([]op, func(), int, error) {
	p := &planner{rs: &ruleset.Ruleset{Family: fam, Table: TableName}, tc: tc, newID: newID, fam: fam, table: cur.table}
	var patches []func()
	for i := range d.Elements {
		patch, err := p.deltaElements(cur, &d.Elements[i])
		if err != nil {
			return nil, nil, 0, err
		}
		patches = append(patches, patch)
	}
	// The sets after the element patches (which point into cur.sets).
	patch, err := p.deltaSets(cur, d)
	if err != nil {
		return nil, nil, 0, err
	}
	patches = append(patches, patch)
	patch, rules, err := p.deltaChains(cur, d)
	if err != nil {
		return nil, nil, 0, err
	}
	patches = append(patches, patch)
	return p.ops(), func() {
		for _, f := range patches {
			f()
		}
	}, rules, nil
}

// deltaElements plans one set's element changes.
func (p *planner) deltaElements(cur *applied, ed *ruleset.ElementDelta) (func(), error) {
	si, ok := slices.BinarySearchFunc(cur.sets, ed.Set, func(s appliedSet, n string) int { return strings.Compare(s.def.Name, n) })
	if !ok {
		return nil, fmt.Errorf("%w: set %s not written", errNoDelta, ed.Set)
	}
	as := &cur.sets[si]
	if len(as.dirty) > 0 || len(as.stray) > 0 {
		return nil, errNoDelta
	}
	have := as.def.Elements
	delIdx := make([]int, len(ed.Deleted))
	del := make([]nft.Elem, len(ed.Deleted))
	for i := range ed.Deleted {
		j, ok := slices.BinarySearchFunc(have, ed.Deleted[i].Key, byElemKey)
		if !ok || have[j] != ed.Deleted[i] {
			return nil, fmt.Errorf("%w: element %q of set %s not as written", errNoDelta, ed.Deleted[i].Key, ed.Set)
		}
		delIdx[i], del[i] = j, *as.elems[j]
	}
	add := make([]nft.Elem, len(ed.Added))
	for i := range ed.Added {
		c, err := p.tc.elem(as.def, &ed.Added[i])
		if err != nil {
			return nil, fmt.Errorf("compile element %q of %s: %w", ed.Added[i].Key, setLabel(as.def), err)
		}
		add[i] = c
	}
	if len(del) > 0 {
		p.delElems = append(p.delElems, op{kind: opDelElems, label: elemsLabel(as.def, len(del)), name: ed.Set, elems: del})
	}
	if len(add) > 0 {
		p.addElems = append(p.addElems, op{kind: opAddElems, label: elemsLabel(as.def, len(add)), name: ed.Set, elems: add})
	}
	return func() { patchElements(as, delIdx, ed.Added, add) }, nil
}

// inPlace bounds the changes patched into a sorted list in place (each
// moves the list's tail); more are merged into a new list.
const inPlace = 16

// patchElements deletes the elements at delIdx (ascending) from as and
// adds els (sorted, compiled as add). The first patch copies the set's
// definition and lists (they may be shared with a ruleset or an earlier
// state); later ones change the copies in place.
func patchElements(as *appliedSet, delIdx []int, els []ruleset.Element, add []nft.Elem) {
	if as.owned && len(delIdx)+len(els) <= inPlace {
		for i := len(delIdx) - 1; i >= 0; i-- {
			as.def.Elements = slices.Delete(as.def.Elements, delIdx[i], delIdx[i]+1)
			as.elems = slices.Delete(as.elems, delIdx[i], delIdx[i]+1)
		}
		for a := range els {
			at, _ := slices.BinarySearchFunc(as.def.Elements, els[a].Key, byElemKey)
			as.def.Elements = slices.Insert(as.def.Elements, at, els[a])
			as.elems = slices.Insert(as.elems, at, &add[a])
		}
		return
	}
	have, elems := as.def.Elements, as.elems
	n := len(have) - len(delIdx) + len(els)
	outEl := make([]ruleset.Element, 0, n+n/16)
	outC := make([]*nft.Elem, 0, n+n/16)
	i := 0
	next := func(to int) {
		for ; i < to; i++ {
			if len(delIdx) > 0 && delIdx[0] == i {
				delIdx = delIdx[1:]
				continue
			}
			outEl, outC = append(outEl, have[i]), append(outC, elems[i])
		}
	}
	for a := range els {
		to, _ := slices.BinarySearchFunc(have, els[a].Key, byElemKey)
		next(to)
		outEl, outC = append(outEl, els[a]), append(outC, &add[a])
	}
	next(len(have))
	def := *as.def
	def.Elements = outEl
	as.def, as.elems, as.owned = &def, outC, true
}

// deltaSets plans the sets added and deleted (the affinity sets, which
// have no elements of the ruleset's). A set whose definition changed
// needs the table replaced: errNoDelta.
func (p *planner) deltaSets(cur *applied, d *ruleset.Delta) (func(), error) {
	type setChange struct {
		name string
		at   int
		new  *appliedSet // nil: deleted
	}
	find := func(name string) (int, bool) {
		return slices.BinarySearchFunc(cur.sets, name, func(s appliedSet, n string) int { return strings.Compare(s.def.Name, n) })
	}
	if len(d.Sets)+len(d.DeletedSets) > inPlace {
		return nil, fmt.Errorf("%w: %d sets added or deleted", errNoDelta, len(d.Sets)+len(d.DeletedSets))
	}
	var changes []setChange
	for _, s := range d.Sets {
		at, ok := find(s.Name)
		if ok || len(s.Elements) > 0 {
			return nil, fmt.Errorf("%w: set %s redefined", errNoDelta, s.Name)
		}
		if err := p.tc.define(s); err != nil {
			return nil, err
		}
		c, err := p.tc.set(s)
		if err != nil {
			return nil, fmt.Errorf("compile %s: %w", setLabel(s), err)
		}
		c.ID = p.newID()
		p.head = append(p.head, op{kind: opAddSet, label: setLabel(s), set: &c})
		changes = append(changes, setChange{name: s.Name, at: at, new: &appliedSet{def: s, set: c}})
	}
	for _, name := range d.DeletedSets {
		at, ok := find(name)
		if !ok {
			return nil, fmt.Errorf("%w: set %s not written", errNoDelta, name)
		}
		p.tail = append(p.tail, op{kind: opDelSet, label: setLabel(cur.sets[at].def), name: name})
		changes = append(changes, setChange{name: name, at: at})
	}
	slices.SortFunc(changes, func(a, b setChange) int { return strings.Compare(a.name, b.name) })
	return func() {
		for i := len(changes) - 1; i >= 0; i-- {
			if c := changes[i]; c.new == nil {
				cur.sets = slices.Delete(cur.sets, c.at, c.at+1)
			} else {
				cur.sets = slices.Insert(cur.sets, c.at, *c.new)
			}
		}
	}, nil
}

func byElemKey(e ruleset.Element, k string) int { return strings.Compare(e.Key, k) }

// deltaChains plans the chains added, changed and deleted; rules is the
// change in the number of rules.
func (p *planner) deltaChains(cur *applied, d *ruleset.Delta) (patch func(), rules int, err error) {
	find := func(name string) (int, bool) {
		return slices.BinarySearchFunc(cur.chains, name, func(c *appliedChain, n string) int { return strings.Compare(c.def.Name, n) })
	}
	var changes []chainChange
	ci, di := 0, 0
	for ci < len(d.Chains) || di < len(d.DeletedChains) {
		if di < len(d.DeletedChains) && (ci == len(d.Chains) || d.DeletedChains[di] < d.Chains[ci].Name) {
			name := d.DeletedChains[di]
			di++
			at, ok := find(name)
			if !ok || cur.chains[at].dirty {
				return nil, 0, fmt.Errorf("%w: chain %s not as written", errNoDelta, name)
			}
			p.doom(cur.chains[at].def)
			rules -= len(cur.chains[at].def.Rules)
			changes = append(changes, chainChange{old: cur.chains[at], at: at})
			continue
		}
		c := d.Chains[ci]
		ci++
		at, ok := find(c.Name)
		var old *appliedChain
		var k nft.Chain
		if ok {
			old = cur.chains[at]
			if old.dirty || !sameChainDef(old.def, c) {
				return nil, 0, fmt.Errorf("%w: chain %s redefined", errNoDelta, c.Name)
			}
			k = old.chain
			rules -= len(old.def.Rules)
			if len(old.def.Rules) > 0 {
				p.flush = append(p.flush, op{kind: opFlushChain, label: chainLabel(c.Name), name: c.Name})
			}
		} else {
			var err error
			if k, err = p.tc.chain(c); err != nil {
				return nil, 0, fmt.Errorf("compile %s: %w", chainLabel(c.Name), err)
			}
			p.head = append(p.head, op{kind: opAddChain, label: chainLabel(c.Name), chain: &k})
		}
		changes = append(changes, chainChange{old: old, at: at, new: &appliedChain{def: c, chain: k}})
	}
	// Rules after every flush, in chain order, as plan adds them.
	for _, ch := range changes {
		if ch.new == nil {
			continue
		}
		compiled, err := p.addRules(ch.old, ch.new.def)
		if err != nil {
			return nil, 0, err
		}
		ch.new.rules = compiled
		rules += len(compiled)
	}
	return func() { patchChains(cur, changes) }, rules, nil
}

// chainChange is one chain of cur.chains replaced, added (old nil) or
// deleted (new nil), at its index.
type chainChange struct {
	old, new *appliedChain
	at       int
}

// patchChains applies chain changes (sorted by name) to cur.chains.
func patchChains(cur *applied, changes []chainChange) {
	if len(changes) <= inPlace {
		for i := len(changes) - 1; i >= 0; i-- {
			switch c := changes[i]; {
			case c.old != nil && c.new != nil:
				cur.chains[c.at] = c.new
			case c.new == nil:
				cur.chains = slices.Delete(cur.chains, c.at, c.at+1)
			default:
				cur.chains = slices.Insert(cur.chains, c.at, c.new)
			}
		}
		return
	}
	out := make([]*appliedChain, 0, len(cur.chains)+len(changes))
	i := 0
	for _, c := range changes {
		out = append(out, cur.chains[i:c.at]...)
		i = c.at
		if c.old != nil {
			i++ // replaced or deleted
		}
		if c.new != nil {
			out = append(out, c.new)
		}
	}
	cur.chains = append(out, cur.chains[i:]...)
}
