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
	var flags uint16
	if !hasExist(opts) {
		flags |= nlcore.FlagExcl
	}
	k, err := c.kind(set)
	if err != nil {
		return &OpError{Op: op, Object: "entries of set " + set, Err: err}
	}
	bitmap := k.t == BitmapPort
	var failed []EntryError
	first := run{perMsg: maxEntriesPerMsg}
	for i, e := range entries {
		if err := CheckEntry(k.t, k.f, e); err != nil {
			failed = append(failed, EntryError{Index: i, Entry: e, Err: err})
			continue
		}
		first.idx = append(first.idx, i)
	}
	todo := []run{first}
	for len(todo) > 0 {
		var (
			msgs  []nlcore.Request
			metas []adtMsg
			a     *nlcore.Encoder
			meta  adtMsg
			adt   int
		)
		flush := func() {
			if a == nil {
				return
			}
			a.EndNest(adt)
			msgs = append(msgs, c.msg(cmd, flags, a))
			metas = append(metas, meta)
			a = nil
		}
		for _, r := range todo {
			for _, i := range r.idx {
				if a != nil && (len(a.B)-adt > maxADTBytes || len(meta.idx) >= r.perMsg) {
					flush()
				}
				if a == nil {
					a = cmdAttrs(c.proto)
					a.Str(attrSetName, set)
					a.U32(attrLineNo, 0)
					adt = a.BeginNest(attrADT|nlcore.AttrNested)
					meta = adtMsg{perMsg: r.perMsg}
				}
				meta.idx = append(meta.idx, i)
				appendEntry(a, k.t, entries[i], uint32(len(meta.idx)))
			}
			flush()
		}
		res, err := c.exchange(msgs, false)
		if err != nil {
			err = &OpError{Op: op, Object: "entries of set " + set + " (the unanswered ones may or may not be done)", Err: err}
			if len(failed) > 0 {
				slices.SortFunc(failed, func(x, y EntryError) int { return x.Index - y.Index })
				return errors.Join(err, &BatchError{Op: op, Set: set, Failed: failed})
			}
			return err
		}
		todo = todo[:0]
		for j, r := range res {
			if r.code == 0 {
				continue
			}
			cause := errnoFromKernel(r.code, bitmap)
			if cmd == cmdDel && r.code == int(ErrExist) {
				cause = ErrNotFound
			}
			m := metas[j]
			if !r.hasLine || r.line < 1 || int(r.line) > len(m.idx) {
				// The whole message was refused (no such set, ...). The
				// set may have changed behind our back: forget its kind.
				delete(c.types, set)
				return &OpError{Op: op, Object: fmt.Sprintf("%d entries of set %s", len(entries), set), Err: cause}
			}
			bad := m.idx[r.line-1]
			failed = append(failed, EntryError{Index: bad, Entry: entries[bad], Err: cause})
			if rest := m.idx[r.line:]; len(rest) > 0 {
				// Failures cluster (a batch re-adding what exists): resend
				// the rest in smaller messages, so that every failure
				// costs the kernel a smaller copy and a batch of failures
				// takes a few rounds, not one round per failure.
				todo = append(todo, run{idx: rest, perMsg: max(1, len(m.idx)/8)})
			}
		}
	}
	if len(failed) == 0 {
		return nil
	}
	slices.SortFunc(failed, func(x, y EntryError) int { return x.Index - y.Index })
	return &BatchError{Op: op, Set: set, Failed: failed}
}
