package nftables

import (
	"fmt"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/netlinkraw/nftexpr"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// exprCompiler compiles with package nftexpr.
type exprCompiler struct{}

// exprTable is the compile context of one table: nftexpr's, with every
// set of the ruleset defined (rules and elements refer to them by name).
type exprTable struct {
	rs   *ruleset.Ruleset
	fam  nft.Family
	t    *nftexpr.Table
	sets map[string]nft.Set
}

func (exprCompiler) table(rs *ruleset.Ruleset) (tableCompiler, error) {
	fam := nft.FamilyIPv4
	if rs.Family == "ip6" {
		fam = nft.FamilyIPv6
	}
	t, err := nftexpr.NewTable(fam)
	if err != nil {
		return nil, err
	}
	et := &exprTable{rs: rs, fam: fam, t: t, sets: make(map[string]nft.Set, len(rs.Sets))}
	for i := range rs.Sets {
		s := &rs.Sets[i]
		c, err := t.AddSet(nftexpr.SetDef{Name: s.Name, Type: s.Type, Flags: s.Flags, Timeout: s.Timeout, Comment: s.Comment}, 0)
		if err != nil {
			return nil, fmt.Errorf("compile %s: %w", setLabel(s), err)
		}
		if len(c.Fields) == 0 {
			c.Fields = nil // no NFTA_SET_DESC_CONCAT (an empty one is refused)
		}
		et.sets[s.Name] = c
	}
	return et, nil
}

func (e *exprTable) table() (nft.Table, error) {
	return nft.Table{Family: e.fam, Name: e.rs.Table, UserData: nftexpr.Comment(e.rs.Comment)}, nil
}

func (e *exprTable) chain(c *ruleset.Chain) (nft.Chain, error) {
	return nftexpr.Chain(c.Name, c.Type, c.Hook, c.Priority, c.Comment)
}

func (e *exprTable) set(s *ruleset.Set) (nft.Set, error) {
	c, ok := e.sets[s.Name]
	if !ok {
		return nft.Set{}, fmt.Errorf("not in the ruleset")
	}
	return c, nil
}

func (e *exprTable) elem(s *ruleset.Set, el *ruleset.Element) (nft.Elem, error) {
	return e.t.Elem(s.Name, el.Key, el.Value, el.Comment)
}

func (e *exprTable) rule(chain string, r *ruleset.Rule, newID func() uint32) (compiledRule, error) {
	c, err := e.t.Rule(chain, r.Text, r.Comment, newID)
	if err != nil {
		return compiledRule{}, err
	}
	out := compiledRule{rule: c.Rule}
	for _, a := range c.Sets {
		out.anon = append(out.anon, anonSet{set: a.Set, elems: a.Elems})
	}
	if err := nameAnon(&out); err != nil {
		return compiledRule{}, fmt.Errorf("name the anonymous sets of rule %q: %w", r.Text, err)
	}
	return out, nil
}
