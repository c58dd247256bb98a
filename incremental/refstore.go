package incremental

import (
	"github.com/proxysinks/proxysinks/dataplane/diffstore"
)

// refStore keeps, for every kernel object of one kind, the services that
// want it (with the value each wants and how many times its rendering
// emitted it) and the value the kernel is known to hold. An object is
// wanted while at least one service wants it: deleting one service never
// removes what another still needs. When services want different values
// (two services with the same virtual server and different schedulers),
// the service with the greatest key wins, as in the full-state sink, whose
// rounds render services in key order and keep the last value set.
//
// Objects whose wanted and applied values may differ are dirty; changes
// lists them, and applied records what the kernel took.
//
// Objects live in a slab indexed by a map from key to slot, so that only
// adding an object hashes its key: the dirty list, the change lists and
// recording their outcome go by slot. With keys and values without
// pointers (the compact keys of dataplane/objects), neither the map nor
// the slab is scanned by the garbage collector.
type refStore[K comparable, V comparable] struct {
	index map[K]int32
	slab  []ref[K, V]
	free  []int32
	// more holds the services beyond the first that want an object:
	// rarely any.
	more  map[K][]contrib[V]
	dirty []int32
	// The slots of the last changes' lists, for applied.
	changedAt, deletedAt []int32
	// greater reports whether service a's key sorts after service b's.
	greater func(a, b uint32) bool
	// bulk is set while a rendering fills an empty store (a first
	// sync): add takes a new slot without looking the key up, and
	// resolve indexes the new slots at the end, merging duplicates.
	bulk    bool
	pending []int32
}

type ref[K comparable, V any] struct {
	key K
	// first is the first service wanting the object (n == 0: none);
	// others, when set, says more (in refStore.more) want it too.
	first   contrib[V]
	others  bool
	applied V
	has     bool // the kernel holds applied
	dirty   bool
	live    bool // the slot holds an object
}

type contrib[V any] struct {
	svc uint32 // the service's number
	n   uint32 // times its rendering emitted the object
	v   V
}

func newRefStore[K comparable, V comparable](greater func(a, b uint32) bool) *refStore[K, V] {
	return &refStore[K, V]{index: map[K]int32{}, more: map[K][]contrib[V]{}, greater: greater}
}

// reserve makes room for n objects in an empty store. A store emptied by
// removals starts afresh: its free slots pointed into the old slab.
func (s *refStore[K, V]) reserve(n int) {
	if len(s.index) == 0 {
		s.index = make(map[K]int32, n)
		s.slab = make([]ref[K, V], 0, n)
		s.free = nil
		s.dirty = make([]int32, 0, n)
		s.pending = make([]int32, 0, n)
	}
}

// slot returns k's slot, adding the object when it is new.
func (s *refStore[K, V]) slot(k K) int32 {
	if i, ok := s.index[k]; ok {
		return i
	}
	i := s.alloc(k)
	s.index[k] = i
	return i
}

// alloc returns a free slot holding a new object with key k, not indexed.
func (s *refStore[K, V]) alloc(k K) int32 {
	var i int32
	if n := len(s.free); n > 0 {
		i = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		i = int32(len(s.slab))
		s.slab = append(s.slab, ref[K, V]{})
	}
	s.slab[i] = ref[K, V]{key: k, live: true}
	return i
}

// begin starts a rendering: when the store is empty, adds go in bulk until
// resolve.
func (s *refStore[K, V]) begin() { s.bulk = len(s.index) == 0 }

// resolve ends a rendering begun by begin: it indexes the objects added in
// bulk, one hash each, and when some were added more than once (an object
// two services want, or one rendering emitted twice), merges each
// duplicate into the last slot of its key and calls moved with the slot
// that went and the one that holds its object now.
func (s *refStore[K, V]) resolve(moved func(from, to int32)) {
	s.bulk = false
	if len(s.pending) == 0 {
		return
	}
	before := len(s.index)
	for _, i := range s.pending {
		s.index[s.slab[i].key] = i
	}
	if len(s.index)-before < len(s.pending) {
		// Backwards, so that a service's value is that of its last
		// emission, as add keeps it.
		for p := len(s.pending) - 1; p >= 0; p-- {
			i := s.pending[p]
			r := &s.slab[i]
			j := s.index[r.key]
			if j == i {
				continue
			}
			c := r.first
			s.slab[i] = ref[K, V]{}
			s.free = append(s.free, i)
			s.merge(j, c)
			moved(i, j)
		}
	}
	s.pending = s.pending[:0]
}

// merge adds c, an earlier emission than those the object in slot j has
// of c's service, to that object's services.
func (s *refStore[K, V]) merge(j int32, c contrib[V]) {
	r := &s.slab[j]
	if r.first.svc == c.svc {
		r.first.n += c.n
		return
	}
	more := s.more[r.key]
	for m := range more {
		if more[m].svc == c.svc {
			more[m].n += c.n
			return
		}
	}
	s.more[r.key] = append(more, c)
	r.others = true
}

// drop removes the object in slot i.
func (s *refStore[K, V]) drop(i int32) {
	delete(s.index, s.slab[i].key)
	s.slab[i] = ref[K, V]{}
	s.free = append(s.free, i)
}

func (s *refStore[K, V]) mark(i int32) {
	if r := &s.slab[i]; !r.dirty {
		r.dirty = true
		s.dirty = append(s.dirty, i)
	}
}

