package client

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestTrackerProperty applies random rounds of sets and deletes over up to
// 2,000 keys (several runs of chunkSize, so runs split, shrink and vanish)
// and checks every snapshot against a plain map: order, content, Lookup,
// Changes, and that earlier snapshots never change.
func TestTrackerProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nkeys := rapid.IntRange(1, 2000).Draw(t, "keys")
		tr := NewTracker()
		model := map[ServiceKey]*ServiceEndpoints{}
		type kept struct {
			snap *Snapshot
			want []string
		}
		var history []kept
		for round := range rapid.IntRange(1, 5).Draw(t, "rounds") {
			prev := maps.Clone(model)
			bulk := rapid.IntRange(0, nkeys).Draw(t, "bulk")
			for range bulk {
				i := rapid.IntRange(0, nkeys-1).Draw(t, "key")
				k := ServiceKey{Namespace: fmt.Sprintf("ns-%d", i%7), Name: fmt.Sprintf("svc-%d", i)}
				var se *ServiceEndpoints
				if rapid.IntRange(0, 3).Draw(t, "op") > 0 {
					se = &ServiceEndpoints{Service: &Service{Namespace: k.Namespace, Name: k.Name, Type: ClusterIP,
						HealthCheckNodePort: rapid.IntRange(0, 2).Draw(t, "v")}}
				}
				old := model[k]
				if tr.Set(k, se) != !se.Equal(old) {
					t.Fatalf("Set(%v) change report wrong", k)
				}
				if se.Equal(old) {
					continue // the tracker keeps the old pointer
				}
				if se == nil {
					delete(model, k)
				} else {
					model[k] = se
				}
			}
			s := tr.Snapshot()
			keysWant := slices.SortedFunc(maps.Keys(model), ServiceKey.Compare)
			var want, got []string
			for _, k := range keysWant {
				want = append(want, fmt.Sprintf("%v=%d", k, model[k].Service.HealthCheckNodePort))
			}
			for se := range s.All() {
				got = append(got, fmt.Sprintf("%v=%d", se.Service.Key(), se.Service.HealthCheckNodePort))
			}
			if !slices.Equal(want, got) || s.Len() != len(want) || tr.Len() != len(want) {
				t.Fatalf("round %d: snapshot has %d services (Len %d), want %d", round, len(got), s.Len(), len(want))
			}
			for _, c := range s.chunks {
				if len(c) == 0 {
					t.Fatalf("round %d: empty run", round)
				}
			}
			for _, k := range keysWant {
				if s.Lookup(k) != model[k] {
					t.Fatalf("round %d: Lookup(%v) wrong", round, k)
				}
			}
			if s.Lookup(ServiceKey{Namespace: "zz", Name: "none"}) != nil || s.Lookup(ServiceKey{}) != nil {
				t.Fatalf("round %d: Lookup of a missing key found something", round)
			}
			// Changes carries the current content of every key whose content
			// differs from the previous snapshot (a key changed and changed
			// back may be listed too), in key order.
			listed := map[ServiceKey]bool{}
			for i, c := range s.Changes {
				if c.Service != model[c.Key] {
					t.Fatalf("round %d: change %v carries stale content", round, c.Key)
				}
				if i > 0 && s.Changes[i-1].Key.Compare(c.Key) >= 0 {
					t.Fatalf("round %d: changes out of order", round)
				}
				listed[c.Key] = true
			}
			for k := range model {
				if !model[k].Equal(prev[k]) && !listed[k] {
					t.Fatalf("round %d: change of %v not listed", round, k)
				}
			}
			for k := range prev {
				if model[k] == nil && !listed[k] {
					t.Fatalf("round %d: removal of %v not listed", round, k)
				}
			}
			history = append(history, kept{s, want})
			for i, h := range history {
				var again []string
				for se := range h.snap.All() {
					again = append(again, fmt.Sprintf("%v=%d", se.Service.Key(), se.Service.HealthCheckNodePort))
				}
				if !slices.Equal(h.want, again) {
					t.Fatalf("round %d: snapshot %d changed after later rounds", round, i)
				}
			}
		}
	})
}

// TestTrackerRuns checks that a large state is held in runs, so that one
// change copies one run, not the whole list.
func TestTrackerRuns(t *testing.T) {
	tr := NewTracker()
	for i := range 5000 {
		k := ServiceKey{Namespace: "ns", Name: fmt.Sprintf("svc-%05d", i)}
		tr.Set(k, &ServiceEndpoints{Service: &Service{Namespace: k.Namespace, Name: k.Name}})
	}
	s1 := tr.Snapshot()
	if len(s1.chunks) < 5000/(2*chunkSize) {
		t.Fatalf("5000 services in %d runs", len(s1.chunks))
	}
	k := ServiceKey{Namespace: "ns", Name: "svc-02500"}
	tr.Set(k, &ServiceEndpoints{Service: &Service{Namespace: k.Namespace, Name: k.Name, Type: NodePort}})
	s2 := tr.Snapshot()
	shared := 0
	for i := range s2.chunks {
		if &s2.chunks[i][0] == &s1.chunks[i][0] {
			shared++
		}
	}
	if shared != len(s1.chunks)-1 {
		t.Errorf("one change shares %d of %d runs, want all but one", shared, len(s1.chunks))
	}
	if s2.Lookup(k).Service.Type != NodePort || s1.Lookup(k).Service.Type != "" {
		t.Error("the change is not where it belongs")
	}
}

// TestTrackerTriggerTime: a change carries the earliest trigger time set
// since the previous snapshot, once; unchanged content and removals carry
// none.
func TestTrackerTriggerTime(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	k := ServiceKey{Namespace: "ns", Name: "web"}
	se := func(hc int) *ServiceEndpoints {
		return &ServiceEndpoints{Service: &Service{Namespace: "ns", Name: "web", HealthCheckNodePort: hc}}
	}
	tr := NewTracker()
	tr.SetTriggered(k, se(1), t0.Add(2*time.Second))
	tr.SetTriggered(k, se(2), t0.Add(time.Second))
	tr.SetTriggered(k, se(3), time.Time{})
	check := func(what string, s *Snapshot, want time.Time) {
		t.Helper()
		if len(s.Changes) != 1 || !s.Changes[0].TriggerTime.Equal(want) {
			t.Errorf("%s: changes = %+v, want one triggered at %v", what, s.Changes, want)
		}
	}
	check("earliest", tr.Snapshot(), t0.Add(time.Second))
	if tr.SetTriggered(k, se(3), t0.Add(5*time.Second)) {
		t.Error("equal content reported as a change")
	}
	tr.Set(k, se(4))
	check("delivered once", tr.Snapshot(), time.Time{})
	tr.SetTriggered(k, se(5), t0.Add(6*time.Second))
	tr.SetTriggered(k, nil, t0.Add(7*time.Second))
	check("removal", tr.Snapshot(), time.Time{})
}
