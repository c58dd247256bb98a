package kube

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/proxysinks/proxysinks/client"
)

// apiRequest is what fakeAPIServer records of a request.
type apiRequest struct {
	Method, Path, Query, Accept, ContentType, UserAgent string
}

// fakeAPIServer answers the kube source's list-and-watch requests in
// JSON, as an API server does: a watch-list request streams objects[path]
// then the bookmark that ends the initial events, a list returns them, a
// watch stays open; an Event written is answered with itself. It records
// every request.
type fakeAPIServer struct {
	objects map[string][]runtime.Object
	mu      sync.Mutex
	reqs    []apiRequest
}

// queryKeys are the query parameters recorded.
var queryKeys = []string{"fieldSelector", "labelSelector", "watch", "sendInitialEvents"}

func (f *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var q []string
	for _, k := range queryKeys {
		if v := r.URL.Query().Get(k); v != "" {
			q = append(q, k+"="+v)
		}
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, apiRequest{r.Method, r.URL.Path, strings.Join(q, "&"), r.Header.Get("Accept"), r.Header.Get("Content-Type"), r.Header.Get("User-Agent")})
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(r.URL.Path, "/events") || strings.Contains(r.URL.Path, "/events/"):
		var e corev1.Event
		if r.Method != http.MethodPatch {
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &e)
		}
		e.TypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: "v1"}
		e.ResourceVersion = "7"
		_ = json.NewEncoder(w).Encode(&e)
	case r.URL.Query().Get("sendInitialEvents") == "true":
		enc := json.NewEncoder(w)
		for _, o := range f.objects[r.URL.Path] {
			_ = enc.Encode(map[string]any{"type": "ADDED", "object": o})
		}
		kind := f.objects[r.URL.Path][0].GetObjectKind().GroupVersionKind()
		_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{
			"kind": kind.Kind, "apiVersion": kind.GroupVersion().String(),
			"metadata": map[string]any{"resourceVersion": "5", "annotations": map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case r.URL.Query().Get("watch") == "true":
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	default:
		http.Error(w, "not served", http.StatusNotFound)
	}
}

// typed sets o's kind and API version (as the API server's JSON has them).
func typed[T runtime.Object](o T, gv schema.GroupVersion, kind string) T {
	o.GetObjectKind().SetGroupVersionKind(gv.WithKind(kind))
	return o
}

// TestRESTAPI runs the source through NewAPI's REST clients against a fake
// API server: it asks for protobuf (and reads the JSON answer), with
// client-go's user agent, lists and watches the four resources at their
// paths (this node's Node by a field selector on its name), decodes each
// group's objects into its snapshot; its event sink creates, updates and
// patches Events in their namespace.
func TestRESTAPI(t *testing.T) {
	f := &fakeAPIServer{objects: map[string][]runtime.Object{
		"/api/v1/services":                         {typed(service("web", "10.96.0.1"), corev1.SchemeGroupVersion, "Service")},
		"/apis/discovery.k8s.io/v1/endpointslices": {typed(slice("web-1", "web", "10.244.0.1@node-a"), endpointSlicesResource.GroupVersion(), "EndpointSlice")},
		"/api/v1/nodes":                            {typed(nodeWith("192.0.2.10", "10.244.0.0/24"), corev1.SchemeGroupVersion, "Node")},
		"/apis/networking.k8s.io/v1/servicecidrs":  {typed(serviceCIDR("kubernetes", "10.96.0.0/16"), serviceCIDRsResource.GroupVersion(), "ServiceCIDR")},
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	api, err := NewAPI(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	src := New(api, Config{NodeName: "node-a", Logger: slog.New(slog.DiscardHandler), Needs: client.Needs{Node: true, ServiceCIDRs: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	snaps := make(chan *client.Snapshot, 1)
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, func(s *client.Snapshot) { snaps <- s; cancel() }) }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var s *client.Snapshot
	select {
	case s = <-snaps:
	default:
		t.Fatal("no snapshot")
	}
	if diff := cmp.Diff([]string{"web: 10.244.0.1L*"}, view(s)); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}
	if s.Node == nil || len(s.ServiceCIDRs) != 1 {
		t.Errorf("snapshot Node %+v, ServiceCIDRs %v: want node-a's and one", s.Node, s.ServiceCIDRs)
	}

	sink := api.EventSink()
	e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lb.1"}, Reason: "KernelRefused"}
	for _, op := range []func() (*corev1.Event, error){
		func() (*corev1.Event, error) { return sink.Create(e) },
		func() (*corev1.Event, error) { return sink.Update(e) },
		func() (*corev1.Event, error) { return sink.Patch(e, []byte(`{"count":2}`)) },
	} {
		got, err := op()
		if err != nil || got.ResourceVersion != "7" {
			t.Errorf("event sink: %+v, %v; want the server's answer", got, err)
		}
	}

	ua := rest.DefaultKubernetesUserAgent()
	const proto = "application/vnd.kubernetes.protobuf,application/json"
	want := []apiRequest{
		{"GET", "/api/v1/nodes", "fieldSelector=metadata.name=node-a&watch=true&sendInitialEvents=true", proto, "", ua},
		{"GET", "/api/v1/services", "watch=true&sendInitialEvents=true", proto, "", ua},
		{"GET", "/apis/discovery.k8s.io/v1/endpointslices", "watch=true&sendInitialEvents=true", proto, "", ua},
		{"GET", "/apis/networking.k8s.io/v1/servicecidrs", "watch=true&sendInitialEvents=true", proto, "", ua},
		{"PATCH", "/api/v1/namespaces/ns/events/lb.1", "", "application/json, */*", "application/strategic-merge-patch+json", ua},
		{"POST", "/api/v1/namespaces/ns/events", "", "application/json, */*", "application/json", ua},
		{"PUT", "/api/v1/namespaces/ns/events/lb.1", "", "application/json, */*", "application/json", ua},
	}
	f.mu.Lock()
	got := slices.Clone(f.reqs)
	f.mu.Unlock()
	slices.SortFunc(got, func(a, b apiRequest) int { return strings.Compare(a.Method+a.Path, b.Method+b.Path) })
	got = slices.CompactFunc(got, func(a, b apiRequest) bool { return a.Method == b.Method && a.Path == b.Path })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first request per resource (-want +got):\n%s", diff)
	}
}

// TestNewAPIRefusesQPSWithoutBurst: a rate limit without a burst would
// let no request through; NewAPI says so, naming the server.
func TestNewAPIRefusesQPSWithoutBurst(t *testing.T) {
	_, err := NewAPI(&rest.Config{Host: "https://192.0.2.1:6443", QPS: 5})
	if err == nil || !strings.Contains(err.Error(), "192.0.2.1:6443") || !strings.Contains(err.Error(), "burst") {
		t.Errorf("NewAPI with QPS 5 and no burst: err %v, want one naming the server and the burst", err)
	}
}
