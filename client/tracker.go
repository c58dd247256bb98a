package client

import (
	"slices"
	"time"
)

// chunkSize is the length of the sorted runs snapshots are made of: a
// change copies the list of runs (8 bytes per run) and the runs it touches.
const chunkSize = 256

// Tracker holds the latest content of each service and builds snapshots
// that list what changed since the previous one. Sources and adapters use it
// so that a change to one service costs work for that service only: the
// snapshot after it shares every untouched run of services with the one
// before. A Tracker is not safe for concurrent use.
type Tracker struct {
	entries map[ServiceKey]trackEntry
	changed []ServiceKey
	n       int // services held

	chunks [][]*ServiceEndpoints // the last snapshot's state
}

type trackEntry struct {
	se      *ServiceEndpoints // nil: removed since the last snapshot
	changed bool              // listed in Tracker.changed
	trigger time.Time         // earliest trigger time since the last snapshot
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{entries: map[ServiceKey]trackEntry{}}
}

// Set records se as the content of service k (nil removes it). It reports
// whether the content changed (compared by value, not pointer).
func (t *Tracker) Set(k ServiceKey, se *ServiceEndpoints) bool {
	return t.SetTriggered(k, se, time.Time{})
}

// SetTriggered is Set for a change triggered at the given time (zero:
// unknown). When the content changed, the next snapshot's Change for k
// carries the earliest trigger time of the changes since the previous
// snapshot (Change.TriggerTime); a removal carries none.
func (t *Tracker) SetTriggered(k ServiceKey, se *ServiceEndpoints, trigger time.Time) bool {
	e := t.entries[k]
	if se.Equal(e.se) {
		return false
	}
	switch {
	case se == nil:
		e.trigger = time.Time{}
	case !trigger.IsZero() && (e.trigger.IsZero() || trigger.Before(e.trigger)):
		e.trigger = trigger
	}
	switch {
	case e.se == nil:
		t.n++
	case se == nil:
		t.n--
	}
	e.se = se
	if !e.changed {
		e.changed = true
		t.changed = append(t.changed, k)
	}
	t.entries[k] = e
	return true
}

// Get returns the current content of service k, or nil.
func (t *Tracker) Get(k ServiceKey) *ServiceEndpoints { return t.entries[k].se }

// Len is the number of services held.
func (t *Tracker) Len() int { return t.n }

// Snapshot returns the current state and the services set since the previous
// snapshot. A service changed and changed back is listed too, with its
// current content.
func (t *Tracker) Snapshot() *Snapshot {
	// Sorting the keys moves half the bytes sorting the changes would.
	slices.SortFunc(t.changed, ServiceKey.Compare)
	changes := make([]Change, 0, len(t.changed))
	for _, k := range t.changed {
		e := t.entries[k]
		changes = append(changes, Change{Key: k, Service: e.se, TriggerTime: e.trigger})
		if e.se == nil {
			delete(t.entries, k)
		} else {
			e.changed = false
			e.trigger = time.Time{}
			t.entries[k] = e
		}
	}
	t.changed = t.changed[:0]
	if len(changes) > 0 {
		t.chunks = mergeChunks(t.chunks, changes)
	}
	return &Snapshot{Changes: changes, chunks: t.chunks, n: t.n}
}

// mergeChunks applies sorted changes to sorted runs, copying only the runs
// the changes fall in.
func mergeChunks(chunks [][]*ServiceEndpoints, changes []Change) [][]*ServiceEndpoints {
	out := make([][]*ServiceEndpoints, 0, len(chunks)+1)
	if len(chunks) == 0 {
		return appendSplit(out, mergeChunk(nil, changes))
	}
	next := 0 // first change not yet applied
	for i, c := range chunks {
		end := len(changes)
		if i < len(chunks)-1 {
			last := c[len(c)-1].Service.Key()
			end = next
			for end < len(changes) && changes[end].Key.Compare(last) <= 0 {
				end++
			}
		}
		if end == next {
			out = append(out, c)
			continue
		}
		out = appendSplit(out, mergeChunk(c, changes[next:end]))
		next = end
	}
	return out
}

// mergeChunk returns a new run: old with the changes (sorted, within old's
// range or past its end) applied.
func mergeChunk(old []*ServiceEndpoints, changes []Change) []*ServiceEndpoints {
	out := make([]*ServiceEndpoints, 0, len(old)+len(changes))
	i := 0
	for _, c := range changes {
		for i < len(old) && old[i].Service.Key().Compare(c.Key) < 0 {
			out = append(out, old[i])
			i++
		}
		if i < len(old) && old[i].Service.Key() == c.Key {
			i++ // replaced or removed
		}
		if c.Service != nil {
			out = append(out, c.Service)
		}
	}
	return append(out, old[i:]...)
}

// appendSplit appends run c to out, split into runs of chunkSize when it
// grew past twice that; an empty run is dropped.
func appendSplit(out [][]*ServiceEndpoints, c []*ServiceEndpoints) [][]*ServiceEndpoints {
	if len(c) <= 2*chunkSize {
		if len(c) > 0 {
			out = append(out, c)
		}
		return out
	}
	for len(c) > 0 {
		n := min(chunkSize, len(c))
		out = append(out, c[:n:n])
		c = c[n:]
	}
	return out
}
