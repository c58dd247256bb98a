// Package diffstore keeps, for every kernel object a sink manages, the value
// the cluster wants and the value the kernel was last known to hold, and
// reports the difference after each round.
//
// A round is Reset, then Set for every object the current state needs, then
// Done. Changed lists the objects that are new or whose value differs from
// the applied one; Deleted lists the applied objects the round did not set.
// The caller writes them to the kernel and calls Applied for each that
// succeeded (or AppliedAll for all but the failed ones). An object whose
// write failed stays pending and is reported again after the next round, so
// nothing is forgotten. Adopt records what the kernel already holds at
// start-up, so a restart with an unchanged cluster reports nothing.
//
// Objects live in a slab of fixed-size pages, indexed by a map from key to
// slot:
// with keys and values that hold no pointers (the fullstate Manager's
// compact keys), neither the map nor the slab is scanned by the garbage
// collector, a new object costs no allocation of its own, and a round walks
// the slab in memory order.
//
// A round usually sets the same objects in the same order as the last one
// (a sink renders a snapshot in a stable order), so Set first checks the
// object the last round set at the same point, and only on a miss looks the
// key up in the map, then carries on from where that object was in the last
// round. New objects are added to the map in bulk when the round ends (or
// when a method needs the map), into a map sized for them. A round that
// changes nothing hashes nothing.
package diffstore

// Store is a diffstore of values V keyed by K. Values are compared with the
// equality function given to New (== for NewComparable). A Store is not safe
// for concurrent use.
type Store[K comparable, V any] struct {
	equal func(a, b V) bool
	index map[K]int32 // every object but those pending
	// The slab: slot i is pages[i/pageSize][i%pageSize]; slots below n
	// have been used. Pages are never moved, so growing copies nothing.
	pages []*[pageSize]item[K, V]
	n     int32
	free  []int32 // unused slots below n
	// pending are the slots of objects new in this round, not yet in index.
	pending []int32
	// prev and cur are the slots Set in the last round and in this one, in
	// order; p is where in prev the next Set is expected.
	prev, cur []int32
	p         int
	// misses counts the Sets of known keys since the last that hit the
	// prediction: when rounds do not repeat an order, checking it only
	// costs a cache miss, so after a few misses in a row only one Set in
	// 64 checks it.
	misses  int
	lookups int // Sets that looked their key up (tests)
	// The last Done's lists, and the slots their objects were in.
	changed, deleted     []Change[K, V]
	changedAt, deletedAt []int32
}

// pageSize is the number of slots in a page of the slab.
const pageSize = 1024

type item[K comparable, V any] struct {
	key     K
	want    V
	applied V
	// pos is the object's position in cur when set in this round, else
	// in prev when set in the last round, else -1.
	pos   int32
	live  bool // the slot holds an object (in index, or pending)
	fresh bool // pending
	set   bool // Set in the current round
	has   bool // applied holds the kernel's value
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
	return &Store[K, V]{equal: equal, index: map[K]int32{}}
}

// NewComparable returns an empty store that compares values with ==.
func NewComparable[K, V comparable]() *Store[K, V] {
	return New[K](func(a, b V) bool { return a == b })
}

// at returns slot i.
func (s *Store[K, V]) at(i int32) *item[K, V] { return &s.pages[i/pageSize][i%pageSize] }

// each calls f for every used slot, in slot order.
func (s *Store[K, V]) each(f func(i int32, it *item[K, V])) {
	for pi, pg := range s.pages {
		base := int32(pi) * pageSize
		n := min(s.n-base, pageSize)
		for j := range n {
			f(base+j, &pg[j])
		}
	}
}

// alloc returns a free slot holding a new object with key.
func (s *Store[K, V]) alloc(key K) int32 {
	var i int32
	if n := len(s.free); n > 0 {
		i = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		i = s.n
		if int(i/pageSize) == len(s.pages) {
			s.pages = append(s.pages, new([pageSize]item[K, V]))
		}
		s.n++
	}
	*s.at(i) = item[K, V]{key: key, pos: -1, live: true}
	return i
}

