package client

import (
	"slices"
)

// Tracker holds the latest content of each service and builds snapshots
// that list what changed since the previous one. Sources and adapters use it
// so that a change to one service costs work for that service only (plus one
// copy of the sorted pointer list per snapshot). A Tracker is not safe for
// concurrent use.
type Tracker struct {
	entries map[ServiceKey]trackEntry
	changed []ServiceKey
	n       int // services held (entries with content)

	sorted  []*ServiceEndpoints // the last snapshot's Services
	reorder bool                // membership changed since sorted was built
}

type trackEntry struct {
	se      *ServiceEndpoints // nil: removed since the last snapshot
	changed bool              // listed in Tracker.changed
	idx     int               // position in sorted, when se was in it
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{entries: map[ServiceKey]trackEntry{}}
}

// Set records se as the content of service k (nil removes it). It reports
// whether the content changed (compared by value, not pointer).
func (t *Tracker) Set(k ServiceKey, se *ServiceEndpoints) bool {
	e, ok := t.entries[k]
	if se.Equal(e.se) {
		return false
	}
	if !ok {
		e.idx = -1
	}
	if (e.se == nil) != (se == nil) {
		t.reorder = true
		if se == nil {
			t.n--
		} else {
			t.n++
		}
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
// current content. The result is shared and must not be modified.
func (t *Tracker) Snapshot() *Snapshot {
	changes := make([]Change, 0, len(t.changed))
	for _, k := range t.changed {
		e := t.entries[k]
		changes = append(changes, Change{Key: k, Service: e.se})
		if e.se == nil {
			delete(t.entries, k)
		} else {
			e.changed = false
			t.entries[k] = e
		}
	}
	t.changed = t.changed[:0]
	slices.SortFunc(changes, func(a, b Change) int { return a.Key.Compare(b.Key) })
	switch {
	case t.reorder:
		t.sorted = make([]*ServiceEndpoints, 0, t.n)
		for _, e := range t.entries {
			t.sorted = append(t.sorted, e.se)
		}
		slices.SortFunc(t.sorted, func(a, b *ServiceEndpoints) int {
			return a.Service.Key().Compare(b.Service.Key())
		})
		for i, se := range t.sorted {
			k := se.Service.Key()
			e := t.entries[k]
			e.idx = i
			t.entries[k] = e
		}
		t.reorder = false
	case len(changes) > 0:
		// Copy on write: the previous snapshot's list belongs to its reader.
		t.sorted = slices.Clone(t.sorted)
		for _, c := range changes {
			t.sorted[t.entries[c.Key].idx] = c.Service
		}
	}
	return &Snapshot{Services: t.sorted, Changes: changes}
}
