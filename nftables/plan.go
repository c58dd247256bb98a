package nftables

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// planner builds one family's transaction: the operations that turn what
// the table holds (cur) into the ruleset wanted (rs), compiling only what
// is written, and the state the table holds once they are committed.
//
// The operations come in this order, which the kernel needs: the table,
// new sets, new chains (rules and map elements jump to them), element
// deletions, flushes of changed and doomed chains, element additions,
// rules, then the doomed chains and sets (nothing refers to them any
// more). A changed chain is flushed and its rules added again; a chain or
// set whose definition changed makes the whole table be replaced, in the
// same transaction.
type planner struct {
	rs    *ruleset.Ruleset
	table nft.Table
	tc    tableCompiler
	newID func() uint32
	fam   string

	// the operations by phase, concatenated in order by ops.
	head, delElems, flush, addElems, rules, tail []op
}

// errRedefined stops a plan at a chain or set whose definition changed:
// the table is replaced instead.
var errRedefined = errors.New("definition changed")

// plan returns the operations of one family's transaction and the state
// after it. No operations means the table already holds rs.
func plan(cur *applied, rs *ruleset.Ruleset, tc tableCompiler, newID func() uint32) ([]op, applied, error) {
	replace := cur.exists && (cur.replace || cur.comment != rs.Comment)
	ops, next, err := planFrom(cur, rs, tc, newID, replace)
	if errors.Is(err, errRedefined) {
		return planFrom(cur, rs, tc, newID, true)
	}
	return ops, next, err
}

// planFrom plans from cur, or from nothing after deleting the table when
// replace.
func planFrom(cur *applied, rs *ruleset.Ruleset, tc tableCompiler, newID func() uint32, replace bool) ([]op, applied, error) {
	p := &planner{rs: rs, tc: tc, newID: newID, fam: rs.Family}
	t, err := tc.table()
	if err != nil {
		return nil, applied{}, fmt.Errorf("compile %s: %w", p.tableLabel(), err)
	}
	p.table = t
	next := applied{exists: true, comment: rs.Comment, table: t}
	from := cur
	if replace {
		p.head = append(p.head, op{kind: opDelTable, label: p.tableLabel(), table: &t})
		from = &applied{}
	}
	if !from.exists {
		p.head = append(p.head, op{kind: opAddTable, label: p.tableLabel(), table: &t})
	}
	if next.sets, err = p.sets(from, sortedSets(rs.Sets)); err != nil {
		return nil, applied{}, err
	}
	if next.chains, err = p.chains(from, sortedChains(rs.Chains)); err != nil {
		return nil, applied{}, err
	}
	return p.ops(), next, nil
}

// ops returns the operations in order. A transaction that neither
// creates nor deletes the table starts with an add of the existing table,
// which changes nothing: the kernel then tells the commit's generation to
// the committing socket (nft.Conn.Commit), sparing a read of it.
func (p *planner) ops() []op {
	n := len(p.head) + len(p.delElems) + len(p.flush) + len(p.addElems) + len(p.rules) + len(p.tail)
	if n == 0 {
		return nil
	}
	out := make([]op, 0, n+1)
	if k := p.head; len(k) == 0 || k[0].kind != opAddTable && k[0].kind != opDelTable {
		out = append(out, op{kind: opAddTable, label: p.tableLabel(), table: &p.table})
	}
	for _, l := range [][]op{p.head, p.delElems, p.flush, p.addElems, p.rules, p.tail} {
		out = append(out, l...)
	}
	return out
}

func (p *planner) tableLabel() string { return "table " + p.fam + " " + p.rs.Table }

