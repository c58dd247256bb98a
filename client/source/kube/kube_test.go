package kube

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/nodelocal"
	"github.com/proxysinks/proxysinks/client/source/kube/kubetest"
)

func ptr[T any](v T) *T { return &v }

func service(name, ip string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// endpoint is "ip" or "ip@node" or "ip@node!" (not ready), with optional
// "~zone" hint: "10.244.0.1@node-a~zone-a".
func slice(name, svc string, eps ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}
		if before, zone, ok := strings.Cut(e, "~"); ok {
			ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
			e = before
		}
		if strings.HasSuffix(e, "!") {
			ep.Conditions.Ready = ptr(false)
			e = strings.TrimSuffix(e, "!")
		}
		ip, node, _ := strings.Cut(e, "@")
		ep.Addresses = []string{ip}
		if node != "" {
			ep.NodeName = ptr(node)
		}
		es.Endpoints = append(es.Endpoints, ep)
	}
	return es
}

func node(name, zone string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"topology.kubernetes.io/zone": zone}}}
}

// view renders a snapshot as "name: ip[*] ..." lines; * marks endpoints
// this node sends cluster traffic to, L local ones.
func view(s *client.Snapshot) []string {
	var out []string
	for se := range s.All() {
		line := se.Service.Name + ":"
		for _, e := range se.Endpoints {
			line += " " + e.IPs.All()[0].String()
			if e.Local {
				line += "L"
			}
			if e.Internal {
				line += "*"
			}
		}
		out = append(out, line)
	}
	return out
}

type harness struct {
	t     *testing.T
	cs    *fake.Clientset
	src   *Source
	snaps chan *client.Snapshot
	ctx   context.Context
}

func start(t *testing.T, cfg Config, objs ...runtime.Object) *harness {
	t.Helper()
	return startClient(t, fake.NewClientset(objs...), cfg)
}

// startClient runs a source on cs (reactors may be added beforehand).
func startClient(t *testing.T, cs *fake.Clientset, cfg Config) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, cs: cs, src: New(kubetest.Clientset(cs), cfg), snaps: make(chan *client.Snapshot, 100), ctx: ctx}
	done := make(chan error, 1)
	go func() { done <- h.src.Run(ctx, func(s *client.Snapshot) { h.snaps <- s }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not stop")
		}
	})
	return h
}

// next returns the next snapshot.
func (h *harness) next(what string) *client.Snapshot {
	h.t.Helper()
	select {
	case s := <-h.snaps:
		return s
	case <-time.After(10 * time.Second):
		h.t.Fatalf("%s: no snapshot", what)
		return nil
	}
}

// until reads snapshots until view(s) equals want.
func (h *harness) until(what string, want []string) *client.Snapshot {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	var last []string
	for {
		select {
		case s := <-h.snaps:
			last = view(s)
			if cmp.Equal(want, last) {
				return s
			}
		case <-deadline:
			h.t.Fatalf("%s: state never reached (-want +last):\n%s", what, cmp.Diff(want, last))
			return nil
		}
	}
}

// quiet checks that no snapshot comes for d.
func (h *harness) quiet(what string, d time.Duration) {
	h.t.Helper()
	select {
	case s := <-h.snaps:
		h.t.Errorf("%s: unexpected snapshot %v (changes %d)", what, view(s), len(s.Changes))
	case <-time.After(d):
	}
}

func TestFirstSnapshotAfterSync(t *testing.T) {
	h := start(t, Config{NodeName: "node-a", MinInterval: 10 * time.Millisecond},
		node("node-a", "zone-a"), node("node-b", "zone-b"),
		service("web", "10.96.0.1"), service("api", "10.96.0.2"),
		// web's endpoints are split over two slices, with one duplicate.
		slice("web-1", "web", "10.244.0.1@node-a", "10.244.1.1@node-b"),
		slice("web-2", "web", "10.244.2.1@node-c", "10.244.1.1@node-b"),
		// api has zone hints: node-a is in zone-a.
		slice("api-1", "api", "10.244.0.2@node-a~zone-a", "10.244.1.2@node-b~zone-b"),
	)
	s := h.next("start")
	// Everything in the fake API is in the first snapshot: it came after
	// the informers synced, and the node's zone was known.
	want := []string{
		"api: 10.244.0.2L* 10.244.1.2",
		"web: 10.244.0.1L* 10.244.1.1* 10.244.2.1*",
	}
	if diff := cmp.Diff(want, view(s)); diff != "" {
		t.Fatalf("first snapshot (-want +got):\n%s", diff)
	}
	if len(s.Changes) != 2 {
		t.Errorf("first snapshot lists %d changes, want 2", len(s.Changes))
	}
}

