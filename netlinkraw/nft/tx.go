package nft

import (
	"fmt"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// Tx is a transaction being built: operations appended in order, each
// encoded at once into one buffer, sent by Conn.Commit as one atomic
// batch. Each operation carries a label, the caller's name for its object
// ("" gives "family table name"), by which a refused transaction names
// what the kernel refused. A Tx is not safe for concurrent use; Reset
// empties it for the next transaction.
//
// The add operations create, or leave alone, an existing identical object
// (nft's "add", not "create"): an existing table, chain or set of the same
// definition and an existing element of the same key and data are not
// errors. To change a map element's data, delete it and add it again in
// the same transaction.
type Tx struct {
	enc    nlcore.Encoder
	msgs   []txMsg
	ops    []txOp
	nextID uint32
	err    error
}

// txMsg is one encoded message: its type and flags and the span of its
// payload in Tx.enc.B, and the operation it belongs to.
type txMsg struct {
	typ        uint16
	flags      uint16
	start, end int
	op         int
	// firstElem is, in an element message, the index (in the
	// operation's elements) of its first element; -1 in other messages.
	firstElem int
}

// txOp is one operation: what it does and the caller's label.
type txOp struct {
	verb  string
	label string
	// echo is set when the kernel's notifications of its first message's
	// changes are few (one object, or one message's elements), so that it
	// may ask for them and, with them, for the new generation (Commit).
	echo bool
}

// NFNL flags of the messages (linux/netlink.h).
const (
	flagCreate = nlcore.FlagCreate
	flagAppend = 0x800 // NLM_F_APPEND
)

// maxElemsBytes caps a set-element message's NFTA_SET_ELEM_LIST_ELEMENTS
// nest, whose length is 16 bits: larger element lists are split over
// several messages of the same operation.
const maxElemsBytes = 60000

// NewTx returns an empty transaction.
func NewTx() *Tx { return &Tx{} }

// Reset empties the transaction for reuse, keeping its buffers: a caller
// that commits a transaction per sync builds each in the memory of the
// last.
func (tx *Tx) Reset() {
	tx.enc.Reset()
	tx.msgs = tx.msgs[:0]
	clear(tx.ops)
	tx.ops = tx.ops[:0]
	tx.nextID, tx.err = 0, nil
}

// Len returns the number of operations.
func (tx *Tx) Len() int { return len(tx.ops) }

// Messages returns the number of netlink messages the operations take
// (element operations may take several).
func (tx *Tx) Messages() int { return len(tx.msgs) }

// Bytes returns the size of the encoded messages' payloads.
func (tx *Tx) Bytes() int { return len(tx.enc.B) }

// NewSetID returns a set ID unique within the transaction, for a set
// created in it (Set.ID) that rules and elements of the same transaction
// refer to, as anonymous sets need.
func (tx *Tx) NewSetID() uint32 {
	tx.nextID++
	return tx.nextID
}

// op starts an operation.
func (tx *Tx) op(verb, label string, echo bool) {
	tx.ops = append(tx.ops, txOp{verb: verb, label: label, echo: echo})
}

// grow makes room for n more bytes, doubling the buffer (append grows
// large buffers by a quarter, copying a large transaction many times).
func (tx *Tx) grow(n int) {
	if b := tx.enc.B; cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		tx.enc.B = nb
	}
}

// begin starts a message of the current operation with the nfgenmsg
// header of family fam.
func (tx *Tx) begin(cmd uint8, flags uint16, fam Family) {
	tx.grow(4096)
	tx.msgs = append(tx.msgs, txMsg{
		typ:       nlcore.NfnlType(nlcore.NfnlSubsysNFTables, cmd),
		flags:     flags,
		start:     len(tx.enc.B),
		op:        len(tx.ops) - 1,
		firstElem: -1,
	})
	tx.enc.Nfgen(uint8(fam), 0)
}

// end closes the current message.
func (tx *Tx) end() { tx.msgs[len(tx.msgs)-1].end = len(tx.enc.B) }

// label returns the caller's label or one naming the object.
func label(l string, fam Family, names ...string) string {
	if l != "" {
		return l
	}
	s := fam.String()
	for _, n := range names {
		s += " " + n
	}
	return s
}

