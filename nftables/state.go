package nftables

import (
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// applied is what one family's table holds in the kernel as far as the
// Proxier knows: the text it was written from, with the kernel objects
// compiled from that text kept beside it (a later sync compiles only what
// changed, and deletes elements by their compiled keys). After a read of
// the kernel (adopt.go) the parts that differ from the ruleset wanted are
// marked, so that the same diff repairs them.
type applied struct {
	// exists tells whether the table exists.
	exists bool
	// replace makes the next sync delete the table and write it whole: it
	// differs from the ruleset in a way no change of its parts repairs
	// (a chain's or set's definition, the table's comment).
	replace bool
	comment string
	// table is the table as compiled (its comment).
	table  nft.Table
	chains []*appliedChain // sorted by name
	sets   []appliedSet    // sorted by name
}

// appliedChain is a chain as written: its text and its compiled rules.
type appliedChain struct {
	def   *ruleset.Chain
	chain nft.Chain // def compiled
	rules []compiledRule
	// dirty means the kernel's rules are not def's (read from the kernel):
	// the next sync flushes the chain and adds def's rules again.
	dirty bool
}

// appliedSet is a set or map as written. def's Elements are those the
// set holds; elems are their compiled forms, in the same order.
type appliedSet struct {
	def   *ruleset.Set
	set   nft.Set // def compiled
	elems []*nft.Elem
	// dirty marks the elements of def.Elements whose kernel value is not
	// theirs (read from the kernel): deleted and added again.
	dirty map[int]bool
	// stray are elements the kernel holds that the ruleset did not have
	// when it was read: the next sync deletes them.
	stray []nft.Elem
}

// compiledRule is a rule's kernel form with the anonymous sets it
// creates in the same transaction (nft's `{ ... }` and `map { ... }`).
type compiledRule struct {
	rule nft.Rule
	anon []anonSet
}

// anonSet is an anonymous set created with a rule.
type anonSet struct {
	set   nft.Set
	elems []nft.Elem
	// hash is the digest of the content (anonHash), set by nameAnon.
	hash string
}

// sameChainDef reports whether two chains have the same definition (all
// but their rules).
func sameChainDef(a, b *ruleset.Chain) bool {
	return a.Name == b.Name && a.Type == b.Type && a.Hook == b.Hook && a.Priority == b.Priority && a.Comment == b.Comment
}

// sameSetDef reports whether two sets have the same definition (all but
// their elements).
func sameSetDef(a, b *ruleset.Set) bool {
	if a.Name != b.Name || a.Type != b.Type || a.Map != b.Map || a.Timeout != b.Timeout || a.Comment != b.Comment || len(a.Flags) != len(b.Flags) {
		return false
	}
	for i := range a.Flags {
		if a.Flags[i] != b.Flags[i] {
			return false
		}
	}
	return true
}

// sameRules reports whether two rule lists are the same text.
func sameRules(a, b []ruleset.Rule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
