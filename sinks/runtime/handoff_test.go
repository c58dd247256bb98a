package runtime

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/diff"
)

// recorder is a client.Sink that writes down the events it gets.
type recorder struct{ events []string }

func (r *recorder) SetService(s *client.Service) {
	r.events = append(r.events, "set "+s.Key().String())
}
func (r *recorder) DeleteService(k client.ServiceKey) {
	r.events = append(r.events, "delete "+k.String())
}
func (r *recorder) SetEndpoint(k client.ServiceKey, e *client.Endpoint) {
	r.events = append(r.events, fmt.Sprintf("set %s endpoint %s", k, e.Key))
}
func (r *recorder) DeleteEndpoint(k client.ServiceKey, e client.EndpointKey) {
	r.events = append(r.events, fmt.Sprintf("delete %s endpoint %s", k, e))
}
func (r *recorder) Sync() { r.events = append(r.events, "sync") }

func svc(name string) *client.ServiceEndpoints {
	return &client.ServiceEndpoints{Service: &client.Service{Namespace: "ns", Name: name, Type: client.ClusterIP}}
}

// TestHandoffKeepsChanges: when the controller is slow and a snapshot is
// replaced by a newer one before it was taken, an incremental consumer
// (diff.Events, which reads only the Changes) must still see the changes of
// the snapshot that was skipped.
func TestHandoffKeepsChanges(t *testing.T) {
	tr := client.NewTracker()
	h := newHandoff()
	rec := &recorder{}
	ev := diff.NewEvents(rec)

	tr.Set(client.ServiceKey{Namespace: "ns", Name: "a"}, svc("a"))
	h.put(tr.Snapshot())
	ev.Apply((<-h.ch).s)

	// Three snapshots arrive while the controller is busy: b added, then
	// a removed and c added, then b's trigger time and d added.
	t0 := time.Unix(1000, 0)
	tr.SetTriggered(client.ServiceKey{Namespace: "ns", Name: "b"}, svc("b"), t0)
	h.put(tr.Snapshot())
	tr.Set(client.ServiceKey{Namespace: "ns", Name: "a"}, nil)
	tr.Set(client.ServiceKey{Namespace: "ns", Name: "c"}, svc("c"))
	h.put(tr.Snapshot())
	tr.SetTriggered(client.ServiceKey{Namespace: "ns", Name: "d"}, svc("d"), t0.Add(time.Second))
	h.put(tr.Snapshot())

	p := <-h.ch
	if got := p.s.Len(); got != 3 {
		t.Errorf("the kept snapshot has %d services, want 3 (b, c, d)", got)
	}
	if diff := cmp.Diff([]time.Time{t0, t0.Add(time.Second)}, p.triggers); diff != "" {
		t.Errorf("trigger times (-want +got):\n%s", diff)
	}
	rec.events = nil
	ev.Apply(p.s)
	want := []string{"delete ns/a", "set ns/b", "set ns/c", "set ns/d", "sync"}
	if diff := cmp.Diff(want, rec.events); diff != "" {
		t.Errorf("events after skipped snapshots (-want +got):\n%s", diff)
	}
}

// TestMergedFull: a skipped snapshot that does not know its changes makes
// the kept one not know them either, whichever of the two it was.
func TestMergedFull(t *testing.T) {
	known := client.NewSnapshot(nil, []client.Change{{Key: client.ServiceKey{Namespace: "ns", Name: "a"}}})
	full := client.NewSnapshot(nil, nil)
	full.Full = true
	for _, tc := range []struct {
		name      string
		prev, cur *client.Snapshot
		wantFull  bool
	}{
		{"both known", known, known, false},
		{"skipped one full", full, known, true},
		{"kept one full", known, full, true},
	} {
		got := merged(tc.prev, tc.cur)
		if got.Full != tc.wantFull {
			t.Errorf("%s: Full = %v, want %v", tc.name, got.Full, tc.wantFull)
		}
		if tc.cur.Full != (tc.name == "kept one full") || tc.prev.Full != (tc.name == "skipped one full") {
			t.Errorf("%s: merged changed its inputs", tc.name)
		}
	}
}
