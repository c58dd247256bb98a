package cluster_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/nodelocal"
	"github.com/proxysinks/proxysinks/client/source/kube"
	"github.com/proxysinks/proxysinks/e2e/cluster"
)

// runningSource is the kube source running in the test process.
type runningSource struct {
	src   *kube.Source
	snaps chan *client.Snapshot
	done  chan error
}

// startSource runs the kube source with the kubeconfig until the test ends;
// its snapshots arrive on snaps.
func startSource(t *testing.T, kubeconfig, node string) *runningSource {
	t.Helper()
	src, err := kube.NewForConfig(kubeconfig, kube.Config{
		NodeName: node, MinInterval: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningSource{src: src, snaps: make(chan *client.Snapshot, 100), done: make(chan error, 1)}
	go func() { r.done <- src.Run(ctx, func(s *client.Snapshot) { r.snaps <- s }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("kube source: %v", err)
		}
	})
	return r
}

// tlog sends log lines to t.Log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// view renders a snapshot as "ns/name: ip[L] ..." lines (L: local
// endpoint), endpoints sorted.
func view(s *client.Snapshot) []string {
	var out []string
	for se := range s.All() {
		var eps []string
		for _, e := range se.Endpoints {
			if !e.Internal {
				continue
			}
			ep := e.IPs.All()[0].String()
			if e.Local {
				ep += "L"
			}
			eps = append(eps, ep)
		}
		slices.Sort(eps)
		out = append(out, strings.TrimSpace(se.Service.Key().String()+": "+strings.Join(eps, " ")))
	}
	return out
}

// next waits for the next snapshot for which cond holds, failing the test
// after d; every snapshot seen on the way is checked by each.
func (r *runningSource) next(t *testing.T, d time.Duration, what string, cond func(*client.Snapshot) bool) *client.Snapshot {
	t.Helper()
	timeout := time.After(d)
	var last []string
	for {
		select {
		case s := <-r.snaps:
			last = view(s)
			if cond(s) {
				return s
			}
		case <-timeout:
			t.Fatalf("no snapshot with %s after %s; last: %q", what, d, last)
		}
	}
}

// quiet fails if a snapshot with changes arrives within d.
func (r *runningSource) quiet(t *testing.T, d time.Duration, why string) {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case s := <-r.snaps:
			if len(s.Changes) > 0 {
				t.Fatalf("%s: unexpected snapshot with %d changes: %q", why, len(s.Changes), view(s))
			}
		case <-timeout:
			return
		}
	}
}

func hasView(want ...string) func(*client.Snapshot) bool {
	return func(s *client.Snapshot) bool { return cmp.Equal(view(s), want) }
}

// TestKubeSourceRealAPI runs the kube source, with the shipped
// ServiceAccount's kubeconfig, against the real control plane: real
// EndpointSlices from the real controller, trigger times from their
// annotations; then the source loses the apiserver while objects change,
// etcd is compacted and the apiserver restarts (so the source's resource
// version is older than any history the apiserver has: its watches expire
// with 410 Gone and it must relist): it keeps its state meanwhile and
// catches up with the additions and deletions it missed.
func TestKubeSourceRealAPI(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	ctx := ctxFor(t, 5*time.Minute)
	must(t, c.CreateNode(ctx, "node-a", "zone-a", "192.168.50.10"))
	must(t, c.CreateNode(ctx, "node-b", "zone-b", "192.168.50.11"))
	_, err := c.Admin.CoreV1().Services("default").Create(ctx, webService("web", "10.96.1.1"), metav1.CreateOptions{})
	must(t, err)
	must(t, c.CreatePod(ctx, webPod("web", "a", "node-a", "10.244.0.1", false)))
	must(t, c.CreatePod(ctx, webPod("web", "b", "node-b", "10.244.1.1", false)))
	_, err = c.WaitSlices(ctx, "default", "web", func(s []discoveryv1.EndpointSlice) bool { return len(cluster.ReadyAddresses(s)) == 2 })
	must(t, err)

	rl := newRelay(t, c.Server()[len("https://"):])
	kc, err := c.SinkKubeconfig(ctx, rl.Server())
	must(t, err)
	src := startSource(t, kc, "node-a")
	// The apiserver's own "kubernetes" service has no endpoints
	// (--endpoint-reconciler-type=none).
	src.next(t, time.Minute, "web's two endpoints", hasView("default/kubernetes:", "default/web: 10.244.0.1L 10.244.1.1"))

	// A new ready pod: the change carries the slice's trigger time. The
	// annotation has second precision, and the source ignores trigger
	// times not after its start (as kube-proxy does): let a second pass.
	time.Sleep(1500 * time.Millisecond)
	start := time.Now().Add(-time.Second)
	must(t, c.CreatePod(ctx, webPod("web", "c", "node-a", "10.244.0.2", false)))
	s := src.next(t, time.Minute, "pod c", hasView("default/kubernetes:", "default/web: 10.244.0.1L 10.244.0.2L 10.244.1.1"))
	if len(s.Changes) != 1 || s.Changes[0].Key.Name != "web" {
		t.Fatalf("changes %+v, want web only", s.Changes)
	}
	sl, err := c.WaitSlices(ctx, "default", "web", func(s []discoveryv1.EndpointSlice) bool { return len(cluster.ReadyAddresses(s)) == 3 })
	must(t, err)
	ann := sl[0].Annotations[nodelocal.AnnotationTriggerTime]
	tt, err := time.Parse(time.RFC3339, ann)
	if err != nil {
		t.Fatalf("slice %s: trigger time %q: %v", sl[0].Name, ann, err)
	}
	if got := s.Changes[0].TriggerTime; !got.Equal(tt) || got.Before(start) {
		t.Errorf("Change.TriggerTime = %v, want the slice's annotation %v (after %v)", got, tt, start)
	}

	// Nothing changes: nothing is delivered.
	src.quiet(t, 3*time.Second, "nothing changed")
	must(t, c.SetPodReady(ctx, "default", "b", false))
	src.next(t, time.Minute, "pod b not ready", hasView("default/kubernetes:", "default/web: 10.244.0.1L 10.244.0.2L"))

	// The source loses the apiserver; meanwhile a service goes, another
	// comes, a pod goes; etcd is compacted and the apiserver restarts.
	rl.setCut(true)
	must(t, c.Admin.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}))
	_, err = c.Admin.CoreV1().Services("default").Create(ctx, webService("api", "10.96.1.2"), metav1.CreateOptions{})
	must(t, err)
	must(t, c.CreatePod(ctx, webPod("api", "d", "node-b", "10.244.1.2", false)))
	_, err = c.WaitSlices(ctx, "default", "api", func(s []discoveryv1.EndpointSlice) bool { return len(cluster.ReadyAddresses(s)) == 1 })
	must(t, err)
	c.StopAPIServer()
	rev, err := c.CompactEtcd(ctx)
	must(t, err)
	t.Logf("etcd compacted at revision %d", rev)
	c.StartAPIServer()
	src.quiet(t, 2*time.Second, "apiserver unreachable")
	rl.setCut(false)
	src.next(t, 2*time.Minute, "web gone and api there after the gap", hasView("default/api: 10.244.1.2", "default/kubernetes:"))
	src.quiet(t, 3*time.Second, "caught up")
	if errs := src.src.Errors(); len(errs) > 0 {
		t.Errorf("source reports invalid objects: %v", errs)
	}
}

// TestKubeSourceBeforeAPIServer starts the source while the apiserver is
// down: it waits, and delivers its first snapshot once the apiserver is up.
func TestKubeSourceBeforeAPIServer(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	ctx := ctxFor(t, 3*time.Minute)
	must(t, c.CreateNode(ctx, "node-a", "", "192.168.50.10"))
	must(t, c.CreateNode(ctx, "node-b", "", "192.168.50.11"))
	_, err := c.Admin.CoreV1().Services("default").Create(ctx, webService("web", "10.96.1.1"), metav1.CreateOptions{})
	must(t, err)
	must(t, c.CreatePod(ctx, webPod("web", "a", "node-a", "10.244.0.1", false)))
	_, err = c.WaitSlices(ctx, "default", "web", func(s []discoveryv1.EndpointSlice) bool { return len(cluster.ReadyAddresses(s)) == 1 })
	must(t, err)
	kc, err := c.SinkKubeconfig(ctx, c.Server())
	must(t, err)

	c.StopAPIServer()
	src := startSource(t, kc, "node-a")
	select {
	case s := <-src.snaps:
		t.Fatalf("a snapshot without an apiserver: %q", view(s))
	case <-time.After(5 * time.Second):
	}
	c.StartAPIServer()
	src.next(t, 2*time.Minute, "web once the apiserver is up", hasView("default/kubernetes:", "default/web: 10.244.0.1L"))
}