// sets plans the sets and their elements.
func (p *planner) sets(cur *applied, want []*ruleset.Set) ([]appliedSet, error) {
	next := make([]appliedSet, 0, len(want))
	i := 0
	for _, s := range want {
		for ; i < len(cur.sets) && cur.sets[i].def.Name < s.Name; i++ {
			p.tail = append(p.tail, op{kind: opDelSet, label: setLabel(cur.sets[i].def), name: cur.sets[i].def.Name})
		}
		var old *appliedSet
		var c nft.Set
		if i < len(cur.sets) && cur.sets[i].def.Name == s.Name {
			old = &cur.sets[i]
			if !sameSetDef(old.def, s) {
				return nil, errRedefined
			}
			c = old.set
			i++
		} else {
			var err error
			if c, err = p.tc.set(s); err != nil {
				return nil, fmt.Errorf("compile %s: %w", setLabel(s), err)
			}
			// The kernel requires NFTA_SET_ID of every set it creates.
			c.ID = p.newID()
			p.head = append(p.head, op{kind: opAddSet, label: setLabel(s), set: &c})
		}
		as, err := p.elements(old, s)
		if err != nil {
			return nil, err
		}
		as.set = c
		next = append(next, as)
	}
	for ; i < len(cur.sets); i++ {
		p.tail = append(p.tail, op{kind: opDelSet, label: setLabel(cur.sets[i].def), name: cur.sets[i].def.Name})
	}
	return next, nil
}

// elements plans the elements of set s, which holds old's (nil: a new
// set), merging the two lists sorted by key.
func (p *planner) elements(old *appliedSet, s *ruleset.Set) (appliedSet, error) {
	want := sortedElements(s.Elements)
	var have []ruleset.Element
	var dirty map[int]bool
	if old != nil {
		have, dirty = old.def.Elements, old.dirty
		if len(old.stray) == 0 && len(dirty) == 0 && slices.Equal(have, want) {
			return appliedSet{def: withElements(s, want), elems: old.elems}, nil
		}
	}
	var del, add []nft.Elem
	if old != nil {
		del = append(del, old.stray...)
	}
	elems := make([]*nft.Elem, 0, len(want))
	i := 0
	for _, e := range want {
		// Equal keys are the common case: test them first (a memequal,
		// where an ordering compare would scan the whole key).
		for ; i < len(have) && have[i].Key != e.Key && have[i].Key < e.Key; i++ {
			del = append(del, *old.elems[i])
		}
		if i < len(have) && have[i].Key == e.Key {
			if have[i] == e && !dirty[i] {
				elems = append(elems, old.elems[i])
				i++
				continue
			}
			del = append(del, *old.elems[i])
			i++
		}
		c, err := p.tc.elem(s, &e)
		if err != nil {
			return appliedSet{}, fmt.Errorf("compile element %q of %s: %w", e.Key, setLabel(s), err)
		}
		elems = append(elems, &c)
		add = append(add, c)
	}
	for ; i < len(have); i++ {
		del = append(del, *old.elems[i])
	}
	if len(del) > 0 {
		p.delElems = append(p.delElems, op{kind: opDelElems, label: elemsLabel(s, len(del)), name: s.Name, elems: del})
	}
	if len(add) > 0 {
		p.addElems = append(p.addElems, op{kind: opAddElems, label: elemsLabel(s, len(add)), name: s.Name, elems: add})
	}
	return appliedSet{def: withElements(s, want), elems: elems}, nil
}

// chains plans the chains and their rules.
func (p *planner) chains(cur *applied, want []*ruleset.Chain) ([]*appliedChain, error) {
	next := make([]*appliedChain, 0, len(want))
	i := 0
	for _, c := range want {
		for ; i < len(cur.chains) && cur.chains[i].def.Name < c.Name; i++ {
			p.doom(cur.chains[i].def)
		}
		var old *appliedChain
		var k nft.Chain
		if i < len(cur.chains) && cur.chains[i].def.Name == c.Name {
			old = cur.chains[i]
			if !sameChainDef(old.def, c) {
				return nil, errRedefined
			}
			i++
			k = old.chain
			if !old.dirty && sameRules(old.def.Rules, c.Rules) {
				// Kept as it is, its text now the new ruleset's (equal:
				// the old ruleset need not be kept alive for it). The
				// change is right whether the transaction succeeds or not.
				old.def = c
				next = append(next, old)
				continue
			}
			if old.dirty || len(old.def.Rules) > 0 {
				p.flush = append(p.flush, op{kind: opFlushChain, label: chainLabel(c.Name), name: c.Name})
			}
		} else {
			var err error
			if k, err = p.tc.chain(c); err != nil {
				return nil, fmt.Errorf("compile %s: %w", chainLabel(c.Name), err)
			}
			p.head = append(p.head, op{kind: opAddChain, label: chainLabel(c.Name), chain: &k})
		}
		rules, err := p.addRules(old, c)
		if err != nil {
			return nil, err
		}
		next = append(next, &appliedChain{def: c, chain: k, rules: rules})
	}
	for ; i < len(cur.chains); i++ {
		p.doom(cur.chains[i].def)
	}
	return next, nil
}

