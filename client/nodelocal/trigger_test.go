package nodelocal

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/proxysinks/proxysinks/client"
)

// TestTriggerTime checks Change.TriggerTime: the earliest trigger time of
// the slice updates folded into a change, zero when unknown.
func TestTriggerTime(t *testing.T) {
	start := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return start.Add(time.Duration(sec) * time.Second) }
	// web's slice with one endpoint: not ready unless ready, at
	// 10.244.0.<n>; trigger is the annotation ("" for none).
	web := func(name, trigger string, ready bool, n ...int) *discoveryv1.EndpointSlice {
		addr := "10.244.0.1"
		if len(n) > 0 {
			addr = fmt.Sprintf("10.244.0.%d", n[0])
		}
		es := slice("default", name, "web", false, []epSpec{{addr: addr, pod: "a", ready: &ready}})
		if trigger != "" {
			es.Annotations = map[string]string{AnnotationTriggerTime: trigger}
		}
		return es
	}
	rfc := func(sec int) string { return at(sec).Format(time.RFC3339) }
	type op func(t *testing.T, st *State)
	setSlice := func(es *discoveryv1.EndpointSlice) op {
		return func(t *testing.T, st *State) {
			t.Helper()
			if err := st.SetSlice(es); err != nil {
				t.Fatal(err)
			}
		}
	}
	setService := func(t *testing.T, st *State) {
		t.Helper()
		if err := st.SetService(service("default", "web", withITP)); err != nil {
			t.Fatal(err)
		}
	}
	deleteSlice := func(name string) op {
		return func(_ *testing.T, st *State) { st.DeleteSlice("default", name) }
	}
	deleteService := func(_ *testing.T, st *State) { st.DeleteService("default", "web") }

	tests := []struct {
		name string
		ops  []op
		// want is web's change in the snapshot after ops: its trigger time
		// (zero: none), or "none" when web is not listed.
		want      time.Time
		unchanged bool
		removed   bool
	}{
		{name: "one update", ops: []op{setSlice(web("web-1", rfc(10), false))}, want: at(10)},
		{name: "earliest of two updates, later first",
			ops:  []op{setSlice(web("web-1", rfc(20), false)), setSlice(web("web-1", rfc(10), true, 2))},
			want: at(10)},
		{name: "earliest of two updates, earlier first",
			ops:  []op{setSlice(web("web-1", rfc(10), false)), setSlice(web("web-1", rfc(20), true, 2))},
			want: at(10)},
		{name: "earliest over two slices",
			ops:  []op{setSlice(web("web-2", rfc(30), false)), setSlice(web("web-1", rfc(25), false))},
			want: at(25)},
		{name: "annotation missing", ops: []op{setSlice(web("web-1", "", false))}},
		{name: "invalid annotation is ignored", ops: []op{setSlice(web("web-1", "yesterday", false))}},
		{name: "fractional seconds accepted",
			ops:  []op{setSlice(web("web-1", at(10).Add(500*time.Millisecond).Format(time.RFC3339Nano), false))},
			want: at(10).Add(500 * time.Millisecond)},
		{name: "before the start is ignored", ops: []op{setSlice(web("web-1", rfc(-5), false))}},
		{name: "service change alone", ops: []op{setService}},
		{name: "service and slice change", ops: []op{setService, setSlice(web("web-1", rfc(10), false))}, want: at(10)},
		{name: "slice deletion", ops: []op{deleteSlice("web-1")}},
		{name: "update then deletion of the slice",
			ops: []op{setSlice(web("web-1", rfc(10), false)), deleteSlice("web-1")}},
		{name: "deletion then new slice",
			ops:  []op{deleteSlice("web-1"), setSlice(web("web-2", rfc(15), true, 3))},
			want: at(15)},
		{name: "service deletion", ops: []op{setSlice(web("web-1", rfc(10), false)), deleteService}, removed: true},
		{name: "same content, new trigger time: no change",
			ops: []op{setSlice(web("web-1", rfc(10), true))}, unchanged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := NewState(Config{NodeName: "node-a", Start: start})
			if err := st.SetService(service("default", "web")); err != nil {
				t.Fatal(err)
			}
			// The first snapshot: the slice was changed before the start.
			setSlice(web("web-1", rfc(-60), true))(t, st)
			first := st.Snapshot()
			if len(first.Changes) != 1 || !first.Changes[0].TriggerTime.IsZero() {
				t.Fatalf("first snapshot changes = %+v, want web with no trigger time", first.Changes)
			}
			for _, o := range tt.ops {
				o(t, st)
			}
			s := st.Snapshot()
			if tt.unchanged {
				if len(s.Changes) != 0 {
					t.Fatalf("changes = %+v, want none", s.Changes)
				}
				return
			}
			if len(s.Changes) != 1 || s.Changes[0].Key != (client.ServiceKey{Namespace: "default", Name: "web"}) {
				t.Fatalf("changes = %+v, want web", s.Changes)
			}
			c := s.Changes[0]
			if (c.Service == nil) != tt.removed {
				t.Errorf("removed = %v, want %v", c.Service == nil, tt.removed)
			}
			if !c.TriggerTime.Equal(tt.want) {
				t.Errorf("TriggerTime = %v, want %v", c.TriggerTime, tt.want)
			}
			if got := st.Stats(); got.Invalid != 0 || got.InvalidTotal != 0 {
				t.Errorf("stats = %+v: a trigger time made an object invalid", got)
			}
			// A trigger time is delivered once.
			if tt.removed {
				return
			}
			if err := st.SetService(service("default", "web", withAffinity)); err != nil {
				t.Fatal(err)
			}
			if next := st.Snapshot(); len(next.Changes) != 1 || !next.Changes[0].TriggerTime.IsZero() {
				t.Errorf("next change = %+v, want web with no trigger time", next.Changes)
			}
		})
	}
}

// TestTriggerTimeUnchangedResult: a slice update whose result does not
// change lists no change, and its trigger time is not carried over to a
// later change.
func TestTriggerTimeUnchangedResult(t *testing.T) {
	start := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	st := NewState(Config{NodeName: "node-a", Start: start})
	if err := st.SetService(service("default", "web")); err != nil {
		t.Fatal(err)
	}
	st.Snapshot()
	// An empty slice adds no endpoint: web's result is unchanged.
	es := slice("default", "web-1", "web", false, nil)
	es.Annotations = map[string]string{AnnotationTriggerTime: start.Add(time.Minute).Format(time.RFC3339)}
	if err := st.SetSlice(es); err != nil {
		t.Fatal(err)
	}
	if s := st.Snapshot(); len(s.Changes) != 0 {
		t.Fatalf("an empty slice changed web: %+v", s.Changes)
	}
	if err := st.SetService(service("default", "web", withAffinity)); err != nil {
		t.Fatal(err)
	}
	s := st.Snapshot()
	if diff := cmp.Diff([]time.Time{{}}, []time.Time{s.Changes[0].TriggerTime}); diff != "" {
		t.Errorf("trigger time carried over (-want +got):\n%s", diff)
	}
}

func withITP(s *corev1.Service) {
	s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
}

func withAffinity(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }
