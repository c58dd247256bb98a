package diffstore

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type op struct {
	key   string
	value int
}

// round runs one round that sets ops, applies only the keys not in fail,
// and returns what it reported.
func round(s *Store[string, int], set []op, fail map[string]bool) (changed, deleted []string) {
	s.Reset()
	for _, o := range set {
		s.Set(o.key, o.value)
	}
	s.Done()
	for _, c := range s.Changed() {
		changed = append(changed, c.Key)
		if !fail[c.Key] {
			s.Applied(c.Key)
		}
	}
	for _, c := range s.Deleted() {
		deleted = append(deleted, c.Key)
		if !fail[c.Key] {
			s.Applied(c.Key)
		}
	}
	sort.Strings(changed)
	sort.Strings(deleted)
	return changed, deleted
}

func TestRounds(t *testing.T) {
	type step struct {
		set           []op
		fail          map[string]bool
		changed, dels []string
	}
	tests := []struct {
		name  string
		adopt []op
		steps []step
	}{{
		name: "create, no change, update, delete",
		steps: []step{
			{set: []op{{"a", 1}, {"b", 2}}, changed: []string{"a", "b"}},
			{set: []op{{"a", 1}, {"b", 2}}},
			{set: []op{{"a", 1}, {"b", 3}}, changed: []string{"b"}},
			{set: []op{{"b", 3}}, dels: []string{"a"}},
			{set: []op{{"b", 3}}},
		},
	}, {
		name: "a failed create is retried until it succeeds",
		steps: []step{
			{set: []op{{"a", 1}, {"b", 1}}, fail: map[string]bool{"a": true}, changed: []string{"a", "b"}},
			{set: []op{{"a", 1}, {"b", 1}}, fail: map[string]bool{"a": true}, changed: []string{"a"}},
			{set: []op{{"a", 1}, {"b", 1}}, changed: []string{"a"}},
			{set: []op{{"a", 1}, {"b", 1}}},
		},
	}, {
		name: "a failed delete is retried",
		steps: []step{
			{set: []op{{"a", 1}}, changed: []string{"a"}},
			{fail: map[string]bool{"a": true}, dels: []string{"a"}},
			{dels: []string{"a"}},
			{},
		},
	}, {
		name: "a failed create no longer wanted is dropped, not deleted",
		steps: []step{
			{set: []op{{"a", 1}}, fail: map[string]bool{"a": true}, changed: []string{"a"}},
			{},
			{},
		},
	}, {
		name:  "adopted state that matches makes no change",
		adopt: []op{{"a", 1}, {"b", 2}, {"stale", 9}},
		steps: []step{
			{set: []op{{"a", 1}, {"b", 5}}, changed: []string{"b"}, dels: []string{"stale"}},
			{set: []op{{"a", 1}, {"b", 5}}},
		},
	}, {
		name: "setting a key twice keeps the last value",
		steps: []step{
			{set: []op{{"a", 1}, {"a", 2}}, changed: []string{"a"}},
			{set: []op{{"a", 2}}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewComparable[string, int]()
			for _, o := range tt.adopt {
				s.Adopt(o.key, o.value)
			}
			for i, st := range tt.steps {
				changed, dels := round(s, st.set, st.fail)
				if diff := cmp.Diff(st.changed, changed); diff != "" {
					t.Errorf("round %d changed (-want +got):\n%s", i, diff)
				}
				if diff := cmp.Diff(st.dels, dels); diff != "" {
					t.Errorf("round %d deleted (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestChangeCarriesOldValue(t *testing.T) {
	s := NewComparable[string, int]()
	s.Adopt("a", 1)
	s.Reset()
	s.Set("a", 2)
	s.Set("b", 3)
	s.Done()
	got := map[string]Change[string, int]{}
	for _, c := range s.Changed() {
		got[c.Key] = c
	}
	want := map[string]Change[string, int]{
		"a": {Key: "a", Value: 2, Old: 1, HasOld: true},
		"b": {Key: "b", Value: 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if v, ok := s.Get("a"); !ok || v != 2 {
		t.Errorf("Get(a) = %d, %v; want 2, true", v, ok)
	}
	if v, ok := s.AppliedValue("a"); !ok || v != 1 {
		t.Errorf("AppliedValue(a) = %d, %v before Applied; want 1, true", v, ok)
	}
}

func TestForget(t *testing.T) {
	s := NewComparable[string, int]()
	round(s, []op{{"a", 1}}, nil)
	// Someone deleted "a" from the kernel; a resync notices and forgets it.
	s.Forget("a")
	changed, _ := round(s, []op{{"a", 1}}, nil)
	if diff := cmp.Diff([]string{"a"}, changed); diff != "" {
		t.Errorf("after Forget (-want +got):\n%s", diff)
	}
}

func TestCustomEquality(t *testing.T) {
	type v struct {
		weight int
		stats  int // not part of equality
	}
	s := New[string](func(a, b v) bool { return a.weight == b.weight })
	s.Adopt("a", v{1, 100})
	s.Reset()
	s.Set("a", v{1, 0})
	s.Done()
	if n := len(s.Changed()); n != 0 {
		t.Errorf("%d changes for a value equal by the store's function", n)
	}
}

func BenchmarkNoChangeRound(b *testing.B) {
	const n = 110_000 // 10,000 services x (1 + 10 destinations)
	inOrder := make([]int, n)
	for i := range inOrder {
		inOrder[i] = i
	}
	shuffled := slices.Clone(inOrder)
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	// "same order" is what a sink's rounds look like (Set hits the
	// prediction); "new order every round" is the worst case, where every
	// Set looks its key up.
	for _, tc := range []struct {
		name   string
		orders [][]int
	}{{"same order", [][]int{inOrder}}, {"new order every round", [][]int{inOrder, shuffled}}} {
		// The first implementation (a map of pointers, model_test.go) as
		// the baseline, in the same run.
		for _, impl := range []struct {
			name string
			new  func() roundStore
		}{{"slab", func() roundStore { return NewComparable[int, int]() }}, {"map-baseline", func() roundStore { return newRef() }}} {
			b.Run(tc.name+"/"+impl.name, func(b *testing.B) {
				s := impl.new()
				for i := 0; i < n; i++ {
					s.Adopt(i, i)
				}
				b.ReportAllocs()
				round := 0
				for b.Loop() {
					s.Reset()
					for _, k := range tc.orders[round%len(tc.orders)] {
						s.Set(k, k)
					}
					s.Done()
					if len(s.Changed())+len(s.Deleted()) != 0 {
						b.Fatal("unexpected changes")
					}
					round++
				}
			})
		}
	}
}

// roundStore is what BenchmarkNoChangeRound uses of a store.
type roundStore interface {
	Adopt(k, v int)
	Reset()
	Set(k, v int)
	Done()
	Changed() []Change[int, int]
	Deleted() []Change[int, int]
}
