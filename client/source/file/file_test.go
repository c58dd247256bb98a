package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/client"
)

func svcYAML(name, clusterIP, proto string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: default
spec:
  clusterIP: %s
  ports:
  - name: http
    protocol: %s
    port: 80
    targetPort: 8080
`, name, clusterIP, proto)
}

func sliceYAML(name, svc string, addrs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s
  namespace: default
  labels:
    kubernetes.io/service-name: %s
addressType: IPv4
ports:
- name: http
  protocol: TCP
  port: 8080
endpoints:
`, name, svc)
	for _, a := range addrs {
		fmt.Fprintf(&b, "- addresses: [%q]\n  nodeName: node-1\n", a)
	}
	return b.String()
}

func join(docs ...string) string { return strings.Join(docs, "---\n") }

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replace writes content atomically, the way editors and kubectl-style
// tools do: a temporary file renamed over the old one.
func replace(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp~"
	write(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// view renders a snapshot as "ns/name: ip,ip" lines.
func view(s *client.Snapshot) []string {
	var out []string
	for se := range s.All() {
		var ips []string
		for _, e := range se.Endpoints {
			for _, a := range e.IPs.All() {
				ips = append(ips, a.String())
			}
		}
		out = append(out, se.Service.Key().String()+": "+strings.Join(ips, ","))
	}
	return out
}

func changes(s *client.Snapshot) []string {
	var out []string
	for _, c := range s.Changes {
		out = append(out, c.Key.String())
	}
	return out
}

func TestLoadFileAndDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), join(
		"# only a comment\n",
		svcYAML("web", "10.96.0.1", "TCP"),
		sliceYAML("web-1", "web", "10.244.0.1", "10.244.0.2"),
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ignored\n",
	))
	// A List, as `kubectl get -o yaml` prints, and JSON.
	write(t, filepath.Join(dir, "b.json"), `{"apiVersion":"v1","kind":"List","items":[
	 {"apiVersion":"v1","kind":"Service","metadata":{"name":"api"},"spec":{"clusterIP":"10.96.0.2","ports":[{"name":"http","port":80}]}},
	 {"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"api-1","labels":{"kubernetes.io/service-name":"api"}},
	  "addressType":"IPv4","ports":[{"name":"http","port":80}],"endpoints":[{"addresses":["10.244.1.1"]}]}]}`)
	write(t, filepath.Join(dir, "notes.txt"), "not a manifest")

	s, err := New(Config{Path: dir, NodeName: "node-1"}).Load()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/api: 10.244.1.1", "default/web: 10.244.0.1,10.244.0.2"}, view(s)); diff != "" {
		t.Errorf("directory (-want +got):\n%s", diff)
	}
	s, err = New(Config{Path: filepath.Join(dir, "a.yaml"), NodeName: "node-1"}).Load()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/web: 10.244.0.1,10.244.0.2"}, view(s)); diff != "" {
		t.Errorf("single file (-want +got):\n%s", diff)
	}
	if !s.Services()[0].Endpoints[0].Local {
		t.Error("endpoint on node-1 not local")
	}
	if _, err := New(Config{Path: filepath.Join(dir, "missing.yaml")}).Load(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing path: err = %v, want not-exist", err)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.yaml")
	write(t, path, join(
		svcYAML("good", "10.96.0.1", "TCP"),
		sliceYAML("good-1", "good", "10.244.0.1"),
		svcYAML("bad-ip", "10.96.0.300", "TCP"),
		svcYAML("bad-proto", "10.96.0.3", "ICMP"),
		// A bad endpoint address is skipped alone (counted, not an
		// invalid object).
		sliceYAML("bad-slice", "good", "10.244.0.999"),
		// A wrong type: decoding fails, the error names the field.
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: bad-port\nspec:\n  clusterIP: 10.96.0.4\n  ports:\n  - port: eighty\n",
	))
	src := New(Config{Path: path})
	s, err := src.Load()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/good: 10.244.0.1"}, view(s)); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}
	var got []string
	for _, e := range src.Errors() {
		got = append(got, fmt.Sprintf("%s %s/%s %s", e.Kind, e.Namespace, e.Name, e.Field))
	}
	want := []string{
		"Service default/bad-ip spec.clusterIP",
		"Service default/bad-port spec.ports.port",
		"Service default/bad-proto spec.ports[0].protocol",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if st := src.Stats(); st.InvalidTotal != 3 || st.Invalid != 3 || st.SkippedValuesTotal != 1 || st.Services != 1 {
		t.Errorf("stats = %+v", st)
	}
	// Reloading the same file does not count the same errors again.
	if _, err := src.Load(); err != nil {
		t.Fatal(err)
	}
	if st := src.Stats(); st.InvalidTotal != 3 || st.SkippedValuesTotal != 1 {
		t.Errorf("InvalidTotal, SkippedValuesTotal = %d, %d after an unchanged reload, want 3, 1", st.InvalidTotal, st.SkippedValuesTotal)
	}

	// The file stops parsing: the last good state stays, the error says why.
	write(t, path, svcYAML("good", "10.96.0.1", "TCP")+"  - : [unclosed\n")
	s, err = src.Load()
	if err == nil || !strings.Contains(err.Error(), "m.yaml") {
		t.Errorf("broken file: err = %v, want one naming the file", err)
	}
	if len(s.Changes) != 0 || len(view(s)) != 1 {
		t.Errorf("broken file changed the state: %v, changes %v", view(s), changes(s))
	}
	// Fixed, with the bad objects gone.
	write(t, path, join(svcYAML("good", "10.96.0.1", "TCP"), sliceYAML("good-1", "good", "10.244.0.1")))
	if _, err := src.Load(); err != nil {
		t.Fatal(err)
	}
	if st := src.Stats(); st.InvalidTotal != 3 || st.Invalid != 0 {
		t.Errorf("stats after fix = %+v", st)
	}
}