// add records that service svc wants k with value v, and returns k's slot.
func (s *refStore[K, V]) add(k K, svc uint32, v V) int32 {
	if s.bulk {
		i := s.alloc(k)
		s.slab[i].first = contrib[V]{svc, 1, v}
		s.pending = append(s.pending, i)
		s.mark(i)
		return i
	}
	i := s.slot(k)
	r := &s.slab[i]
	switch {
	case r.first.n == 0:
		r.first = contrib[V]{svc, 1, v}
	case r.first.svc == svc:
		r.first.n++
		r.first.v = v
	default:
		more := s.more[k]
		found := false
		for j := range more {
			if more[j].svc == svc {
				more[j].n++
				more[j].v = v
				found = true
				break
			}
		}
		if !found {
			s.more[k] = append(more, contrib[V]{svc, 1, v})
			r.others = true
		}
	}
	s.mark(i)
	return i
}

// remove takes back one emission by service svc of the object in slot i
// (which add returned).
func (s *refStore[K, V]) remove(i int32, svc uint32) {
	r := &s.slab[i]
	k := r.key
	var more []contrib[V]
	if r.others {
		more = s.more[k]
	}
	if r.first.n > 0 && r.first.svc == svc {
		r.first.n--
		if r.first.n == 0 {
			r.first = contrib[V]{}
			if len(more) > 0 {
				r.first = more[len(more)-1]
				more = more[:len(more)-1]
			}
		}
	} else {
		for j := range more {
			if more[j].svc == svc {
				more[j].n--
				if more[j].n == 0 {
					more = append(more[:j], more[j+1:]...)
				}
				break
			}
		}
	}
	if r.others {
		if len(more) == 0 {
			delete(s.more, k)
			r.others = false
		} else {
			s.more[k] = more
		}
	}
	s.mark(i)
}

// want returns the value the services want for the object, if any.
func (s *refStore[K, V]) want(r *ref[K, V]) (V, bool) {
	if r.first.n == 0 {
		var zero V
		return zero, false
	}
	best := r.first
	if !r.others {
		return best.v, true
	}
	for _, c := range s.more[r.key] {
		if s.greater(c.svc, best.svc) {
			best = c
		}
	}
	return best.v, true
}

// Changes appends the dirty objects to write to changed and deleted, and
// forgets those that need nothing. The dirty list is emptied: applied
// marks again what failed.
func (s *refStore[K, V]) Changes(changed, deleted []diffstore.Change[K, V]) ([]diffstore.Change[K, V], []diffstore.Change[K, V]) {
	// Most dirty objects are usually written one way or the other.
	changed, deleted = room(changed, len(s.dirty)), room(deleted, 0)
	s.changedAt, s.deletedAt = room(s.changedAt, len(s.dirty)), room(s.deletedAt, 0)
	for _, i := range s.dirty {
		r := &s.slab[i]
		if !r.live || !r.dirty {
			continue
		}
		r.dirty = false
		v, wanted := s.want(r)
		switch {
		case wanted && (!r.has || v != r.applied):
			changed = append(changed, diffstore.Change[K, V]{Key: r.key, Value: v, Old: r.applied, HasOld: r.has})
			s.changedAt = append(s.changedAt, i)
		case !wanted && r.has:
			deleted = append(deleted, diffstore.Change[K, V]{Key: r.key, Old: r.applied, HasOld: true})
			s.deletedAt = append(s.deletedAt, i)
		case !wanted:
			s.drop(i)
		}
	}
	if cap(s.dirty) > 4*len(s.dirty)+1024 {
		s.dirty = nil // let a large initial list go
	} else {
		s.dirty = s.dirty[:0]
	}
	return changed, deleted
}

// room returns l emptied with room for n elements; a list much longer than
// needed (after an initial sync) is let go.
func room[T any](l []T, n int) []T {
	if cap(l) < n || cap(l) > 2*n+1024 {
		return make([]T, 0, n)
	}
	return l[:0]
}

// Applied records the outcome of writing changed and deleted, the lists
// the last changes returned: the kernel now holds the wanted value, or
// nothing, except for the objects failed reports, which stay dirty and
// are written again at the next sync.
func (s *refStore[K, V]) Applied(changed, deleted []diffstore.Change[K, V], failed func(K) bool) {
	for j, c := range changed {
		i := s.changedAt[j]
		if failed != nil && failed(c.Key) {
			s.mark(i)
			continue
		}
		r := &s.slab[i]
		r.applied, r.has = c.Value, true
	}
	for j, c := range deleted {
		i := s.deletedAt[j]
		if failed != nil && failed(c.Key) {
			s.mark(i)
			continue
		}
		r := &s.slab[i]
		var zero V
		r.applied, r.has = zero, false
		if r.first.n == 0 && !r.dirty {
			s.drop(i)
		}
	}
}

// Each calls f for every object the kernel is known to hold
// (objects.Store).
func (s *refStore[K, V]) Each(f func(K, V)) {
	for i := range s.slab {
		if r := &s.slab[i]; r.live && r.has {
			f(r.key, r.applied)
		}
	}
}

// Forget records that the kernel lost k (objects.Store).
func (s *refStore[K, V]) Forget(k K) {
	i, ok := s.index[k]
	if !ok {
		return
	}
	r := &s.slab[i]
	var zero V
	r.applied, r.has = zero, false
	s.mark(i)
}

// Adopt records that the kernel holds v for k (objects.Store).
func (s *refStore[K, V]) Adopt(k K, v V) {
	i := s.slot(k)
	r := &s.slab[i]
	if r.has && r.applied == v {
		return
	}
	r.applied, r.has = v, true
	s.mark(i)
}

// Len returns the number of objects tracked.
func (s *refStore[K, V]) Len() int { return len(s.index) }