// TestFirstSnapshotIsComplete: with many objects, the first snapshot must
// still hold all of them (the handlers, not only the informer stores, must
// have seen the initial lists).
// TestStaleUntilSynced: Stats says stale until the first snapshot.
func TestStaleUntilSynced(t *testing.T) {
	cs := fake.NewClientset(service("web", "10.96.0.1"))
	if st := New(kubetest.Clientset(cs), Config{}).Stats(); !st.Stale || !strings.Contains(st.StaleReason, "no first snapshot") {
		t.Errorf("before Run: %+v", st)
	}
	h := start(t, Config{MinInterval: 10 * time.Millisecond}, service("web", "10.96.0.1"))
	h.next("start")
	if st := h.src.Stats(); st.Stale || st.StaleReason != "" || st.Services != 1 {
		t.Errorf("after the first snapshot: %+v", st)
	}
}

func TestFirstSnapshotIsComplete(t *testing.T) {
	var objs []runtime.Object
	for i := range 2000 {
		objs = append(objs, service(fmt.Sprintf("svc-%04d", i), fmt.Sprintf("10.96.%d.%d", i/256, i%256)),
			slice(fmt.Sprintf("svc-%04d-1", i), fmt.Sprintf("svc-%04d", i), fmt.Sprintf("10.244.%d.%d", i/256, i%256)))
	}
	for range 3 {
		h := start(t, Config{MinInterval: time.Hour}, objs...)
		s := h.next("start")
		if s.Len() != 2000 {
			t.Fatalf("first snapshot has %d services, want 2000", s.Len())
		}
		for se := range s.All() {
			if len(se.Endpoints) != 1 {
				t.Fatalf("%s has %d endpoints in the first snapshot, want 1", se.Service.Key(), len(se.Endpoints))
			}
		}
	}
}

