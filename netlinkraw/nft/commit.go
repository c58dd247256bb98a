package nft

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// ErrGenerationChanged matches the error of a commit refused because the
// ruleset's generation was no longer the one given (someone else
// committed since it was read): nothing was applied.
var ErrGenerationChanged = errors.New("nf_tables generation changed since it was read")

// OpError is the kernel's error for one operation of a refused
// transaction.
type OpError struct {
	// Index is the operation's position in the transaction.
	Index int
	// Op says what it did ("add chain"), Label names its object.
	Op, Label string
	// Elem is, for an element operation, the index of the element the
	// kernel refused in the operation's elements (the kernel stops a
	// message at its first refused element and names it), -1 when not
	// known. An operation of several messages may have one refused per
	// message; Elem is the first.
	Elem int
	Err  error
}

// Error names the operation and its object.
func (e *OpError) Error() string {
	if e.Elem >= 0 {
		return fmt.Sprintf("%s %s: element %d: %v", e.Op, e.Label, e.Elem, e.Err)
	}
	return e.Op + " " + e.Label + ": " + e.Err.Error()
}

// Unwrap returns the kernel's error.
func (e *OpError) Unwrap() error { return e.Err }

// CommitError is the error of a transaction the kernel refused: nothing
// of it was applied. Failed holds the operations the kernel refused, in
// order (each at most once); Batch an error for the transaction as a whole
// (with ErrGenerationChanged: the generation check failed).
type CommitError struct {
	Ops    int
	Failed []*OpError
	Batch  error
}

// Error lists the refused operations.
func (e *CommitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nft: commit of %d operations refused, nothing applied", e.Ops)
	if e.Batch != nil {
		fmt.Fprintf(&b, ": %v", e.Batch)
	}
	for _, f := range e.Failed {
		fmt.Fprintf(&b, "; %v", f)
	}
	return b.String()
}

// Unwrap returns the batch's and the operations' errors, for errors.Is
// and errors.As.
func (e *CommitError) Unwrap() []error {
	var out []error
	if e.Batch != nil {
		out = append(out, e.Batch)
	}
	for _, f := range e.Failed {
		out = append(out, f)
	}
	return out
}

// Commit sends the transaction as one nfnetlink batch in one sendmsg: the
// kernel applies all of its operations or none. With gen not nil the
// batch carries it (NFNL_BATCH_GENID) and the kernel refuses the batch,
// unapplied, if the ruleset's generation is no longer *gen: the error
// matches ErrGenerationChanged. A refused transaction is a *CommitError
// naming each refused operation by its label.
//
// Commit returns the generation after the commit. It is exact unless the
// transaction's first operation is DelTable: the first message asks for
// its notifications (NLM_F_ECHO), and the kernel then sends the commit's
// new generation to this socket too (nothing, when nothing changed: the
// generation is then *gen, or read). A transaction starting with a flush
// starts with a no-op message for this (see FlushChain). After a first
// DelTable, whose notifications are everything the table held, the
// generation is read after the commit (GETGEN) and may include another
// writer's commit made in between.
func (c *Conn) Commit(tx *Tx, gen *uint32) (uint32, error) {
	if tx.err != nil {
		return 0, tx.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	reqs := make([]nlcore.Request, len(tx.msgs))
	for i, m := range tx.msgs {
		reqs[i] = nlcore.Request{Type: m.typ, Flags: m.flags, Payload: tx.enc.B[m.start:m.end]}
	}
	echo := len(reqs) > 0 && tx.ops[0].echo
	if echo {
		reqs[0].Flags |= nlcore.FlagEcho
	}
	var (
		newGen uint32
		seen   bool
	)
	err := c.nl.TransactWith(nlcore.NfnlSubsysNFTables, reqs, nlcore.TransactOptions{
		GenID: gen,
		Each: func(m *nlcore.Message) {
			if m.Type != nlcore.NfnlType(nlcore.NfnlSubsysNFTables, msgNewGen) {
				return
			}
			if g, err := parseGeneration(m.Data); err == nil {
				newGen, seen = g, true
			}
		},
	})
	if err != nil {
		return 0, tx.commitError(err, gen)
	}
	switch {
	case seen:
		return newGen, nil
	case (echo || len(reqs) == 0) && gen != nil:
		return *gen, nil // nothing changed
	}
	g, err := c.generation()
	if err != nil {
		return 0, fmt.Errorf("nft: commit of %d operations applied: %w", len(tx.ops), err)
	}
	return g, nil
}

// commitError maps a refused transaction's errors to its operations.
func (tx *Tx) commitError(err error, gen *uint32) error {
	var te *nlcore.TransactionError
	if !errors.As(err, &te) {
		return fmt.Errorf("nft: commit of %d operations: %w", len(tx.ops), err)
	}
	ce := &CommitError{Ops: len(tx.ops), Batch: te.Batch}
	if gen != nil && errors.Is(te.Batch, unix.ERESTART) {
		ce.Batch = fmt.Errorf("%w (the transaction was computed against generation %d): %w", ErrGenerationChanged, *gen, te.Batch)
	}
	for i, e := range te.Errors {
		if e == nil {
			continue
		}
		op := tx.msgs[i].op
		if n := len(ce.Failed); n > 0 && ce.Failed[n-1].Index == op {
			continue // a later message of the same operation
		}
		elem := -1
		if off, ok := te.BadAttrs[i]; ok {
			elem = tx.elemAt(tx.msgs[i], off)
		}
		ce.Failed = append(ce.Failed, &OpError{Index: op, Op: tx.ops[op].verb, Label: tx.ops[op].label, Elem: elem, Err: e})
	}
	return ce
}
