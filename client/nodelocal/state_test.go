package nodelocal

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/internal/gen"
)

func changedKeys(s *client.Snapshot) []string {
	var out []string
	for _, c := range s.Changes {
		k := c.Key.String()
		if c.Service == nil {
			k = "-" + k
		}
		out = append(out, k)
	}
	return out
}

func serviceKeys(s *client.Snapshot) []string {
	var out []string
	for se := range s.All() {
		out = append(out, se.Service.Key().String())
	}
	return out
}

func TestStateChanges(t *testing.T) {
	st := NewState(Config{NodeName: "node-a"})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.SetService(service("default", "web")))
	must(st.SetService(service("default", "api")))
	must(st.SetService(service("default", "headless", func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", nil })))
	must(st.SetSlice(slice("default", "web-1", "web", false, []epSpec{{addr: "10.244.0.1", pod: "a", node: "node-a"}})))
	must(st.SetSlice(slice("default", "api-1", "api", false, []epSpec{{addr: "10.244.1.1", pod: "x", zoneHints: []string{"zone-b"}}, {addr: "10.244.1.2", pod: "y", zoneHints: []string{"zone-a"}}})))

	s1 := st.Snapshot()
	if diff := cmp.Diff([]string{"default/api", "default/web"}, serviceKeys(s1)); diff != "" {
		t.Fatalf("services (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"default/api", "default/web"}, changedKeys(s1)); diff != "" {
		t.Fatalf("first changes (-want +got):\n%s", diff)
	}
	if got := st.Stats(); got != (client.Stats{NotProxied: 1, Services: 2}) {
		t.Errorf("stats = %+v", got)
	}

	// Re-setting identical objects (an informer resync) changes nothing.
	must(st.SetService(service("default", "web")))
	must(st.SetSlice(slice("default", "web-1", "web", false, []epSpec{{addr: "10.244.0.1", pod: "a", node: "node-a"}})))
	if st.Dirty() {
		t.Error("identical objects made the state dirty")
	}
	if s := st.Snapshot(); len(s.Changes) != 0 || s.Len() != 2 {
		t.Errorf("idle snapshot: changes %v, %d services", changedKeys(s), s.Len())
	}

	// One endpoint change touches one service.
	must(st.SetSlice(slice("default", "web-1", "web", false, []epSpec{{addr: "10.244.0.1", pod: "a", node: "node-a", ready: no}})))
	s2 := st.Snapshot()
	if diff := cmp.Diff([]string{"default/web"}, changedKeys(s2)); diff != "" {
		t.Errorf("changes after endpoint update (-want +got):\n%s", diff)
	}
	if s1.Services()[1].Endpoints[0].Ready != true {
		t.Error("a later snapshot modified an earlier one")
	}

	// The node's zone arrives: the api service's zone hints now apply.
	st.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b", Labels: map[string]string{LabelTopologyZone: "zone-b"}}})
	if st.Dirty() {
		t.Error("another node's object made the state dirty")
	}
	st.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{LabelTopologyZone: "zone-a"}}})
	s3 := st.Snapshot()
	if diff := cmp.Diff([]string{"default/api"}, changedKeys(s3)); diff != "" {
		t.Errorf("changes after zone (-want +got):\n%s", diff)
	}
	var got []string
	for _, e := range s3.Lookup(client.ServiceKey{Namespace: "default", Name: "api"}).Endpoints {
		got = append(got, summary(e))
	}
	if diff := cmp.Diff([]string{
		"Pod/default/x 10.244.1.1 ready serving http/TCP=8080",
		"Pod/default/y 10.244.1.2 ready serving I http/TCP=8080",
	}, got); diff != "" {
		t.Errorf("api endpoints in zone-a (-want +got):\n%s", diff)
	}

	// A slice relabelled to another service moves.
	must(st.SetSlice(slice("default", "web-1", "api", false, []epSpec{{addr: "10.244.0.1", pod: "a"}})))
	s4 := st.Snapshot()
	if diff := cmp.Diff([]string{"default/api", "default/web"}, changedKeys(s4)); diff != "" {
		t.Errorf("changes after relabel (-want +got):\n%s", diff)
	}
	if n := len(s4.Lookup(client.ServiceKey{Namespace: "default", Name: "web"}).Endpoints); n != 0 {
		t.Errorf("web keeps %d endpoints after its slice moved", n)
	}

	// Deletes.
	st.DeleteSlice("default", "web-1")
	st.DeleteService("default", "web")
	s5 := st.Snapshot()
	if diff := cmp.Diff([]string{"default/api", "-default/web"}, changedKeys(s5)); diff != "" {
		t.Errorf("changes after delete (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"default/api"}, serviceKeys(s5)); diff != "" {
		t.Errorf("services after delete (-want +got):\n%s", diff)
	}
}

func TestStateBadInput(t *testing.T) {
	st := NewState(Config{NodeName: "node-a"})
	if err := st.SetService(service("default", "web")); err != nil {
		t.Fatal(err)
	}
	if err := st.SetService(service("default", "db")); err != nil {
		t.Fatal(err)
	}
	if err := st.SetSlice(slice("default", "db-1", "db", false, []epSpec{{addr: "10.244.0.5", pod: "db"}})); err != nil {
		t.Fatal(err)
	}
	st.Snapshot()

	// web turns invalid: it goes away, db stays.
	err := st.SetService(service("default", "web", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "ICMP" }))
	if err == nil {
		t.Fatal("no error for an invalid service")
	}
	// A bad slice for db: it is left out, the good one stays.
	bad := slice("default", "db-2", "db", false, []epSpec{{addr: "10.244.0.6", pod: "db2"}})
	bad.Ports[0].Protocol = ptr(corev1.Protocol("QUIC"))
	if err := st.SetSlice(bad); err == nil {
		t.Fatal("no error for an invalid slice")
	}
	s := st.Snapshot()
	if diff := cmp.Diff([]string{"default/db"}, serviceKeys(s)); diff != "" {
		t.Errorf("services (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"-default/web"}, changedKeys(s)); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if n := len(s.Services()[0].Endpoints); n != 1 {
		t.Errorf("db has %d endpoints, want the good slice's 1", n)
	}
	if got := st.Stats(); got != (client.Stats{InvalidTotal: 2, Invalid: 2, Services: 1}) {
		t.Errorf("stats = %+v", got)
	}
	var fields []string
	for _, e := range st.Errors() {
		fields = append(fields, e.Kind+" "+e.Namespace+"/"+e.Name+" "+e.Field)
	}
	if diff := cmp.Diff([]string{"EndpointSlice default/db-2 ports[0].protocol", "Service default/web spec.ports[0].protocol"}, fields); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}

	// Fixing web brings it back; the counter keeps counting, the gauge drops.
	if err := st.SetService(service("default", "web")); err != nil {
		t.Fatal(err)
	}
	st.DeleteSlice("default", "db-2")
	s = st.Snapshot()
	if diff := cmp.Diff([]string{"default/web"}, changedKeys(s)); diff != "" {
		t.Errorf("changes after fix (-want +got):\n%s", diff)
	}
	if got := st.Stats(); got != (client.Stats{InvalidTotal: 2, Invalid: 0, Services: 2}) {
		t.Errorf("stats after fix = %+v", got)
	}
}