// slot returns the object's slot, adding the object when it is new.
func (s *Store[K, V]) slot(key K) *item[K, V] {
	s.resolve()
	if i, ok := s.index[key]; ok {
		return s.at(i)
	}
	i := s.alloc(key)
	s.index[key] = i
	return s.at(i)
}

// resolve adds the pending objects to the index. An object set more than
// once in the round while new is pending more than once: the last keeps
// the slot (it holds the last value) and the others are dropped.
func (s *Store[K, V]) resolve() {
	if len(s.pending) == 0 {
		return
	}
	if len(s.index) == 0 {
		s.index = make(map[K]int32, len(s.pending))
	}
	before := len(s.index)
	for _, i := range s.pending {
		it := s.at(i)
		it.fresh = false
		s.index[it.key] = i
	}
	if len(s.index)-before < len(s.pending) {
		for _, i := range s.pending {
			it := s.at(i)
			if j := s.index[it.key]; j != i {
				// An earlier duplicate of j: the round's order now
				// names j there.
				if it.pos >= 0 && int(it.pos) < len(s.cur) {
					s.cur[it.pos] = j
				}
				*it = item[K, V]{}
				s.free = append(s.free, i)
			}
		}
	}
	s.pending = s.pending[:0]
}

// remove drops the object in slot i.
func (s *Store[K, V]) remove(i int32) {
	it := s.at(i)
	delete(s.index, it.key)
	*it = item[K, V]{} // drop what the values point to
	s.free = append(s.free, i)
}

// Reset starts a round: every object is unset until Set again.
func (s *Store[K, V]) Reset() {
	s.resolve()
	s.each(func(i int32, it *item[K, V]) {
		if !it.live {
			return
		}
		// Never applied and not wanted by the last round: forget it.
		if !it.has && !it.set {
			s.remove(i)
			return
		}
		if !it.set {
			it.pos = -1
		}
		it.set = false
	})
	s.prev, s.cur, s.p, s.misses = s.cur, s.prev[:0], 0, 0
	if cap(s.cur) < len(s.prev) {
		// Room for the last round's objects and some more, so that a
		// round with a few new objects does not grow it.
		s.cur = make([]int32, 0, len(s.prev)+len(s.prev)/8+64)
	}
	s.changed, s.deleted = s.changed[:0], s.deleted[:0]
	s.changedAt, s.deletedAt = s.changedAt[:0], s.deletedAt[:0]
}

// Set records that the current round wants key to hold value. Setting a key
// twice in a round keeps the last value.
func (s *Store[K, V]) Set(key K, value V) {
	seq := int32(len(s.cur))
	if s.p < len(s.prev) && (s.misses < 8 || s.misses%64 == 0) {
		// The object the last round set here.
		i := s.prev[s.p]
		if it := s.at(i); it.live && !it.fresh && it.key == key {
			s.p++
			s.misses = 0
			it.want, it.set, it.pos = value, true, seq
			s.cur = append(s.cur, i)
			return
		}
	}
	s.lookups++
	i, ok := s.index[key]
	if ok {
		s.misses++ // (a new key is no miss: the prediction still holds)
		it := s.at(i)
		if !it.set && it.pos >= 0 {
			s.p = int(it.pos) + 1 // carry on from there
		}
		it.want, it.set, it.pos = value, true, seq
		s.cur = append(s.cur, i)
		return
	}
	i = s.alloc(key)
	it := s.at(i)
	it.want, it.set, it.pos, it.fresh = value, true, seq, true
	s.pending = append(s.pending, i)
	s.cur = append(s.cur, i)
}

// Get returns the value the current round set for key.
func (s *Store[K, V]) Get(key K) (V, bool) {
	s.resolve()
	i, ok := s.index[key]
	if !ok || !s.at(i).set {
		var zero V
		return zero, false
	}
	return s.at(i).want, true
}

// Adopt records that the kernel holds value for key, as found at start-up.
func (s *Store[K, V]) Adopt(key K, value V) {
	it := s.slot(key)
	it.applied, it.has = value, true
}

