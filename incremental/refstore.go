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
type refStore[K comparable, V comparable] struct {
	// objs holds no pointers (for comparable keys and values without
	// any), so the garbage collector does not scan it.
	objs map[K]ref[V]
	// more holds the services beyond the first that want an object:
	// rarely any.
	more  map[K][]contrib[V]
	dirty []K
	// greater reports whether service a's key sorts after service b's.
	greater func(a, b uint32) bool
}

type ref[V any] struct {
	// first is the first service wanting the object (n == 0: none);
	// others, when set, says more (in refStore.more) want it too.
	first   contrib[V]
	others  bool
	applied V
	has     bool // the kernel holds applied
	dirty   bool
}

type contrib[V any] struct {
	svc uint32 // the service's number
	n   uint32 // times its rendering emitted the object
	v   V
}

func newRefStore[K comparable, V comparable](greater func(a, b uint32) bool) *refStore[K, V] {
	return &refStore[K, V]{objs: map[K]ref[V]{}, more: map[K][]contrib[V]{}, greater: greater}
}

func (s *refStore[K, V]) mark(k K, r *ref[V]) {
	if !r.dirty {
		r.dirty = true
		s.dirty = append(s.dirty, k)
	}
}

// add records that service svc wants k with value v.
func (s *refStore[K, V]) add(k K, svc uint32, v V) {
	r := s.objs[k]
	switch {
	case r.first.n == 0:
		r.first = contrib[V]{svc, 1, v}
	case r.first.svc == svc:
		r.first.n++
		r.first.v = v
	default:
		more := s.more[k]
		found := false
		for i := range more {
			if more[i].svc == svc {
				more[i].n++
				more[i].v = v
				found = true
				break
			}
		}
		if !found {
			s.more[k] = append(more, contrib[V]{svc, 1, v})
			r.others = true
		}
	}
	s.mark(k, &r)
	s.objs[k] = r
}

// remove takes back one emission of k by service svc.
func (s *refStore[K, V]) remove(k K, svc uint32) {
	r, ok := s.objs[k]
	if !ok {
		return
	}
	more := s.more[k]
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
		for i := range more {
			if more[i].svc == svc {
				more[i].n--
				if more[i].n == 0 {
					more = append(more[:i], more[i+1:]...)
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
	s.mark(k, &r)
	s.objs[k] = r
}

// want returns the value the services want for the object, if any.
func (s *refStore[K, V]) want(k K, r *ref[V]) (V, bool) {
	if r.first.n == 0 {
		var zero V
		return zero, false
	}
	best := r.first
	if !r.others {
		return best.v, true
	}
	for _, c := range s.more[k] {
		if s.greater(c.svc, best.svc) {
			best = c
		}
	}
	return best.v, true
}

// changes appends the dirty objects to write to changed and deleted, and
// forgets those that need nothing. The dirty list is emptied: applied
// marks again what failed.
func (s *refStore[K, V]) changes(changed, deleted []diffstore.Change[K, V]) ([]diffstore.Change[K, V], []diffstore.Change[K, V]) {
	// Most dirty objects are usually written one way or the other.
	changed, deleted = room(changed, len(s.dirty)), room(deleted, 0)
	for _, k := range s.dirty {
		r, ok := s.objs[k]
		if !ok || !r.dirty {
			continue
		}
		r.dirty = false
		v, wanted := s.want(k, &r)
		switch {
		case wanted && (!r.has || v != r.applied):
			changed = append(changed, diffstore.Change[K, V]{Key: k, Value: v, Old: r.applied, HasOld: r.has})
		case !wanted && r.has:
			deleted = append(deleted, diffstore.Change[K, V]{Key: k, Old: r.applied, HasOld: true})
		case !wanted:
			delete(s.objs, k)
			continue
		}
		s.objs[k] = r
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

// applied records the outcome of writing changed and deleted: the kernel
// now holds the wanted value, or nothing, except for the objects failed
// reports, which stay dirty and are written again at the next sync.
func (s *refStore[K, V]) applied(changed, deleted []diffstore.Change[K, V], failed func(K) bool) {
	for _, c := range changed {
		r := s.objs[c.Key]
		if failed != nil && failed(c.Key) {
			s.mark(c.Key, &r)
		} else {
			r.applied, r.has = c.Value, true
		}
		s.objs[c.Key] = r
	}
	for _, c := range deleted {
		r := s.objs[c.Key]
		if failed != nil && failed(c.Key) {
			s.mark(c.Key, &r)
			s.objs[c.Key] = r
			continue
		}
		var zero V
		r.applied, r.has = zero, false
		if r.first.n == 0 && !r.dirty {
			delete(s.objs, c.Key)
			continue
		}
		s.objs[c.Key] = r
	}
}

// Each calls f for every object the kernel is known to hold
// (objects.Store).
func (s *refStore[K, V]) Each(f func(K, V)) {
	for k, r := range s.objs {
		if r.has {
			f(k, r.applied)
		}
	}
}

// Forget records that the kernel lost k (objects.Store).
func (s *refStore[K, V]) Forget(k K) {
	r, ok := s.objs[k]
	if !ok {
		return
	}
	var zero V
	r.applied, r.has = zero, false
	s.mark(k, &r)
	s.objs[k] = r
}

// Adopt records that the kernel holds v for k (objects.Store).
func (s *refStore[K, V]) Adopt(k K, v V) {
	r := s.objs[k]
	if r.has && r.applied == v {
		return
	}
	r.applied, r.has = v, true
	s.mark(k, &r)
	s.objs[k] = r
}

// len returns the number of objects tracked.
func (s *refStore[K, V]) len() int { return len(s.objs) }
