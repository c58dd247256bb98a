package ipset

import (
	"errors"
	"fmt"
	"slices"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// Add adds entries to set.
func (c *Conn) Add(set string, entries []Entry, opts ...Option) error {
	return c.adt(cmdAdd, "add", set, entries, opts)
}

// Del deletes entries from set.
func (c *Conn) Del(set string, entries []Entry, opts ...Option) error {
	return c.adt(cmdDel, "del", set, entries, opts)
}

// adtMsg is one ADD/DEL message and the entries it carries.
type adtMsg struct {
	idx    []int // entry index of each line
	perMsg int   // the entry limit it was built with
}

// run is a sequence of entries to send, at most perMsg per message.
type run struct {
	idx    []int
	perMsg int
}

// maxEntriesPerMsg bounds the entries of one message (the byte limit
// usually comes first).
const maxEntriesPerMsg = 1 << 16

// adt adds or deletes entries in batches: many entries per message (ADT
// with line numbers), many messages per sendmsg. The kernel stops a message
// at its first failing line and reports the line; the entries after it are
// sent again in the next round.
func (c *Conn) adt(cmd uint8, op, set string, entries []Entry, opts []Option) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := checkName(set); err != nil {
		return &OpError{Op: op, Object: "set " + set, Err: err}
	}
	k, err := c.kind(set)
	if err != nil {
		return &OpError{Op: op, Object: "entries of set " + set, Err: err}
	}
	call := &adtCall{c: c, cmd: cmd, op: op, set: set, kind: k, entries: entries}
	if !hasExist(opts) {
		call.flags |= nlcore.FlagExcl
	}
	first := run{perMsg: maxEntriesPerMsg}
	for i, e := range entries {
		if err := CheckEntry(k.t, k.f, e); err != nil {
			call.failed = append(call.failed, EntryError{Index: i, Entry: e, Err: err})
			continue
		}
		first.idx = append(first.idx, i)
	}
	for todo := []run{first}; len(todo) > 0; {
		msgs, metas := call.build(todo)
		res, err := c.exchange(msgs, false)
		if err != nil {
			err = &OpError{Op: op, Object: "entries of set " + set + " (the unanswered ones may or may not be done)", Err: err}
			if len(call.failed) > 0 {
				return errors.Join(err, call.batchError())
			}
			return err
		}
		if todo, err = call.answer(res, metas); err != nil {
			return err
		}
	}
	if len(call.failed) == 0 {
		return nil
	}
	return call.batchError()
}

// adtCall is one Add or Del call in progress.
type adtCall struct {
	c       *Conn
	cmd     uint8
	op, set string
	flags   uint16
	kind    setKind
	entries []Entry
	failed  []EntryError
}

// build encodes the entries of todo into ADD/DEL messages.
func (a *adtCall) build(todo []run) ([]nlcore.Request, []adtMsg) {
	var (
		msgs  []nlcore.Request
		metas []adtMsg
		e     *nlcore.Encoder
		meta  adtMsg
		adt   int
	)
	flush := func() {
		if e == nil {
			return
		}
		e.EndNest(adt)
		msgs = append(msgs, a.c.msg(a.cmd, a.flags, e))
		metas = append(metas, meta)
		e = nil
	}
	for _, r := range todo {
		for _, i := range r.idx {
			if e != nil && (len(e.B)-adt > maxADTBytes || len(meta.idx) >= r.perMsg) {
				flush()
			}
			if e == nil {
				e = cmdAttrs(a.c.proto)
				e.Str(attrSetName, a.set)
				e.U32(attrLineNo, 0)
				adt = e.BeginNest(attrADT | nlcore.AttrNested)
				meta = adtMsg{perMsg: r.perMsg}
			}
			meta.idx = append(meta.idx, i)
			appendEntry(e, a.kind.t, a.entries[i], uint32(len(meta.idx)))
		}
		flush()
	}
	return msgs, metas
}

// answer records the failures the kernel answered and returns the entries
// to send again: those after a failed line.
func (a *adtCall) answer(res []result, metas []adtMsg) ([]run, error) {
	var todo []run
	for j, r := range res {
		if r.code == 0 {
			continue
		}
		cause := errnoFromKernel(r.code, a.kind.t == BitmapPort)
		if a.cmd == cmdDel && r.code == int(ErrExist) {
			cause = ErrNotFound
		}
		m := metas[j]
		if !r.hasLine || r.line < 1 || int(r.line) > len(m.idx) {
			// The whole message was refused (no such set, ...). The set
			// may have changed behind our back: forget its kind.
			delete(a.c.types, a.set)
			return nil, &OpError{Op: a.op, Object: fmt.Sprintf("%d entries of set %s", len(a.entries), a.set), Err: cause}
		}
		bad := m.idx[r.line-1]
		a.failed = append(a.failed, EntryError{Index: bad, Entry: a.entries[bad], Err: cause})
		if rest := m.idx[r.line:]; len(rest) > 0 {
			// Failures cluster (a batch re-adding what exists): resend the
			// rest in smaller messages, so that every failure costs the
			// kernel a smaller copy and a batch of failures takes a few
			// rounds, not one round per failure.
			todo = append(todo, run{idx: rest, perMsg: max(1, len(m.idx)/8)})
		}
	}
	return todo, nil
}

// batchError returns the failed entries, in entry order.
func (a *adtCall) batchError() *BatchError {
	slices.SortFunc(a.failed, func(x, y EntryError) int { return x.Index - y.Index })
	return &BatchError{Op: a.op, Set: a.set, Failed: a.failed}
}
