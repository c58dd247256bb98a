// Package diffstore keeps, for every kernel object a sink manages, the value
// the cluster wants and the value the kernel was last known to hold, and
// reports the difference after each round.
//
// A round is Reset, then Set for every object the current state needs, then
// Done. Changed lists the objects that are new or whose value differs from
// the applied one; Deleted lists the applied objects the round did not set.
// The caller writes them to the kernel and calls Applied for each that
// succeeded. An object whose write failed stays pending and is reported again
// after the next round, so nothing is forgotten. Adopt records what the
// kernel already holds at start-up, so a restart with an unchanged cluster
// reports nothing.
package diffstore

// Store is a diffstore of values V keyed by K. Values are compared with the
// equality function given to New (== for NewComparable). A Store is not safe
// for concurrent use.
type Store[K comparable, V any] struct {
	equal   func(a, b V) bool
	items   map[K]*item[V]
	changed []Change[K, V]
	deleted []Change[K, V]
}

type item[V any] struct {
	want    V
	applied V
	set     bool // Set in the current round
	has     bool // applied holds the kernel's value
}

// Change is one object to write: its key, the wanted value (for Changed) and
// the value the kernel holds (Old, when HasOld).
type Change[K comparable, V any] struct {
	Key    K
	Value  V
	Old    V
	HasOld bool
}

// New returns an empty store that compares values with equal.
func New[K comparable, V any](equal func(a, b V) bool) *Store[K, V] {
	return &Store[K, V]{equal: equal, items: map[K]*item[V]{}}
}

// NewComparable returns an empty store that compares values with ==.
func NewComparable[K, V comparable]() *Store[K, V] {
	return New[K](func(a, b V) bool { return a == b })
}

// Reset starts a round: every object is unset until Set again.
func (s *Store[K, V]) Reset() {
	for k, it := range s.items {
		if !it.has {
			// Never applied and not wanted by the last round: forget it.
			if !it.set {
				delete(s.items, k)
				continue
			}
		}
		it.set = false
	}
	s.changed, s.deleted = s.changed[:0], s.deleted[:0]
}

// Set records that the current round wants key to hold value. Setting a key
// twice in a round keeps the last value.
func (s *Store[K, V]) Set(key K, value V) {
	it := s.items[key]
	if it == nil {
		it = &item[V]{}
		s.items[key] = it
	}
	it.want, it.set = value, true
}

// Get returns the value the current round set for key.
func (s *Store[K, V]) Get(key K) (V, bool) {
	it := s.items[key]
	if it == nil || !it.set {
		var zero V
		return zero, false
	}
	return it.want, true
}

// Adopt records that the kernel holds value for key, as found at start-up.
func (s *Store[K, V]) Adopt(key K, value V) {
	it := s.items[key]
	if it == nil {
		it = &item[V]{}
		s.items[key] = it
	}
	it.applied, it.has = value, true
}

// Done ends the round and computes Changed and Deleted.
func (s *Store[K, V]) Done() {
	s.changed, s.deleted = s.changed[:0], s.deleted[:0]
	for k, it := range s.items {
		switch {
		case it.set && (!it.has || !s.equal(it.want, it.applied)):
			s.changed = append(s.changed, Change[K, V]{Key: k, Value: it.want, Old: it.applied, HasOld: it.has})
		case !it.set && it.has:
			s.deleted = append(s.deleted, Change[K, V]{Key: k, Old: it.applied, HasOld: true})
		}
	}
}

// Changed returns the objects to create or update, in no particular order.
func (s *Store[K, V]) Changed() []Change[K, V] { return s.changed }

// Deleted returns the objects to remove, in no particular order.
func (s *Store[K, V]) Deleted() []Change[K, V] { return s.deleted }

// Applied records that the kernel now holds what the round wants for key: the
// wanted value after a create or update, nothing after a delete.
func (s *Store[K, V]) Applied(key K) {
	it := s.items[key]
	if it == nil {
		return
	}
	if !it.set {
		delete(s.items, key)
		return
	}
	it.applied, it.has = it.want, true
}

// Forget drops key from the store as if the kernel did not hold it, for an
// object that disappeared from the kernel behind the sink's back.
func (s *Store[K, V]) Forget(key K) {
	if it := s.items[key]; it != nil {
		var zero V
		it.applied, it.has = zero, false
		if !it.set {
			delete(s.items, key)
		}
	}
}

// AppliedValue returns the value the kernel is known to hold for key.
func (s *Store[K, V]) AppliedValue(key K) (V, bool) {
	it := s.items[key]
	if it == nil || !it.has {
		var zero V
		return zero, false
	}
	return it.applied, true
}

// Len returns the number of objects the store tracks (wanted or applied).
func (s *Store[K, V]) Len() int { return len(s.items) }

// Each calls f for every object the kernel is known to hold.
func (s *Store[K, V]) Each(f func(key K, applied V)) {
	for k, it := range s.items {
		if it.has {
			f(k, it.applied)
		}
	}
}