// AddTable adds a table (Family, Name, Flags, UserData).
func (tx *Tx) AddTable(lbl string, t Table) {
	tx.op("add table", label(lbl, t.Family, t.Name), true)
	tx.begin(msgNewTable, flagCreate, t.Family)
	tx.enc.Str(attrTableName, t.Name)
	tx.enc.BE32(attrTableFlags, t.Flags)
	if t.UserData != nil {
		tx.enc.Attr(attrTableUserData, t.UserData)
	}
	tx.end()
}

// DelTable deletes a table and everything in it.
func (tx *Tx) DelTable(lbl string, fam Family, table string) {
	tx.op("delete table", label(lbl, fam, table), false)
	tx.begin(msgDelTable, 0, fam)
	tx.enc.Str(attrTableName, table)
	tx.end()
}

// AddChain adds a chain to a table: a base chain when c.HasHook (Type,
// Hook, Priority, Policy), else a regular one.
func (tx *Tx) AddChain(lbl string, fam Family, table string, c Chain) {
	tx.op("add chain", label(lbl, fam, table, c.Name), true)
	tx.begin(msgNewChain, flagCreate, fam)
	tx.enc.Str(attrChainTable, table)
	tx.enc.Str(attrChainName, c.Name)
	if c.HasHook {
		n := tx.enc.BeginNest(attrChainHook | nlcore.AttrNested)
		tx.enc.BE32(attrHookNum, c.Hook)
		tx.enc.BE32(attrHookPriority, uint32(c.Priority))
		tx.enc.EndNest(n)
		tx.enc.BE32(attrChainPolicy, c.Policy)
	}
	if c.Type != "" {
		tx.enc.Str(attrChainType, c.Type)
	}
	if c.UserData != nil {
		tx.enc.Attr(attrChainUserData, c.UserData)
	}
	tx.end()
}

// probe starts a transaction whose first operation is a flush with a
// message that is a no-op where the operation can succeed: a NEWTABLE of
// the operation's table without attributes to change (a table that does
// not exist is created, and the flush then fails, refusing all). It is
// the first message, which asks for the kernel's notifications and so
// for the new generation (Commit), without the flush's notification of
// every rule or element it deletes.
func (tx *Tx) probe(fam Family, table string) {
	if len(tx.ops) != 1 {
		return
	}
	tx.ops[0].echo = true
	tx.begin(msgNewTable, flagCreate, fam)
	tx.enc.Str(attrTableName, table)
	tx.end()
}

// FlushChain deletes every rule of a chain.
func (tx *Tx) FlushChain(lbl string, fam Family, table, chain string) {
	tx.op("flush chain", label(lbl, fam, table, chain), false)
	tx.probe(fam, table)
	tx.begin(msgDelRule, 0, fam)
	tx.enc.Str(attrRuleTable, table)
	tx.enc.Str(attrRuleChain, chain)
	tx.end()
}

// DelChain deletes a chain; it must hold no rules (flush it first in the
// same transaction) and no rule may jump to it.
func (tx *Tx) DelChain(lbl string, fam Family, table, chain string) {
	tx.op("delete chain", label(lbl, fam, table, chain), true)
	tx.begin(msgDelChain, 0, fam)
	tx.enc.Str(attrChainTable, table)
	tx.enc.Str(attrChainName, chain)
	tx.end()
}

// AddRule appends a rule (Chain, Exprs, UserData) to its chain.
func (tx *Tx) AddRule(lbl string, fam Family, table string, r Rule) {
	tx.op("add rule", label(lbl, fam, table, r.Chain), true)
	tx.begin(msgNewRule, flagCreate|flagAppend, fam)
	tx.enc.Str(attrRuleTable, table)
	tx.enc.Str(attrRuleChain, r.Chain)
	n := tx.enc.BeginNest(attrRuleExpressions | nlcore.AttrNested)
	tx.enc.B = append(tx.enc.B, r.Exprs...)
	tx.enc.EndNest(n)
	if r.UserData != nil {
		tx.enc.Attr(attrRuleUserData, r.UserData)
	}
	tx.end()
}

