package incremental

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRefStoreBulk: objects added in bulk to an empty store (a first sync)
// are counted and valued as when added one by one, duplicates included:
// the same key from two services (the greatest service's value wins) and
// twice from one service (its last value, wanted until both are taken
// back).
func TestRefStoreBulk(t *testing.T) {
	type add struct {
		key string
		svc uint32
		v   int
	}
	adds := []add{{"a", 2, 11}, {"b", 1, 20}, {"a", 2, 13}, {"a", 1, 12}, {"c", 3, 30}, {"b", 0, 21}}
	for _, bulk := range []bool{false, true} {
		s := newRefStore[string, int](func(a, b uint32) bool { return a > b })
		if bulk {
			s.reserve(len(adds))
			s.begin()
		}
		slots := make([]int32, len(adds))
		for i, a := range adds {
			slots[i] = s.add(a.key, a.svc, a.v)
		}
		moved := map[int32]int32{}
		s.resolve(func(from, to int32) { moved[from] = to })
		for i := range slots {
			if to, ok := moved[slots[i]]; ok {
				slots[i] = to
			}
		}
		want := func() map[string]int {
			out := map[string]int{}
			for k, i := range s.index {
				if v, ok := s.want(&s.slab[i]); ok {
					out[k] = v
				}
			}
			return out
		}
		// a: services 2 (its last value, 13) and 1 (12): 2 wins.
		if diff := cmp.Diff(map[string]int{"a": 13, "b": 20, "c": 30}, want()); diff != "" {
			t.Fatalf("bulk=%v: wanted values (-want +got):\n%s", bulk, diff)
		}
		for i, a := range adds {
			if s.slab[slots[i]].key != a.key {
				t.Fatalf("bulk=%v: add %d (%q) recorded slot %d, which holds %q", bulk, i, a.key, slots[i], s.slab[slots[i]].key)
			}
		}
		// Service 2 emitted a twice: it keeps it until both are taken
		// back, then service 1's value is wanted, until it goes too.
		s.remove(slots[0], 2)
		if got := want()["a"]; got != 13 {
			t.Errorf("bulk=%v: a after one of service 2's emissions went: %d, want 13", bulk, got)
		}
		s.remove(slots[2], 2)
		if got := want()["a"]; got != 12 {
			t.Errorf("bulk=%v: a after service 2 went: %d, want 12", bulk, got)
		}
		s.remove(slots[3], 1)
		if _, ok := want()["a"]; ok {
			t.Errorf("bulk=%v: a still wanted after every emission was taken back", bulk)
		}
	}
}
