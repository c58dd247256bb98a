package ruleset

import (
	"cmp"
	"slices"
)

// Delta is how one family's ruleset changed between two renders: applied
// to the first ruleset it gives the second exactly (Renderer.RenderDelta).
// Every list is sorted by name or key. Chains and sets that a Delta adds
// or changes are the render's own (read-only).
type Delta struct {
	// Chains are the chains added or changed (rules or definition).
	Chains []*Chain
	// DeletedChains names the chains that went.
	DeletedChains []string
	// Sets are the sets added or changed (the affinity sets).
	Sets []*Set
	// DeletedSets names the sets that went.
	DeletedSets []string
	// Elements are the element changes, one per set that has any, sorted
	// by set name.
	Elements []ElementDelta
}

// ElementDelta is the change of one set's elements: an element whose
// value or comment changed is deleted and added.
type ElementDelta struct {
	Set            string
	Added, Deleted []Element
}

// Empty reports whether the Delta changes nothing.
func (d *Delta) Empty() bool {
	return len(d.Chains) == 0 && len(d.DeletedChains) == 0 && len(d.Sets) == 0 && len(d.DeletedSets) == 0 && len(d.Elements) == 0
}

// keyCounts counts, per name of chain and set and per key of each shared
// set, the services (and base table) that contribute it: a name or key
// that more than one contributes is written as the first one's, which a
// Delta cannot tell from the changed services alone.
type keyCounts struct {
	chains, sets map[string]int32
	elems        [elCount]map[string]int32
}

// newKeyCounts counts the names and keys of the base table and svcs.
func (r *renderer) newKeyCounts(svcs []*svcOut) *keyCounts {
	n := 0
	var ne [elCount]int
	for _, o := range svcs {
		n += len(o.chains)
		for e := range ne {
			ne[e] += len(o.elems[e])
		}
	}
	k := &keyCounts{chains: make(map[string]int32, n+32), sets: map[string]int32{}}
	for e := range k.elems {
		k.elems[e] = make(map[string]int32, ne[e])
	}
	base, sets := r.baseTable()
	for name := range base {
		k.chains[name]++
	}
	for i := range sets {
		k.sets[sets[i].Name]++
	}
	for _, o := range svcs {
		for i := range o.chains {
			k.chains[o.chains[i].Name]++
		}
		for i := range o.affinity {
			k.sets[o.affinity[i].Name]++
		}
		for e := range o.elems {
			for i := range o.elems[e] {
				k.elems[e][o.elems[e][i].Key]++
			}
		}
	}
	return k
}

// touch is what the changed services contributed to one name or key:
// the count before the change, and their first old and new item.
type touch[T any] struct {
	before   int32
	old, new *T
}

// tracker updates one count map with the changed services' items and
// records what they touched.
type tracker[T any] struct {
	counts  map[string]int32
	touched map[string]*touch[T]
}

func newTracker[T any](counts map[string]int32) *tracker[T] {
	return &tracker[T]{counts: counts, touched: map[string]*touch[T]{}}
}

func (t *tracker[T]) item(key string, v *T, added bool) {
	e := t.touched[key]
	if e == nil {
		e = &touch[T]{before: t.counts[key]}
		t.touched[key] = e
	}
	if added {
		t.counts[key]++
		if e.new == nil {
			e.new = v
		}
		return
	}
	if t.counts[key]--; t.counts[key] <= 0 {
		delete(t.counts, key)
	}
	if e.old == nil {
		e.old = v
	}
}

// result returns the items added (or changed) and the keys of those
// deleted, sorted by key; ok is false when a touched key has more than
// one contributor before or after.
func (t *tracker[T]) result(equal func(a, b *T) bool) (added []*T, deleted []*T, ok bool) {
	keys := make([]string, 0, len(t.touched))
	for k, e := range t.touched {
		if e.before > 1 || t.counts[k] > 1 {
			return nil, nil, false
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e := t.touched[k]
		if e.old != nil && e.new != nil && equal(e.old, e.new) {
			continue
		}
		if e.old != nil {
			deleted = append(deleted, e.old)
		}
		if e.new != nil {
			added = append(added, e.new)
		}
	}
	return added, deleted, true
}

// delta returns the change from prev to st, given the services whose
// output changed, and keeps st's counts; nil when it cannot be told.
func (r *renderer) delta(prev, st *famState, changes []svcChange) *Delta {
	k := prev.counts
	if k == nil {
		k = r.newKeyCounts(prev.svcs)
	}
	st.counts = k
	chains := newTracker[Chain](k.chains)
	sets := newTracker[Set](k.sets)
	var elems [elCount]*tracker[Element]
	for e := range elems {
		elems[e] = newTracker[Element](k.elems[e])
	}
	for _, c := range changes {
		for i, o := range []*svcOut{c.old, c.out} {
			if o == nil {
				continue
			}
			added := i == 1
			for j := range o.chains {
				chains.item(o.chains[j].Name, &o.chains[j], added)
			}
			for j := range o.affinity {
				sets.item(o.affinity[j].Name, &o.affinity[j], added)
			}
			for e := range o.elems {
				for j := range o.elems[e] {
					elems[e].item(o.elems[e][j].Key, &o.elems[e][j], added)
				}
			}
		}
	}
	if !slices.Equal(prev.cidrs, st.cidrs) {
		return nil // the base table changed
	}
	d := &Delta{}
	var ok bool
	var gone []*Chain
	if d.Chains, gone, ok = chains.result(sameChain); !ok {
		return nil
	}
	d.DeletedChains = deletedNames(gone, d.Chains, func(c *Chain) string { return c.Name })
	var goneSets []*Set
	if d.Sets, goneSets, ok = sets.result(sameSet); !ok {
		return nil
	}
	d.DeletedSets = deletedNames(goneSets, d.Sets, func(s *Set) string { return s.Name })
	for e := range elems {
		add, del, ok := elems[e].result(func(a, b *Element) bool { return *a == *b })
		if !ok {
			return nil
		}
		if len(add)+len(del) > 0 {
			d.Elements = append(d.Elements, ElementDelta{Set: elemSets[e], Added: derefAll(add), Deleted: derefAll(del)})
		}
	}
	slices.SortFunc(d.Elements, func(a, b ElementDelta) int { return cmp.Compare(a.Set, b.Set) })
	return d
}

// deletedNames returns the names of gone that added does not have again
// (a changed item is in both), sorted.
func deletedNames[T any](gone, added []*T, name func(*T) string) []string {
	var out []string
	j := 0
	for _, g := range gone {
		n := name(g)
		for j < len(added) && name(added[j]) < n {
			j++
		}
		if j < len(added) && name(added[j]) == n {
			continue
		}
		out = append(out, n)
	}
	return out
}

func derefAll(l []*Element) []Element {
	out := make([]Element, len(l))
	for i, e := range l {
		out[i] = *e
	}
	return out
}

// sameChain reports whether two chains are the same, rules and all.
func sameChain(a, b *Chain) bool {
	return a.Name == b.Name && a.Type == b.Type && a.Hook == b.Hook && a.Priority == b.Priority &&
		a.Comment == b.Comment && slices.Equal(a.Rules, b.Rules)
}

// sameSet reports whether two sets are the same, elements and all.
func sameSet(a, b *Set) bool {
	return a.Name == b.Name && a.Type == b.Type && a.Map == b.Map && a.Timeout == b.Timeout &&
		a.Comment == b.Comment && slices.Equal(a.Flags, b.Flags) && slices.Equal(a.Elements, b.Elements)
}
