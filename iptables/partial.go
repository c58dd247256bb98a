package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/client"
)

// syncPartial writes only what the snapshot's changes alter: the changed
// chains of changed services, their rules in the top-level chains (deleted
// and added rule by rule) and the deletion of chains they no longer have.
func (p *Proxier) syncPartial(f *family, s *client.Snapshot) (SyncStats, error) {
	var st SyncStats
	f.from = nil
	changes, eps, errs := f.renderChanges(s)
	if (eps > p.largeAt) != f.large {
		st, err := p.syncFull(f, s)
		return st, errors.Join(append(errs, err)...)
	}
	t := &txn{}
	for i := range changes {
		changes[i].write(t)
	}
	// Deletions go after every rule that referred to the chains is gone.
	for i := range changes {
		changes[i].deleteChains(t)
	}
	if err := p.restore(f, t, &st, true); err != nil {
		f.full = true
		if _, ok := refused(err, p.scratch, changedRenderings(changes)); ok {
			// One service's rule refused: a full sync now quarantines
			// it and writes the rest.
			fs, err := p.syncFull(f, s)
			fs.add(st)
			return fs, errors.Join(append(errs, err)...)
		}
		return st, errors.Join(append(errs, err)...)
	}
	for _, ch := range changes {
		if ch.new == nil {
			delete(f.svcs, ch.key)
		} else {
			f.svcs[ch.key] = ch.new
		}
		// Written (or gone): out of quarantine.
		p.q.Clear(qkey{f.fc.fam, ch.key})
	}
	f.eps = eps
	return st, errors.Join(errs...)
}

// changedRenderings returns the new renderings of changes.
func changedRenderings(changes []partialChange) []*rendered {
	out := make([]*rendered, 0, len(changes))
	for _, ch := range changes {
		if ch.new != nil {
			out = append(out, ch.new)
		}
	}
	return out
}

// partialChange is one service a partial sync changes: its rendering as
// last written (nil: a new service) and its new one (nil: deleted).
type partialChange struct {
	key      client.ServiceKey
	old, new *rendered
}

// renderChanges renders the services s changes, and returns the changes
// and the family's endpoints after them. A service that cannot be
// rendered keeps what the kernel has (the rest keeps working): its error
// is returned and it is left out of the changes.
func (f *family) renderChanges(s *client.Snapshot) (changes []partialChange, eps int, errs []error) {
	eps = f.eps
	for _, c := range s.Changes {
		ch := partialChange{key: c.Key, old: f.svcs[c.Key]}
		if c.Service != nil {
			r := &rendered{}
			if err := render(&f.fc, c.Service, f.large, r); err != nil {
				errs = append(errs, err)
				continue
			}
			ch.new = r
			eps += r.eps
		}
		if ch.old != nil {
			eps -= ch.old.eps
		}
		changes = append(changes, ch)
	}
	return changes, eps, errs
}

// write adds to t the change's chains whose text changed, its rules in the
// top-level chains and the flush of the chains it no longer has (deleted
// by deleteChains).
func (ch *partialChange) write(t *txn) {
	var newChains map[string]bool
	if ch.new != nil {
		newChains = make(map[string]bool, len(ch.new.chains))
		for _, c := range ch.new.chains {
			newChains[c.name] = true
			text := ch.new.text(c)
			if ch.old != nil {
				if old, ok := ch.old.chainText(c.name); ok && bytes.Equal(old, text) {
					continue
				}
			}
			t.declare("nat", c.name)
			t.lines("nat", text, int(c.lines))
		}
	}
	ch.writeTops(t)
	if ch.old != nil {
		for _, c := range ch.old.chains {
			if !newChains[c.name] {
				t.declare("nat", c.name)
			}
		}
	}
}

// writeTops deletes the change's old rules in the top-level chains that
// its new rendering does not have and adds the new ones, rule by rule
// (KUBE-SERVICES' first, before its node-port rule).
func (ch *partialChange) writeTops(t *txn) {
	for slot := range numTop {
		var oldLines, newLines []string
		if ch.old != nil {
			oldLines = ch.old.topLines(slot)
		}
		if ch.new != nil {
			newLines = ch.new.topLines(slot)
		}
		removed, added := multisetDiff(oldLines, newLines)
		tb := tableIndex(topChains[slot].table)
		for _, l := range removed {
			t.tail[tb].WriteString("-D " + strings.TrimPrefix(l, "-A "))
			t.st.Rules++
		}
		for _, l := range added {
			rest := strings.TrimPrefix(l, "-A "+topChains[slot].chain+" ")
			if slot == topNATServices {
				t.tail[tb].WriteString("-I " + topChains[slot].chain + " 1 " + rest)
			} else {
				t.tail[tb].WriteString("-A " + topChains[slot].chain + " " + rest)
			}
			t.st.Rules++
		}
	}
}

// deleteChains deletes the old chains the change's new rendering does not
// have.
func (ch *partialChange) deleteChains(t *txn) {
	if ch.old == nil {
		return
	}
	for _, c := range ch.old.chains {
		gone := ch.new == nil
		if !gone {
			_, has := ch.new.chainText(c.name)
			gone = !has
		}
		if gone {
			fmt.Fprintf(&t.tail[tableIndex("nat")], "-X %s\n", c.name)
			t.st.DeletedChains++
		}
	}
}

// multisetDiff returns the lines of old missing from new and those of new
// missing from old, counting repeats.
func multisetDiff(old, new []string) (removed, added []string) {
	if slices.Equal(old, new) {
		return nil, nil
	}
	count := map[string]int{}
	for _, l := range old {
		count[l]++
	}
	for _, l := range new {
		if count[l] > 0 {
			count[l]--
		} else {
			added = append(added, l)
		}
	}
	for _, l := range old {
		if count[l] > 0 {
			count[l]--
			removed = append(removed, l)
		}
	}
	return removed, added
}