// TestWatch drives Run with edits on disk.
func TestWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.yaml")
	write(t, path, join(svcYAML("web", "10.96.0.1", "TCP"), sliceYAML("web-1", "web", "10.244.0.1")))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snaps := make(chan *client.Snapshot, 16)
	done := make(chan error, 1)
	src := New(Config{Path: path, MinInterval: 20 * time.Millisecond})
	go func() { done <- src.Run(ctx, func(s *client.Snapshot) { snaps <- s }) }()
	next := func(what string) *client.Snapshot {
		t.Helper()
		select {
		case s := <-snaps:
			return s
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no snapshot", what)
			return nil
		}
	}
	s := next("start")
	if diff := cmp.Diff([]string{"default/web: 10.244.0.1"}, view(s)); diff != "" {
		t.Fatalf("first snapshot (-want +got):\n%s", diff)
	}

	// An in-place edit: a new endpoint.
	write(t, path, join(svcYAML("web", "10.96.0.1", "TCP"), sliceYAML("web-1", "web", "10.244.0.1", "10.244.0.2")))
	s = next("edit")
	if diff := cmp.Diff([]string{"default/web: 10.244.0.1,10.244.0.2"}, view(s)); diff != "" {
		t.Errorf("after edit (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"default/web"}, changes(s)); diff != "" {
		t.Errorf("changes after edit (-want +got):\n%s", diff)
	}

	// An atomic replace adding a service.
	replace(t, path, join(svcYAML("web", "10.96.0.1", "TCP"), sliceYAML("web-1", "web", "10.244.0.1", "10.244.0.2"),
		svcYAML("api", "10.96.0.2", "UDP")))
	s = next("replace")
	if diff := cmp.Diff([]string{"default/api: ", "default/web: 10.244.0.1,10.244.0.2"}, view(s)); diff != "" {
		t.Errorf("after replace (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"default/api"}, changes(s)); diff != "" {
		t.Errorf("changes after replace (-want +got):\n%s", diff)
	}

	// A broken edit delivers nothing; the fix that follows delivers only
	// the real change.
	write(t, path, "kind: Service\n  bad: [indent\n")
	select {
	case s := <-snaps:
		t.Errorf("snapshot for a broken file: %v", view(s))
	case <-time.After(300 * time.Millisecond):
	}
	write(t, path, join(svcYAML("web", "10.96.0.1", "TCP"), sliceYAML("web-1", "web", "10.244.0.2")))
	s = next("fix")
	if diff := cmp.Diff([]string{"default/web: 10.244.0.2"}, view(s)); diff != "" {
		t.Errorf("after fix (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"default/api", "default/web"}, changes(s)); diff != "" {
		t.Errorf("changes after fix (-want +got):\n%s", diff)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestRunMissingPath(t *testing.T) {
	err := New(Config{Path: filepath.Join(t.TempDir(), "nope")}).Run(context.Background(), func(*client.Snapshot) {})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Run on a missing path: %v", err)
	}
}

// TestExamples loads the repository's example manifests and checks each
// feature they are there to show.
func TestExamples(t *testing.T) {
	src := New(Config{Path: "../../../examples/cluster", NodeName: "node-1"})
	s, err := src.Load()
	if err != nil {
		t.Fatal(err)
	}
	if errs := src.Errors(); len(errs) != 0 {
		t.Fatalf("examples have invalid objects: %v", errs)
	}
	if st := src.Stats(); st != (client.Stats{NotProxied: 3, Services: 9}) {
		t.Errorf("stats = %+v, want 9 services served and 3 left alone", st)
	}
	get := func(ns, name string) *client.ServiceEndpoints {
		t.Helper()
		se := s.Lookup(client.ServiceKey{Namespace: ns, Name: name})
		if se == nil {
			t.Fatalf("%s/%s missing", ns, name)
		}
		return se
	}
	endpoints := func(se *client.ServiceEndpoints) []string {
		var out []string
		for _, e := range se.Endpoints {
			f := ""
			if e.Local {
				f += " local"
			}
			if e.Internal {
				f += " I"
			}
			if e.External {
				f += " E"
			}
			var ips []string
			for _, a := range e.IPs.All() {
				ips = append(ips, a.String())
			}
			out = append(out, strings.Join(ips, ",")+f)
		}
		return out
	}

	web := get("default", "web")
	if diff := cmp.Diff([]string{"10.244.1.11 local I", "10.244.2.11", "10.244.3.11"}, endpoints(web)); diff != "" {
		t.Errorf("web: zone hints for zone-a (-want +got):\n%s", diff)
	}
	if p, ok := web.Endpoints[0].PortFor(web.Service.Ports[0]); !ok || p != 8080 || web.Service.Ports[0].TargetPortName != "http" {
		t.Errorf("web: named port http resolves to %d, %v", p, ok)
	}
	if web.Service.Annotations["proxysinks.io/ipvs-scheduler"] != "wlc" {
		t.Error("web: scheduler annotation lost")
	}
	if !web.Endpoints[2].Terminating || !web.Endpoints[2].Serving || web.Endpoints[2].Ready {
		t.Error("web: terminating endpoint conditions wrong")
	}

	shop := get("shop", "shop")
	if shop.Service.Type != client.NodePort || shop.Service.Ports[0].NodePort != 30080 || len(shop.Endpoints) != 3 {
		t.Errorf("shop: %+v with %d endpoints", shop.Service, len(shop.Endpoints))
	}

	lb := get("ingress-nginx", "ingress").Service
	if lb.Type != client.LoadBalancer || !lb.ExternalTrafficLocal || lb.HealthCheckNodePort != 32456 ||
		len(lb.LoadBalancerSourceRanges) != 2 || fmt.Sprint(lb.LoadBalancerIPs.All()) != "[192.0.2.100]" {
		t.Errorf("ingress: %+v", lb)
	}
	if diff := cmp.Diff([]string{"10.244.1.30 local I E", "10.244.2.30 I"}, endpoints(get("ingress-nginx", "ingress"))); diff != "" {
		t.Errorf("ingress: eTP=Local (-want +got):\n%s", diff)
	}
	if fmt.Sprint(get("default", "legacy-api").Service.ExternalIPs.All()) != "[192.0.2.40]" {
		t.Error("legacy-api: external IP missing")
	}
	if a := get("default", "sessions").Service.SessionAffinity; a == nil || a.TimeoutSeconds != 600 {
		t.Errorf("sessions: affinity %+v", a)
	}
	if diff := cmp.Diff([]string{"10.244.1.42 local I", "10.244.2.42"}, endpoints(get("kube-system", "node-cache"))); diff != "" {
		t.Errorf("node-cache: iTP=Local (-want +got):\n%s", diff)
	}
	if get("telco", "signalling").Service.Ports[0].Protocol != client.SCTP {
		t.Error("signalling: not SCTP")
	}
	dns := get("kube-system", "kube-dns")
	if p, ok := dns.Endpoints[0].PortFor(dns.Service.Ports[0]); !ok || p != 53 || dns.Service.Ports[0].Protocol != client.UDP {
		t.Errorf("kube-dns: dns/UDP resolves to %d, %v", p, ok)
	}
	echo := get("default", "echo")
	if echo.Service.ClusterIPs.Len() != 2 {
		t.Errorf("echo: cluster IPs %v", echo.Service.ClusterIPs.All())
	}
	if diff := cmp.Diff([]string{"10.244.1.50,fd00:10:244:1::50 local I E", "10.244.2.50,fd00:10:244:2::50 I E"}, endpoints(echo)); diff != "" {
		t.Errorf("echo: dual-stack (-want +got):\n%s", diff)
	}
	for _, name := range []string{"db", "payments-api", "mesh-gateway"} {
		if s.Lookup(client.ServiceKey{Namespace: "default", Name: name}) != nil {
			t.Errorf("%s served, want left alone", name)
		}
	}
}

// TestDuplicateAcrossFiles: the later file wins; when it goes away, the
// earlier definition comes back.
func TestDuplicateAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), svcYAML("web", "10.96.0.1", "TCP"))
	write(t, filepath.Join(dir, "b.yaml"), svcYAML("web", "10.96.0.2", "TCP"))
	src := New(Config{Path: dir})
	clusterIP := func() string {
		t.Helper()
		s, err := src.Load()
		if err != nil {
			t.Fatal(err)
		}
		if s.Len() != 1 {
			t.Fatalf("%d services", s.Len())
		}
		return s.Services()[0].Service.ClusterIPs.All()[0].String()
	}
	if got := clusterIP(); got != "10.96.0.2" {
		t.Errorf("cluster IP %s, want the later file's 10.96.0.2", got)
	}
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	if got := clusterIP(); got != "10.96.0.1" {
		t.Errorf("cluster IP %s after the override went away, want 10.96.0.1", got)
	}
}

