package nftables

import (
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// opKind is the kind of one operation of a transaction.
type opKind uint8

// The operations, in the order a transaction carries them (plan.go).
const (
	opDelTable opKind = iota
	opAddTable
	opAddSet
	opAddChain
	opDelElems
	opFlushChain
	opAddElems
	opAddRule // with its anonymous sets before it
	opDelChain
	opDelSet
)

var opNames = [...]string{"delete table", "add table", "add set", "add chain", "delete elements", "flush chain",
	"add elements", "add rule", "delete chain", "delete set"}

func (k opKind) String() string { return opNames[k] }

// op is one operation of a family's transaction, with the label that
// names its object in errors.
type op struct {
	kind  opKind
	label string
	// name is the chain or set of FlushChain, DelChain, DelSet, AddElems
	// and DelElems.
	name  string
	table *nft.Table
	chain *nft.Chain
	set   *nft.Set
	elems []nft.Elem
	rule  *compiledRule
}

// compiler compiles a family's ruleset text into kernel objects
// (nftexpr.go binds package nftexpr).
type compiler interface {
	// table returns the compiler of one table's objects: rules are
	// compiled in the context of the table's sets.
	table(rs *ruleset.Ruleset) (tableCompiler, error)
}

// tableCompiler compiles the objects of one table.
type tableCompiler interface {
	table() (nft.Table, error)
	chain(c *ruleset.Chain) (nft.Chain, error)
	set(s *ruleset.Set) (nft.Set, error)
	elem(s *ruleset.Set, e *ruleset.Element) (nft.Elem, error)
	// rule compiles a rule of chain; newID numbers the anonymous sets it
	// creates (unique within a transaction).
	rule(chain string, r *ruleset.Rule, newID func() uint32) (compiledRule, error)
}

// counts sums a transaction's operations for SyncStats.
func countOps(ops []op, st *SyncStats) {
	for i := range ops {
		switch o := &ops[i]; o.kind {
		case opAddRule:
			st.Rules++
		case opAddChain:
			st.Chains++
		case opFlushChain:
			st.FlushedChains++
		case opDelChain:
			st.DeletedChains++
		case opAddElems:
			st.AddedElements += len(o.elems)
		case opDelElems:
			st.DeletedElements += len(o.elems)
		case opAddSet:
			st.Sets++
		case opDelSet:
			st.DeletedSets++
		}
	}
}
