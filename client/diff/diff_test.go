package diff

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/internal/gen"
)

// recorder is a client.Sink that records events as strings and keeps a
// naive address-keyed view: it programs backends by address (as a kernel
// does) and removes the address of a deleted key, the way KPNG-era sinks did.
type recorder struct {
	events []string
	// byKey remembers the addresses of each (service, endpoint key).
	byKey map[client.ServiceKey]map[client.EndpointKey][]netip.Addr
	// kernel is the set of (service, address) backends programmed.
	kernel map[client.ServiceKey]map[netip.Addr]bool
}

func newRecorder() *recorder {
	return &recorder{
		byKey:  map[client.ServiceKey]map[client.EndpointKey][]netip.Addr{},
		kernel: map[client.ServiceKey]map[netip.Addr]bool{},
	}
}

func (r *recorder) SetService(s *client.Service) {
	r.events = append(r.events, "SetService "+s.Key().String())
	if r.byKey[s.Key()] == nil {
		r.byKey[s.Key()] = map[client.EndpointKey][]netip.Addr{}
		r.kernel[s.Key()] = map[netip.Addr]bool{}
	}
}

func (r *recorder) DeleteService(k client.ServiceKey) {
	r.events = append(r.events, "DeleteService "+k.String())
	delete(r.byKey, k)
	delete(r.kernel, k)
}

func (r *recorder) SetEndpoint(k client.ServiceKey, e *client.Endpoint) {
	r.events = append(r.events, fmt.Sprintf("SetEndpoint %s %s", k, e.Key))
	for _, a := range r.byKey[k][e.Key] {
		delete(r.kernel[k], a)
	}
	r.byKey[k][e.Key] = e.IPs.All()
	for _, a := range e.IPs.All() {
		r.kernel[k][a] = true
	}
}

func (r *recorder) DeleteEndpoint(k client.ServiceKey, key client.EndpointKey) {
	r.events = append(r.events, fmt.Sprintf("DeleteEndpoint %s %s", k, key))
	for _, a := range r.byKey[k][key] {
		delete(r.kernel[k], a)
	}
	delete(r.byKey[k], key)
}

func (r *recorder) Sync() { r.events = append(r.events, "Sync") }

// tracked builds snapshots with the Changes a source would give, through a
// Tracker that saw the previous states.
type tracked struct {
	tr   *client.Tracker
	prev []*client.ServiceEndpoints
}

func (t *tracked) snapshot(state []*client.ServiceEndpoints) *client.Snapshot {
	if t.tr == nil {
		t.tr = client.NewTracker()
	}
	seen := map[client.ServiceKey]bool{}
	for _, se := range state {
		seen[se.Service.Key()] = true
		t.tr.Set(se.Service.Key(), se)
	}
	for _, se := range t.prev {
		if !seen[se.Service.Key()] {
			t.tr.Set(se.Service.Key(), nil)
		}
	}
	t.prev = state
	return t.tr.Snapshot()
}

// expectedEvents counts the Set/Delete events a minimal adapter sends from
// prev to cur, computed the slow way.
func expectedEvents(prev, cur []*client.ServiceEndpoints) int {
	old := map[client.ServiceKey]*client.ServiceEndpoints{}
	for _, se := range prev {
		old[se.Service.Key()] = se
	}
	n := 0
	for _, se := range cur {
		o := old[se.Service.Key()]
		delete(old, se.Service.Key())
		if o == nil || !o.Service.Equal(se.Service) {
			n++
		}
		oeps := map[client.EndpointKey]*client.Endpoint{}
		if o != nil {
			for _, e := range o.Endpoints {
				oeps[e.Key] = e
			}
		}
		for _, e := range se.Endpoints {
			if o := oeps[e.Key]; !e.Equal(o) {
				n++
				if o != nil && !o.IPs.Equal(e.IPs) {
					n++ // an address change is DeleteEndpoint + SetEndpoint
				}
			}
			delete(oeps, e.Key)
		}
		n += len(oeps)
	}
	return n + len(old) // one DeleteService each
}

func TestRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		compareAll := rapid.Bool().Draw(t, "full")
		rec := newRecorder()
		var rebuilt *client.Snapshot
		rebuild := NewSnapshots(func(s *client.Snapshot) { rebuilt = s })
		ev := NewEvents(rec)
		ev2 := NewEvents(rebuild)
		var tr tracked
		var prev []*client.ServiceEndpoints
		for round := range rapid.IntRange(1, 6).Draw(t, "rounds") {
			state := gen.State(t, 4, 5)
			snap := tr.snapshot(state)
			if compareAll {
				snap = full(snap)
			}
			rec.events = rec.events[:0]
			ev.Apply(snap)
			ev2.Apply(snap)

			// snapshot -> events -> rebuilt snapshot is the identity.
			if diff := cmp.Diff(state, rebuilt.Services(), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("round %d: rebuilt snapshot differs (-want +got):\n%s", round, diff)
			}
			// The stream is minimal: one event per changed object, then Sync.
			if got, want := len(rec.events)-1, expectedEvents(prev, state); got != want {
				t.Fatalf("round %d: %d events, want %d: %v", round, got, want, rec.events)
			}
			if rec.events[len(rec.events)-1] != "Sync" {
				t.Fatalf("round %d: last event %q, want Sync", round, rec.events[len(rec.events)-1])
			}
			// An address-keyed sink ends with exactly the live backends:
			// deletions come first, so an address moving between keys is
			// never removed after being set.
			want := map[client.ServiceKey]map[netip.Addr]bool{}
			for _, se := range state {
				m := map[netip.Addr]bool{}
				for _, e := range se.Endpoints {
					for _, a := range e.IPs.All() {
						m[a] = true
					}
				}
				want[se.Service.Key()] = m
			}
			if diff := cmp.Diff(want, rec.kernel); diff != "" {
				t.Fatalf("round %d: address-keyed sink state (-want +got):\n%s\nevents: %v", round, diff, rec.events)
			}
			prev = state
		}
	})
}

func TestUnchangedSnapshotSendsOnlySync(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		state := gen.State(t, 3, 3)
		rec := newRecorder()
		ev := NewEvents(rec)
		ev.Apply(full(client.NewSnapshot(state, nil)))
		// The same content in new pointers.
		copied := make([]*client.ServiceEndpoints, len(state))
		for i, se := range state {
			svc := *se.Service
			c := &client.ServiceEndpoints{Service: &svc}
			for _, e := range se.Endpoints {
				ec := *e
				c.Endpoints = append(c.Endpoints, &ec)
			}
			copied[i] = c
		}
		rec.events = nil
		ev.Apply(full(client.NewSnapshot(copied, nil)))
		if diff := cmp.Diff([]string{"Sync"}, rec.events); diff != "" {
			t.Fatalf("events for an unchanged snapshot (-want +got):\n%s", diff)
		}
	})
}

func ep(key string, ip string, ready bool) *client.Endpoint {
	e := &client.Endpoint{Key: client.EndpointKey(key), Ready: ready, Serving: ready, Internal: ready}
	e.IPs.Add(netip.MustParseAddr(ip))
	return e
}

func TestEventOrder(t *testing.T) {
	web := &client.Service{Namespace: "default", Name: "web", Type: client.ClusterIP,
		Ports: []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, TargetPort: 8080}}}
	web.ClusterIPs.Add(netip.MustParseAddr("10.96.0.10"))
	web2 := *web
	web2.SessionAffinity = &client.SessionAffinity{TimeoutSeconds: 10800}
	dns := &client.Service{Namespace: "kube-system", Name: "dns", Type: client.ClusterIP}

	steps := []struct {
		name  string
		state []*client.ServiceEndpoints
		want  []string
	}{
		{"add", []*client.ServiceEndpoints{
			{Service: web, Endpoints: []*client.Endpoint{ep("Pod/default/a", "10.244.0.1", true), ep("Pod/default/b", "10.244.0.2", true)}},
			{Service: dns},
		}, []string{
			"SetService default/web", "SetEndpoint default/web Pod/default/a", "SetEndpoint default/web Pod/default/b",
			"SetService kube-system/dns", "Sync",
		}},
		{"readiness change is one SetEndpoint with the same key", []*client.ServiceEndpoints{
			{Service: web, Endpoints: []*client.Endpoint{ep("Pod/default/a", "10.244.0.1", false), ep("Pod/default/b", "10.244.0.2", true)}},
			{Service: dns},
		}, []string{"SetEndpoint default/web Pod/default/a", "Sync"}},
		{"address moves to a new key: delete first", []*client.ServiceEndpoints{
			{Service: web, Endpoints: []*client.Endpoint{ep("Pod/default/b", "10.244.0.2", true), ep("Pod/default/c", "10.244.0.1", true)}},
			{Service: dns},
		}, []string{"DeleteEndpoint default/web Pod/default/a", "SetEndpoint default/web Pod/default/c", "Sync"}},
		{"service change without endpoint change", []*client.ServiceEndpoints{
			{Service: &web2, Endpoints: []*client.Endpoint{ep("Pod/default/b", "10.244.0.2", true), ep("Pod/default/c", "10.244.0.1", true)}},
			{Service: dns},
		}, []string{"SetService default/web", "Sync"}},
		{"delete service", []*client.ServiceEndpoints{
			{Service: dns},
		}, []string{"DeleteService default/web", "Sync"}},
	}
	rec := newRecorder()
	ev := NewEvents(rec)
	var tr tracked
	for _, s := range steps {
		rec.events = nil
		ev.Apply(tr.snapshot(s.state))
		if diff := cmp.Diff(s.want, rec.events); diff != "" {
			t.Fatalf("%s: events (-want +got):\n%s", s.name, diff)
		}
	}
}

// full returns a snapshot with s's services and no change information.
func full(s *client.Snapshot) *client.Snapshot {
	f := client.NewSnapshot(s.Services(), nil)
	f.Full = true
	return f
}
