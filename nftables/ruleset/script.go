package ruleset

import (
	"strconv"
	"strings"
)

// Script returns the ruleset as an `nft -f` script that creates it: the
// table, its chains, sets and maps, then their elements and the chains'
// rules, one command a line, in the words knftables writes for kube-proxy.
// It flushes nothing: run on a host without the table it creates exactly
// the ruleset (--dry-run prints it).
func (r *Ruleset) Script() string {
	var b strings.Builder
	pre := r.Family + " " + r.Table + " "
	b.WriteString("add table " + r.Family + " " + r.Table)
	if r.Comment != "" {
		b.WriteString(" { comment " + strconv.Quote(r.Comment) + " ; }")
	}
	b.WriteByte('\n')
	for i := range r.Chains {
		writeChain(&b, pre, &r.Chains[i])
	}
	for i := range r.Sets {
		writeSet(&b, pre, &r.Sets[i])
	}
	for i := range r.Sets {
		s := &r.Sets[i]
		for _, e := range s.Elements {
			b.WriteString("add element " + pre + s.Name + " { " + e.Key)
			if e.Comment != "" {
				b.WriteString(" comment " + strconv.Quote(e.Comment))
			}
			if e.Value != "" {
				b.WriteString(" : " + e.Value)
			}
			b.WriteString(" }\n")
		}
	}
	for i := range r.Chains {
		c := &r.Chains[i]
		for _, rule := range c.Rules {
			b.WriteString("add rule " + pre + c.Name + " " + rule.Text)
			if rule.Comment != "" {
				b.WriteString(" comment " + strconv.Quote(rule.Comment))
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// writeChain writes a chain's add command.
func writeChain(b *strings.Builder, pre string, c *Chain) {
	b.WriteString("add chain " + pre + c.Name)
	if c.Type != "" || c.Comment != "" {
		b.WriteString(" {")
		if c.Type != "" {
			b.WriteString(" type " + c.Type + " hook " + c.Hook + " priority " + c.Priority + " ;")
		}
		if c.Comment != "" {
			b.WriteString(" comment " + strconv.Quote(c.Comment) + " ;")
		}
		b.WriteString(" }")
	}
	b.WriteByte('\n')
}

// writeSet writes a set's or map's add command.
func writeSet(b *strings.Builder, pre string, s *Set) {
	kind := "set"
	if s.Map {
		kind = "map"
	}
	b.WriteString("add " + kind + " " + pre + s.Name + " { type " + s.Type + " ;")
	if len(s.Flags) > 0 {
		b.WriteString(" flags " + strings.Join(s.Flags, ",") + " ;")
	}
	if s.Timeout > 0 {
		b.WriteString(" timeout " + strconv.FormatInt(int64(s.Timeout.Seconds()), 10) + "s ;")
	}
	if s.Comment != "" {
		b.WriteString(" comment " + strconv.Quote(s.Comment) + " ;")
	}
	b.WriteString(" }\n")
}