// TestReparseSkipsUnchangedDocuments: a re-read of a changed file decodes
// only the documents that changed (the others keep their decoded objects);
// a document with an error that moved is decoded again, so that its error
// names its new position.
func TestReparseSkipsUnchangedDocuments(t *testing.T) {
	a, b := svcYAML("a", "10.96.0.1", "TCP"), svcYAML("b", "10.96.0.2", "TCP")
	bad := "apiVersion: v1\nkind: Service\nmetadata:\n  name: bad\nspec:\n  ports:\n  - port: x\n"
	p1, err := parseFile("m.yaml", []byte(join(a, b, bad)), nil)
	docs1, cache := p1.docs, p1.cache
	if err != nil || len(docs1) != 3 {
		t.Fatalf("%d docs, %v", len(docs1), err)
	}
	p2, err := parseFile("m.yaml", []byte(join(a, svcYAML("b", "10.96.0.3", "TCP"), "kind: Other\n", bad)), cache)
	docs2 := p2.docs
	if err != nil || len(docs2) != 3 {
		t.Fatalf("%d docs, %v", len(docs2), err)
	}
	if docs2[0].obj != docs1[0].obj || docs2[0].sum != docs1[0].sum {
		t.Error("unchanged document decoded again")
	}
	if docs2[1].obj == docs1[1].obj || docs2[1].sum == docs1[1].sum {
		t.Error("changed document not decoded again")
	}
	if docs1[2].err == nil || docs2[2].err == nil || docs1[2].err.Source != "m.yaml#2" || docs2[2].err.Source != "m.yaml#3" {
		t.Errorf("moved bad document: errors %v then %v", docs1[2].err, docs2[2].err)
	}

	// Through the source: an edit of one document of a file changes one
	// service, and applied objects are not kept by the cache.
	dir := t.TempDir()
	path := filepath.Join(dir, "m.yaml")
	write(t, path, join(a, sliceYAML("a-1", "a", "10.244.0.1"), b))
	src := New(Config{Path: path})
	if _, err := src.Load(); err != nil {
		t.Fatal(err)
	}
	for _, d := range src.files[path].docs {
		if d.obj != nil {
			t.Errorf("%v still holds its decoded object", d.ref)
		}
	}
	write(t, path, join(a, sliceYAML("a-1", "a", "10.244.0.1", "10.244.0.2"), b))
	s, err := src.Load()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default/a"}, changes(s)); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"default/a: 10.244.0.1,10.244.0.2", "default/b: "}, view(s)); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}
}