// TestStateSharesSliceEndpoints: a service with one slice hands the
// slice's own endpoints to sinks (no copy); when the flags of a later
// computation differ, it gets copies, and snapshots already delivered
// never change.
func TestStateSharesSliceEndpoints(t *testing.T) {
	st := NewState(Config{NodeName: "node-a"})
	es := slice("default", "web-1", "web", false, []epSpec{
		{addr: "10.244.0.2", pod: "b", node: "node-b"}, {addr: "10.244.0.1", pod: "a", node: "node-a"},
	})
	summaries := func(s *client.Snapshot) []string {
		var out []string
		for _, e := range s.Lookup(client.ServiceKey{Namespace: "default", Name: "web"}).Endpoints {
			out = append(out, summary(e))
		}
		return out
	}
	set := func(opts ...func(*corev1.Service)) *client.Snapshot {
		t.Helper()
		if err := st.SetService(service("default", "web", opts...)); err != nil {
			t.Fatal(err)
		}
		if err := st.SetSlice(es); err != nil {
			t.Fatal(err)
		}
		s := st.Snapshot()
		// The result is what Compute (which never shares) gives.
		k := client.ServiceKey{Namespace: "default", Name: "web"}
		e := st.services[k]
		if want := Compute(e.svc, e.slices, st.node); !want.Equal(s.Lookup(k)) {
			t.Fatalf("shared result differs from Compute's:\n%v\n%v", summaries(s), want.Endpoints)
		}
		return s
	}
	s1 := set()
	want1 := []string{
		"Pod/default/a 10.244.0.1 local ready serving I http/TCP=8080",
		"Pod/default/b 10.244.0.2 ready serving I http/TCP=8080",
	}
	if diff := cmp.Diff(want1, summaries(s1)); diff != "" {
		t.Fatalf("first (-want +got):\n%s", diff)
	}
	sl := st.services[client.ServiceKey{Namespace: "default", Name: "web"}].slices[0]
	if s1.Services()[0].Endpoints[0] != &sl.Endpoints[1].Endpoint {
		t.Error("the first result does not share the slice's endpoint")
	}

	s2 := set(withITP) // only the local endpoint takes internal traffic
	if diff := cmp.Diff([]string{
		"Pod/default/a 10.244.0.1 local ready serving I http/TCP=8080",
		"Pod/default/b 10.244.0.2 ready serving http/TCP=8080",
	}, summaries(s2)); diff != "" {
		t.Errorf("iTP=Local (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want1, summaries(s1)); diff != "" {
		t.Errorf("the first snapshot changed (-want +got):\n%s", diff)
	}
	if s2.Services()[0].Endpoints[0] != s1.Services()[0].Endpoints[0] {
		t.Error("an endpoint with unchanged flags is not shared")
	}

	s3 := set() // back: the slice's endpoints again
	if diff := cmp.Diff(want1, summaries(s3)); diff != "" {
		t.Errorf("back to cluster (-want +got):\n%s", diff)
	}
	if s3.Services()[0].Endpoints[1] != s1.Services()[0].Endpoints[1] {
		t.Error("the slice's endpoint is not shared again")
	}
	if summaries(s2)[1] != "Pod/default/b 10.244.0.2 ready serving http/TCP=8080" {
		t.Error("the second snapshot changed")
	}
}

// TestStateParallelRecompute: a snapshot recomputing many services spreads
// them over the CPUs; every result is still what Compute gives.
func TestStateParallelRecompute(t *testing.T) {
	svcs, slices := gen.Cluster(3*parallelMin, 3)
	st := NewState(Config{NodeName: "node-1"})
	for i := range svcs {
		if err := st.SetService(svcs[i]); err != nil {
			t.Fatal(err)
		}
		if err := st.SetSlice(slices[i]); err != nil {
			t.Fatal(err)
		}
	}
	s := st.Snapshot()
	if s.Len() != len(svcs) || len(s.Changes) != len(svcs) {
		t.Fatalf("%d services, %d changes, want %d", s.Len(), len(s.Changes), len(svcs))
	}
	for i := range svcs {
		svc, _, err := ConvertService(svcs[i], "")
		if err != nil {
			t.Fatal(err)
		}
		sl, err := ParseSlice(slices[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Lookup(svc.Key()); !Compute(svc, []*Slice{sl}, Node{Name: "node-1"}).Equal(got) {
			t.Fatalf("%v differs from Compute's result", svc.Key())
		}
	}
}
