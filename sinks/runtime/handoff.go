package runtime

import (
	"time"

	"github.com/proxysinks/proxysinks/client"
)

// pending is a snapshot on its way to the controller, with the trigger
// times of its changes and of the changes of the snapshots it replaced.
type pending struct {
	s        *client.Snapshot
	triggers []time.Time
}

// handoff passes snapshots from the source to the controller's goroutine,
// keeping only the newest: a slow sync skips stale ones.
type handoff struct {
	ch chan pending
}

func newHandoff() *handoff { return &handoff{ch: make(chan pending, 1)} }

// put hands s over, replacing a snapshot not taken yet. It is called from
// one goroutine (the source's).
func (h *handoff) put(s *client.Snapshot) {
	p := pending{s: s, triggers: triggerTimes(nil, s)}
	select {
	case old := <-h.ch:
		// The skipped snapshot's changes are still changes for the
		// controller (an incremental one reads only those), and their
		// trigger times still count.
		p.s = merged(old.s, s)
		p.triggers = append(old.triggers, p.triggers...)
	default:
	}
	h.ch <- p
}

// merged returns cur with the changes of prev, the snapshot before it that
// the controller never saw, folded in: a service changed in either is
// changed since the snapshot before prev, with cur's content and the
// earliest trigger time. When either does not know its changes, neither
// does the result.
func merged(prev, cur *client.Snapshot) *client.Snapshot {
	out := *cur // the same state; only the change list differs
	out.Full = prev.Full || cur.Full
	if out.Full {
		out.Changes = nil
		return &out
	}
	a, b := prev.Changes, cur.Changes
	cs := make([]client.Change, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || len(a) > 0 && a[0].Key.Compare(b[0].Key) < 0:
			cs = append(cs, a[0])
			a = a[1:]
		case len(a) == 0 || b[0].Key.Compare(a[0].Key) < 0:
			cs = append(cs, b[0])
			b = b[1:]
		default:
			c := b[0]
			if t := a[0].TriggerTime; !t.IsZero() && (c.TriggerTime.IsZero() || t.Before(c.TriggerTime)) {
				c.TriggerTime = t
			}
			cs = append(cs, c)
			a, b = a[1:], b[1:]
		}
	}
	out.Changes = cs
	return &out
}

// triggerTimes appends the known trigger times of s's changes to ts.
func triggerTimes(ts []time.Time, s *client.Snapshot) []time.Time {
	for _, c := range s.Changes {
		if !c.TriggerTime.IsZero() {
			ts = append(ts, c.TriggerTime)
		}
	}
	return ts
}
