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
	current map[ServiceKey]*ServiceEndpoints
	changed map[ServiceKey]struct{}

	sorted  []*ServiceEndpoints // the last snapshot's Services
	index   map[ServiceKey]int  // position in sorted
	reorder bool                // membership changed since sorted was built
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{
		current: map[ServiceKey]*ServiceEndpoints{},
		changed: map[ServiceKey]struct{}{},
		index:   map[ServiceKey]int{},
	}
}

// Set records se as the content of service k (nil removes it). It reports
// whether the content changed (compared by value, not pointer).
func (t *Tracker) Set(k ServiceKey, se *ServiceEndpoints) bool {
	old, had := t.current[k]
	if se.Equal(old) {
		return false
	}
	if se == nil {
		delete(t.current, k)
		t.reorder = true
	} else {
		t.current[k] = se
		t.reorder = t.reorder || !had
	}
	t.changed[k] = struct{}{}
	return true
}

// Get returns the current content of service k, or nil.
func (t *Tracker) Get(k ServiceKey) *ServiceEndpoints { return t.current[k] }

// Len is the number of services held.
func (t *Tracker) Len() int { return len(t.current) }

// Snapshot returns the current state and the services set since the previous
// snapshot. A service changed and changed back is listed too, with its
// current content. The result is shared and must not be modified.
func (t *Tracker) Snapshot() *Snapshot {
	changes := make([]Change, 0, len(t.changed))
	for k := range t.changed {
		changes = append(changes, Change{Key: k, Service: t.current[k]})
	}
	clear(t.changed)
	slices.SortFunc(changes, func(a, b Change) int { return a.Key.Compare(b.Key) })
	switch {
	case t.reorder:
		t.sorted = make([]*ServiceEndpoints, 0, len(t.current))
		for _, se := range t.current {
			t.sorted = append(t.sorted, se)
		}
		slices.SortFunc(t.sorted, func(a, b *ServiceEndpoints) int {
			return a.Service.Key().Compare(b.Service.Key())
		})
		clear(t.index)
		for i, se := range t.sorted {
			t.index[se.Service.Key()] = i
		}
		t.reorder = false
	case len(changes) > 0:
		// Copy on write: the previous snapshot's list belongs to its reader.
		t.sorted = slices.Clone(t.sorted)
		for _, c := range changes {
			t.sorted[t.index[c.Key]] = c.Service
		}
	}
	return &Snapshot{Services: t.sorted, Changes: changes}
}