// Done ends the round and computes Changed and Deleted.
func (s *Store[K, V]) Done() {
	s.resolve()
	nc, nd := 0, 0
	s.each(func(_ int32, it *item[K, V]) {
		switch {
		case !it.live:
		case it.set && (!it.has || !s.equal(it.want, it.applied)):
			nc++
		case !it.set && it.has:
			nd++
		}
	})
	s.changed, s.changedAt = grow(s.changed, nc), grow(s.changedAt, nc)
	s.deleted, s.deletedAt = grow(s.deleted, nd), grow(s.deletedAt, nd)
	if nc+nd == 0 {
		return
	}
	s.each(func(i int32, it *item[K, V]) {
		switch {
		case !it.live:
		case it.set && (!it.has || !s.equal(it.want, it.applied)):
			s.changed = append(s.changed, Change[K, V]{Key: it.key, Value: it.want, Old: it.applied, HasOld: it.has})
			s.changedAt = append(s.changedAt, i)
		case !it.set && it.has:
			s.deleted = append(s.deleted, Change[K, V]{Key: it.key, Old: it.applied, HasOld: true})
			s.deletedAt = append(s.deletedAt, i)
		}
	})
}

// grow returns l emptied, with room for n elements; a list much longer
// than needed (after an initial sync) is let go.
func grow[T any](l []T, n int) []T {
	if cap(l) < n || cap(l) > 2*n+1024 {
		return make([]T, 0, n)
	}
	return l[:0]
}

// Changed returns the objects to create or update, in no particular order.
func (s *Store[K, V]) Changed() []Change[K, V] { return s.changed }

// Deleted returns the objects to remove, in no particular order.
func (s *Store[K, V]) Deleted() []Change[K, V] { return s.deleted }

// Applied records that the kernel now holds what the round wants for key: the
// wanted value after a create or update, nothing after a delete.
func (s *Store[K, V]) Applied(key K) {
	s.resolve()
	if i, ok := s.index[key]; ok {
		s.appliedAt(i)
	}
}

func (s *Store[K, V]) appliedAt(i int32) {
	it := s.at(i)
	if !it.set {
		s.remove(i)
		return
	}
	it.applied, it.has = it.want, true
}

// AppliedAll calls Applied for every object of the last Done's Changed and
// Deleted lists for which failed (when not nil) returns false. It finds the
// objects by their slots instead of their keys.
func (s *Store[K, V]) AppliedAll(failed func(key K) bool) {
	s.resolve()
	apply := func(cs []Change[K, V], at []int32) {
		for j := range cs {
			key := cs[j].Key
			if failed != nil && failed(key) {
				continue
			}
			// The slot still holds the object unless Applied or Forget
			// removed it since Done; then look it up by its key.
			if i := at[j]; s.at(i).live && s.at(i).key == key {
				s.appliedAt(i)
			} else {
				s.Applied(key)
			}
		}
	}
	apply(s.changed, s.changedAt)
	apply(s.deleted, s.deletedAt)
}

// Forget drops key from the store as if the kernel did not hold it, for an
// object that disappeared from the kernel behind the sink's back.
func (s *Store[K, V]) Forget(key K) {
	s.resolve()
	i, ok := s.index[key]
	if !ok {
		return
	}
	it := s.at(i)
	var zero V
	it.applied, it.has = zero, false
	if !it.set {
		s.remove(i)
	}
}

// AppliedValue returns the value the kernel is known to hold for key.
func (s *Store[K, V]) AppliedValue(key K) (V, bool) {
	s.resolve()
	i, ok := s.index[key]
	if !ok || !s.at(i).has {
		var zero V
		return zero, false
	}
	return s.at(i).applied, true
}

// Len returns the number of objects the store tracks (wanted or applied).
func (s *Store[K, V]) Len() int {
	s.resolve()
	return len(s.index)
}

// Each calls f for every object the kernel is known to hold. f must not
// change the store.
func (s *Store[K, V]) Each(f func(key K, applied V)) {
	s.resolve()
	s.each(func(_ int32, it *item[K, V]) {
		if it.live && it.has {
			f(it.key, it.applied)
		}
	})
}