func TestAddUpdateDelete(t *testing.T) {
	ctx := context.Background()
	h := start(t, Config{NodeName: "node-a", MinInterval: 10 * time.Millisecond})
	if s := h.next("start"); s.Len() != 0 {
		t.Fatalf("empty cluster gives %v", view(s))
	}
	svcs := h.cs.CoreV1().Services("default")
	eps := h.cs.DiscoveryV1().EndpointSlices("default")
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	must(svcs.Create(ctx, service("web", "10.96.0.1"), metav1.CreateOptions{}))
	must(eps.Create(ctx, slice("web-1", "web", "10.244.0.1@node-a"), metav1.CreateOptions{}))
	h.until("add", []string{"web: 10.244.0.1L*"})

	// A second slice for the same service.
	must(eps.Create(ctx, slice("web-2", "web", "10.244.1.1@node-b"), metav1.CreateOptions{}))
	s := h.until("second slice", []string{"web: 10.244.0.1L* 10.244.1.1*"})
	if len(s.Changes) != 1 || s.Changes[0].Key.Name != "web" {
		t.Errorf("changes = %+v", s.Changes)
	}

	// An endpoint turns not ready.
	must(eps.Update(ctx, slice("web-1", "web", "10.244.0.1@node-a!"), metav1.UpdateOptions{}))
	h.until("update", []string{"web: 10.244.0.1L 10.244.1.1*"})

	// A service change (iTP=Local) recomputes the endpoints.
	local := service("web", "10.96.0.1")
	local.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
	must(svcs.Update(ctx, local, metav1.UpdateOptions{}))
	h.until("iTP=Local", []string{"web: 10.244.0.1L 10.244.1.1"})
	must(eps.Update(ctx, slice("web-1", "web", "10.244.0.1@node-a"), metav1.UpdateOptions{}))
	h.until("local ready", []string{"web: 10.244.0.1L* 10.244.1.1"})

	if err := eps.Delete(ctx, "web-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.until("delete slice", []string{"web: 10.244.0.1L*"})
	if err := svcs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s = h.until("delete service", nil)
	if len(s.Changes) != 1 || s.Changes[0].Service != nil {
		t.Errorf("delete changes = %+v", s.Changes)
	}
}

func TestNodeZone(t *testing.T) {
	ctx := context.Background()
	h := start(t, Config{NodeName: "node-a", MinInterval: 10 * time.Millisecond},
		node("node-a", ""), service("api", "10.96.0.2"),
		slice("api-1", "api", "10.244.0.2@node-x~zone-a", "10.244.1.2@node-y~zone-b"))
	h.until("no zone: hints ignored", []string{"api: 10.244.0.2* 10.244.1.2*"})
	if _, err := h.cs.CoreV1().Nodes().Update(ctx, node("node-a", "zone-b"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.until("zone-b", []string{"api: 10.244.0.2 10.244.1.2*"})
	// Another node's change is not ours.
	if _, err := h.cs.CoreV1().Nodes().Create(ctx, node("node-z", "zone-a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.quiet("other node", 200*time.Millisecond)
}

func TestResyncDeliversNothing(t *testing.T) {
	// client-go's smallest resync period is 1s.
	h := start(t, Config{NodeName: "node-a", MinInterval: 5 * time.Millisecond, ResyncPeriod: time.Second},
		service("web", "10.96.0.1"), slice("web-1", "web", "10.244.0.1@node-a"))
	h.next("start")
	deadline := time.Now().Add(10 * time.Second)
	for h.src.updates.Load() < 2 && time.Now().Before(deadline) {
		select {
		case s := <-h.snaps:
			t.Fatalf("snapshot during resyncs: %v (changes %d)", view(s), len(s.Changes))
		case <-time.After(50 * time.Millisecond):
		}
	}
	if n := h.src.updates.Load(); n < 2 {
		t.Fatalf("%d informer updates in 10s: the resync never happened", n)
	}
	h.quiet("resyncs", 200*time.Millisecond)
}

func TestSyncPeriod(t *testing.T) {
	h := start(t, Config{MinInterval: 5 * time.Millisecond, SyncPeriod: 20 * time.Millisecond}, service("web", "10.96.0.1"))
	h.next("start")
	s := h.next("periodic")
	if len(s.Changes) != 0 || s.Len() != 1 {
		t.Errorf("periodic snapshot: %v, %d changes", view(s), len(s.Changes))
	}
}

func TestBurstsCoalesced(t *testing.T) {
	ctx := context.Background()
	h := start(t, Config{MinInterval: 300 * time.Millisecond})
	h.next("start")
	start := time.Now()
	var want []string
	for i := range 50 {
		name := fmt.Sprintf("svc-%02d", i)
		if _, err := h.cs.CoreV1().Services("default").Create(ctx, service(name, fmt.Sprintf("10.96.1.%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, name+":")
	}
	n := 0
	deadline := time.After(10 * time.Second)
	for {
		select {
		case s := <-h.snaps:
			n++
			if cmp.Equal(want, view(s)) {
				// At most one snapshot per minimum interval, plus one for
				// events after the last interval began.
				limit := int(time.Since(start)/(300*time.Millisecond)) + 1
				if n > limit {
					t.Errorf("50 creations in %v gave %d snapshots, want at most %d", time.Since(start), n, limit)
				}
				return
			}
		case <-deadline:
			t.Fatalf("never saw all 50 services (%d snapshots)", n)
		}
	}
}

func TestBadObjects(t *testing.T) {
	ctx := context.Background()
	bad := service("bad", "10.96.0.300")
	badPolicy := service("bad-policy", "10.96.0.4")
	badPolicy.Spec.ExternalTrafficPolicy = "Nearest"
	h := start(t, Config{MinInterval: 5 * time.Millisecond},
		service("web", "10.96.0.1"), bad, badPolicy,
		slice("web-1", "web", "10.244.0.1"),
		slice("web-bad", "web", "10.244.0.999"))
	// An unknown traffic policy is read as Cluster, as kube-proxy reads
	// it (a repaired value).
	h.until("start", []string{"bad-policy:", "web: 10.244.0.1*"})
	var got []string
	for _, e := range h.src.Errors() {
		got = append(got, e.Error())
	}
	// The slice's bad endpoint is skipped alone (counted, not an invalid
	// object).
	want := []string{
		`Service default/bad: spec.clusterIPs[0]: invalid IP "10.96.0.300"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if st := h.src.Stats(); st.Invalid != 1 || st.InvalidTotal != 1 || st.SkippedValuesTotal != 1 || st.RepairedValuesTotal != 1 || st.Services != 2 {
		t.Errorf("stats = %+v", st)
	}
	// Fixing the service serves it.
	if _, err := h.cs.CoreV1().Services("default").Update(ctx, service("bad", "10.96.0.3"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.until("fixed", []string{"bad:", "bad-policy:", "web: 10.244.0.1*"})
	if st := h.src.Stats(); st.Invalid != 0 || st.InvalidTotal != 1 {
		t.Errorf("stats after fix = %+v", st)
	}
}

// TestTriggerTime: a slice update's endpoints.kubernetes.io/last-change-trigger-time
// reaches the sink as Change.TriggerTime; slices changed before the source
// started (the first snapshot here) and deletions carry none.
func TestTriggerTime(t *testing.T) {
	ctx := context.Background()
	annotated := func(es *discoveryv1.EndpointSlice, at time.Time) *discoveryv1.EndpointSlice {
		es.Annotations = map[string]string{nodelocal.AnnotationTriggerTime: at.UTC().Format(time.RFC3339)}
		return es
	}
	h := start(t, Config{NodeName: "node-a", MinInterval: 10 * time.Millisecond},
		service("web", "10.96.0.1"), annotated(slice("web-1", "web", "10.244.0.1@node-a"), time.Now().Add(-time.Hour)))
	s := h.next("start")
	if len(s.Changes) != 1 || !s.Changes[0].TriggerTime.IsZero() {
		t.Fatalf("first snapshot changes = %+v, want web without trigger time", s.Changes)
	}

	// The annotation has second precision: a time a minute ahead is
	// surely after the source's start.
	at := time.Now().Add(time.Minute).Truncate(time.Second)
	eps := h.cs.DiscoveryV1().EndpointSlices("default")
	if _, err := eps.Update(ctx, annotated(slice("web-1", "web", "10.244.0.1@node-a!"), at), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = h.until("update", []string{"web: 10.244.0.1L"})
	if len(s.Changes) != 1 || !s.Changes[0].TriggerTime.Equal(at) {
		t.Errorf("update changes = %+v, want web triggered at %v", s.Changes, at)
	}

	if err := eps.Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s = h.until("delete", []string{"web:"})
	if len(s.Changes) != 1 || !s.Changes[0].TriggerTime.IsZero() {
		t.Errorf("deletion changes = %+v, want web without trigger time", s.Changes)
	}
}

func TestNodeStatus(t *testing.T) {
	ctx := context.Background()
	h := start(t, Config{NodeName: "node-a", MinInterval: 10 * time.Millisecond},
		service("api", "10.96.0.2"), slice("api-1", "api", "10.244.0.2@node-a"))
	h.next("start")
	waitStatus := func(step string, want NodeStatus) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for h.src.NodeStatus() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: NodeStatus = %+v, want %+v", step, h.src.NodeStatus(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitStatus("no Node yet", NodeStatus{})
	n := node("node-a", "zone-a")
	if _, err := h.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus("created", NodeStatus{Known: true})
	// Another node's taint is not ours.
	other := node("node-z", "zone-a")
	other.Spec.Taints = []corev1.Taint{{Key: ToBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
	if _, err := h.cs.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoSchedule}, {Key: ToBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
	n.ResourceVersion = "2"
	if _, err := h.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus("tainted by the autoscaler", NodeStatus{Known: true, ToBeDeleted: true})
	now := metav1.Now()
	n.DeletionTimestamp = &now
	n.ResourceVersion = "3"
	if _, err := h.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus("being deleted", NodeStatus{Known: true, Deleting: true, ToBeDeleted: true})
	if err := h.cs.CoreV1().Nodes().Delete(ctx, "node-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus("deleted", NodeStatus{})
}

// TestUnreachableAPIServerLogsWhy: when the API server cannot be reached
// the log says why ("connection refused"), once per distinct cause, not
// once per informer and retry.
func TestUnreachableAPIServerLogsWhy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var buf syncBuffer
	src, err := newForRESTConfig(&rest.Config{Host: "http://" + addr}, Config{NodeName: "node-a", Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := src.Run(ctx, func(*client.Snapshot) { t.Error("snapshot without an API server") }); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `cause="connection refused"`) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d log lines say connection refused, want 1:\n%s", n, out)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
