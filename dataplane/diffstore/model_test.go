package diffstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Store is a diffstore of values V keyed by K. Values are compared with the
// equality function given to New (== for NewComparable). A Store is not safe
// for concurrent use.
type refStore[K comparable, V any] struct {
	equal   func(a, b V) bool
	items   map[K]*refItem[V]
	changed []Change[K, V]
	deleted []Change[K, V]
}

type refItem[V any] struct {
	want    V
	applied V
	set     bool // Set in the current round
	has     bool // applied holds the kernel's value
}

// Reset starts a round: every object is unset until Set again.
func (s *refStore[K, V]) Reset() {
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
func (s *refStore[K, V]) Set(key K, value V) {
	it := s.items[key]
	if it == nil {
		it = &refItem[V]{}
		s.items[key] = it
	}
	it.want, it.set = value, true
}

// Get returns the value the current round set for key.
func (s *refStore[K, V]) Get(key K) (V, bool) {
	it := s.items[key]
	if it == nil || !it.set {
		var zero V
		return zero, false
	}
	return it.want, true
}

// Adopt records that the kernel holds value for key, as found at start-up.
func (s *refStore[K, V]) Adopt(key K, value V) {
	it := s.items[key]
	if it == nil {
		it = &refItem[V]{}
		s.items[key] = it
	}
	it.applied, it.has = value, true
}

// Done ends the round and computes Changed and Deleted.
func (s *refStore[K, V]) Done() {
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
func (s *refStore[K, V]) Changed() []Change[K, V] { return s.changed }

// Deleted returns the objects to remove, in no particular order.
func (s *refStore[K, V]) Deleted() []Change[K, V] { return s.deleted }

// Applied records that the kernel now holds what the round wants for key: the
// wanted value after a create or update, nothing after a delete.
func (s *refStore[K, V]) Applied(key K) {
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
func (s *refStore[K, V]) Forget(key K) {
	if it := s.items[key]; it != nil {
		var zero V
		it.applied, it.has = zero, false
		if !it.set {
			delete(s.items, key)
		}
	}
}

// AppliedValue returns the value the kernel is known to hold for key.
func (s *refStore[K, V]) AppliedValue(key K) (V, bool) {
	it := s.items[key]
	if it == nil || !it.has {
		var zero V
		return zero, false
	}
	return it.applied, true
}

// Len returns the number of objects the store tracks (wanted or applied).
func (s *refStore[K, V]) Len() int { return len(s.items) }

// Each calls f for every object the kernel is known to hold.
func (s *refStore[K, V]) Each(f func(key K, applied V)) {
	for k, it := range s.items {
		if it.has {
			f(k, it.applied)
		}
	}
}

func newRef() *refStore[int, int] {
	return &refStore[int, int]{equal: func(a, b int) bool { return a == b }, items: map[int]*refItem[int]{}}
}

func sortedChanges(cs []Change[int, int]) []Change[int, int] {
	out := slices.Clone(cs)
	slices.SortFunc(out, func(a, b Change[int, int]) int { return a.Key - b.Key })
	return out
}

func applied[V any](each func(func(int, V))) map[int]V {
	m := map[int]V{}
	each(func(k int, v V) { m[k] = v })
	return m
}

// TestMatchesModel drives Store and the first implementation with the same
// random operations (rounds that mostly repeat the last one's order, with
// new, missing, moved and repeated keys, failed writes, adoption, drift)
// and checks that they report the same after every step.
func TestMatchesModel(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		s, ref := NewComparable[int, int](), newRef()
		var order []int // the keys of the last round, in order
		check := func(step string) {
			t.Helper()
			if diff := cmp.Diff(sortedChanges(ref.Changed()), sortedChanges(s.Changed())); diff != "" {
				t.Fatalf("seed %d, %s: Changed (-model +store):\n%s", seed, step, diff)
			}
			if diff := cmp.Diff(sortedChanges(ref.Deleted()), sortedChanges(s.Deleted())); diff != "" {
				t.Fatalf("seed %d, %s: Deleted (-model +store):\n%s", seed, step, diff)
			}
			if ref.Len() != s.Len() {
				t.Fatalf("seed %d, %s: Len %d, model %d", seed, step, s.Len(), ref.Len())
			}
			if diff := cmp.Diff(applied(ref.Each), applied(s.Each)); diff != "" {
				t.Fatalf("seed %d, %s: Each (-model +store):\n%s", seed, step, diff)
			}
			for k := range 40 {
				gv, gok := s.Get(k)
				rv, rok := ref.Get(k)
				av, aok := s.AppliedValue(k)
				bv, bok := ref.AppliedValue(k)
				if gv != rv || gok != rok || av != bv || aok != bok {
					t.Fatalf("seed %d, %s: key %d: Get %d,%v AppliedValue %d,%v; model %d,%v %d,%v",
						seed, step, k, gv, gok, av, aok, rv, rok, bv, bok)
				}
			}
		}
		for k := range r.IntN(5) {
			v := r.IntN(3)
			s.Adopt(k*3, v)
			ref.Adopt(k*3, v)
		}
		for round := range 12 {
			// This round's keys: the last round's order with edits.
			var keys []int
			for _, k := range order {
				switch r.IntN(12) {
				case 0: // gone
				case 1: // a new key before it
					keys = append(keys, r.IntN(40), k)
				case 2: // set twice
					keys = append(keys, k, k)
				default:
					keys = append(keys, k)
				}
			}
			for range r.IntN(8) {
				keys = slices.Insert(keys, r.IntN(len(keys)+1), r.IntN(40))
			}
			if r.IntN(6) == 0 {
				r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			}
			order = keys
			s.Reset()
			ref.Reset()
			for i, k := range keys {
				v := r.IntN(3)
				s.Set(k, v)
				ref.Set(k, v)
				if r.IntN(50) == 0 {
					// A method that reads the index in the middle of a round.
					check(fmt.Sprintf("round %d, after set %d", round, i))
				}
			}
			s.Done()
			ref.Done()
			check(fmt.Sprintf("round %d done", round))
			fail := map[int]bool{}
			for range r.IntN(3) {
				fail[r.IntN(40)] = true
			}
			if r.IntN(2) == 0 {
				s.AppliedAll(func(k int) bool { return fail[k] })
			} else {
				for _, c := range s.Changed() {
					if !fail[c.Key] {
						s.Applied(c.Key)
					}
				}
				for _, c := range s.Deleted() {
					if !fail[c.Key] {
						s.Applied(c.Key)
					}
				}
			}
			for _, l := range [][]Change[int, int]{slices.Clone(ref.Changed()), slices.Clone(ref.Deleted())} {
				for _, c := range l {
					if !fail[c.Key] {
						ref.Applied(c.Key)
					}
				}
			}
			check(fmt.Sprintf("round %d applied", round))
			if r.IntN(4) == 0 {
				// Drift found by a resync: some objects vanished from the
				// kernel, others appeared.
				for range r.IntN(3) {
					k := r.IntN(40)
					s.Forget(k)
					ref.Forget(k)
				}
				for range r.IntN(3) {
					k, v := r.IntN(40), r.IntN(3)
					s.Adopt(k, v)
					ref.Adopt(k, v)
				}
				s.Done()
				ref.Done()
				check(fmt.Sprintf("round %d resync", round))
			}
		}
	}
}

// TestRepeatedRoundHashesNothing checks the prediction: a round that sets
// the same keys in the same order as the last looks nothing up, and one
// new key, one gone key or a key set twice costs a few lookups, not one
// per key after it.
func TestRepeatedRoundHashesNothing(t *testing.T) {
	keys := make([]int, 1000)
	for i := range keys {
		keys[i] = i * 2
	}
	tests := []struct {
		name       string
		keys       []int
		maxLookups int
	}{
		{"same order", keys, 0},
		{"one new key", slices.Insert(slices.Clone(keys), 500, 1), 2},
		{"one key gone", slices.Delete(slices.Clone(keys), 500, 501), 1},
		{"a key set twice", slices.Insert(slices.Clone(keys), 500, keys[499]), 2},
		{"100 new keys together", slices.Insert(slices.Clone(keys), 500, func() []int {
			var l []int
			for k := range 100 {
				l = append(l, 10_000+k)
			}
			return l
		}()...), 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewComparable[int, int]()
			for range 2 {
				s.Reset()
				for _, k := range keys {
					s.Set(k, 1)
				}
				s.Done()
				s.AppliedAll(nil)
			}
			s.lookups = 0
			s.Reset()
			for _, k := range tt.keys {
				s.Set(k, 1)
			}
			s.Done()
			if s.lookups > tt.maxLookups {
				t.Errorf("%d lookups, want at most %d", s.lookups, tt.maxLookups)
			}
		})
	}
}