// doom plans the deletion of a chain: flushed with the changed chains
// (its jumps go before any chain is deleted), deleted at the end.
func (p *planner) doom(c *ruleset.Chain) {
	p.flush = append(p.flush, op{kind: opFlushChain, label: chainLabel(c.Name), name: c.Name})
	p.tail = append(p.tail, op{kind: opDelChain, label: chainLabel(c.Name), name: c.Name})
}

// addRules compiles chain c's rules (reusing old's compiled form of a
// rule at the same place with the same text) and plans their addition.
func (p *planner) addRules(old *appliedChain, c *ruleset.Chain) ([]compiledRule, error) {
	out := make([]compiledRule, len(c.Rules))
	for i := range c.Rules {
		r := &c.Rules[i]
		if old != nil && !old.dirty && i < len(old.def.Rules) && old.def.Rules[i] == *r && i < len(old.rules) {
			out[i] = old.rules[i]
		} else {
			cr, err := p.tc.rule(c.Name, r, p.newID)
			if err != nil {
				return nil, fmt.Errorf("compile rule %d of %s (%q): %w", i+1, chainLabel(c.Name), r.Text, err)
			}
			out[i] = cr
		}
		p.rules = append(p.rules, op{kind: opAddRule, label: ruleLabel(c.Name, i, r), name: c.Name, rule: &out[i]})
	}
	return out, nil
}

func chainLabel(name string) string { return "chain " + name }

func setLabel(s *ruleset.Set) string {
	if s.Map {
		return "map " + s.Name
	}
	return "set " + s.Name
}

func elemsLabel(s *ruleset.Set, n int) string {
	return fmt.Sprintf("%d elements of %s", n, setLabel(s))
}

func ruleLabel(chain string, i int, r *ruleset.Rule) string {
	return fmt.Sprintf("rule %d of chain %s (%s)", i+1, chain, r.Text)
}

// withElements returns s with the elements els (s itself when they are
// its own).
func withElements(s *ruleset.Set, els []ruleset.Element) *ruleset.Set {
	if len(els) == len(s.Elements) && (len(els) == 0 || &els[0] == &s.Elements[0]) {
		return s
	}
	c := *s
	c.Elements = els
	return &c
}

func sortedSets(l []ruleset.Set) []*ruleset.Set {
	out := make([]*ruleset.Set, len(l))
	for i := range l {
		out[i] = &l[i]
	}
	byName := func(a, b *ruleset.Set) int { return strings.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(out, byName) {
		slices.SortStableFunc(out, byName)
	}
	return out
}

func sortedChains(l []ruleset.Chain) []*ruleset.Chain {
	out := make([]*ruleset.Chain, len(l))
	for i := range l {
		out[i] = &l[i]
	}
	byName := func(a, b *ruleset.Chain) int { return strings.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(out, byName) {
		slices.SortStableFunc(out, byName)
	}
	return out
}

// sortedElements returns l sorted by key (l itself when it is).
func sortedElements(l []ruleset.Element) []ruleset.Element {
	byKey := func(a, b ruleset.Element) int { return cmp.Compare(a.Key, b.Key) }
	if slices.IsSortedFunc(l, byKey) {
		return l
	}
	out := slices.Clone(l)
	slices.SortStableFunc(out, byKey)
	return out
}