// DelRule deletes the rule of a chain with the given handle.
func (tx *Tx) DelRule(lbl string, fam Family, table, chain string, handle uint64) {
	tx.op("delete rule", label(lbl, fam, table, chain, "handle", fmt.Sprint(handle)), true)
	tx.begin(msgDelRule, 0, fam)
	tx.enc.Str(attrRuleTable, table)
	tx.enc.Str(attrRuleChain, chain)
	tx.enc.BE64(attrRuleHandle, handle)
	tx.end()
}

// AddSet adds a set or map. A set that rules or elements of the same
// transaction refer to by ID has s.ID from NewSetID; an anonymous set
// (SetAnonymous|SetConstant, named "__set%d" or "__map%d") needs it. A
// set without an ID gets one (the kernel requires it).
func (tx *Tx) AddSet(lbl string, fam Family, table string, s Set) {
	tx.op("add set", label(lbl, fam, table, s.Name), true)
	tx.begin(msgNewSet, flagCreate, fam)
	e := &tx.enc
	e.Str(attrSetTable, table)
	e.Str(attrSetName, s.Name)
	e.BE32(attrSetFlags, s.Flags)
	e.BE32(attrSetKeyType, s.KeyType)
	e.BE32(attrSetKeyLen, s.KeyLen)
	if s.Flags&SetMap != 0 {
		e.BE32(attrSetDataType, s.DataType)
		if s.DataLen != 0 {
			e.BE32(attrSetDataLen, s.DataLen)
		}
	}
	if s.HasPolicy {
		e.BE32(attrSetPolicy, s.Policy)
	}
	if s.Size != 0 || s.Fields != nil {
		d := e.BeginNest(attrSetDesc | nlcore.AttrNested)
		if s.Size != 0 {
			e.BE32(attrSetDescSize, s.Size)
		}
		if s.Fields != nil {
			c := e.BeginNest(attrSetDescConcat | nlcore.AttrNested)
			for _, f := range s.Fields {
				l := e.BeginNest(attrListElem | nlcore.AttrNested)
				e.BE32(attrSetFieldLen, f)
				e.EndNest(l)
			}
			e.EndNest(c)
		}
		e.EndNest(d)
	}
	id := s.ID
	if id == 0 {
		id = tx.NewSetID() // the kernel wants one for every new set
	}
	e.BE32(attrSetID, id)
	if s.Timeout != 0 {
		e.BE64(attrSetTimeout, s.Timeout)
	}
	if s.UserData != nil {
		e.Attr(attrSetUserData, s.UserData)
	}
	tx.end()
}

// FlushSet deletes every element of a set.
func (tx *Tx) FlushSet(lbl string, fam Family, table, set string) {
	tx.op("flush set", label(lbl, fam, table, set), false)
	tx.probe(fam, table)
	tx.begin(msgDelSetElem, 0, fam)
	tx.enc.Str(attrElemListTable, table)
	tx.enc.Str(attrElemListSet, set)
	tx.end()
}

// DelSet deletes a set; no rule may refer to it.
func (tx *Tx) DelSet(lbl string, fam Family, table, set string) {
	tx.op("delete set", label(lbl, fam, table, set), true)
	tx.begin(msgDelSet, 0, fam)
	tx.enc.Str(attrSetTable, table)
	tx.enc.Str(attrSetName, set)
	tx.end()
}

// AddElems adds elements to a set or map, named set.Name and, when set.ID
// is not 0, created in this transaction with that ID (the only other
// fields used).
func (tx *Tx) AddElems(lbl string, fam Family, table string, set Set, elems []Elem) {
	tx.op("add elements to", label(lbl, fam, table, set.Name), true)
	tx.elems(msgNewSetElem, flagCreate, fam, table, set, elems, true)
}

// DelElems deletes elements (by Key, and KeyEnd and Flags for intervals)
// from a set or map.
func (tx *Tx) DelElems(lbl string, fam Family, table, set string, elems []Elem) {
	tx.op("delete elements from", label(lbl, fam, table, set), true)
	tx.elems(msgDelSetElem, 0, fam, table, Set{Name: set}, elems, false)
}
