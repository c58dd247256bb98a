package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxysinks/proxysinks/client/source/kube"
	"github.com/proxysinks/proxysinks/e2e/cluster"
)

// TestKubeEventsRealAPI records Events the way a sink does (kube.NewRecorder
// over kube.NewAPI's REST clients, with the shipped ServiceAccount's RBAC,
// which allows create and patch): the first Warning on a Service is
// created, the same one again is aggregated into it by a patch of its
// count. The REST event sink's Update, which client-go's recorder does not
// call, replaces an Event (with the admin's rights).
func TestKubeEventsRealAPI(t *testing.T) {
	c := cluster.Start(t, cluster.Options{NoEndpointSliceController: true})
	ctx := ctxFor(t, 2*time.Minute)
	_, err := c.Admin.CoreV1().Services("default").Create(ctx, webService("lb", "10.96.1.3"), metav1.CreateOptions{})
	must(t, err)
	kc, err := c.SinkKubeconfig(ctx, c.Server())
	must(t, err)
	rc, err := kube.RESTConfig(kc)
	must(t, err)
	api, err := kube.NewAPI(rc)
	must(t, err)
	rec, stop := kube.NewRecorder(api, "proxysinks", "node-a")
	defer stop()

	ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: "default", Name: "lb"}
	const msg = "the node's kernel refused SetEntry X: invalid CIDR"
	rec.Event(ref, corev1.EventTypeWarning, "KernelRefused", msg)
	e := waitEvent(ctx, t, c, "the first Event", func(e corev1.Event) bool { return e.Count == 1 })
	if e.Type != corev1.EventTypeWarning || e.Message != msg || e.InvolvedObject.Kind != "Service" || e.InvolvedObject.Name != "lb" ||
		e.Source.Component != "proxysinks" || e.Source.Host != "node-a" {
		t.Errorf("created Event %+v", e)
	}
	rec.Event(ref, corev1.EventTypeWarning, "KernelRefused", msg)
	e = waitEvent(ctx, t, c, "the Event patched to count 2", func(e corev1.Event) bool { return e.Count == 2 })

	adminKC := filepath.Join(t.TempDir(), "admin.kubeconfig")
	must(t, os.WriteFile(adminKC, c.Kubeconfig(c.Server(), c.AdminToken), 0o600))
	arc, err := kube.RESTConfig(adminKC)
	must(t, err)
	admin, err := kube.NewAPI(arc)
	must(t, err)
	e.Message = "replaced"
	if _, err := admin.EventSink().Update(&e); err != nil {
		t.Fatalf("update Event %s: %v", e.Name, err)
	}
	waitEvent(ctx, t, c, "the updated Event", func(e corev1.Event) bool { return e.Message == "replaced" && e.Count == 2 })
}

// waitEvent waits until default holds exactly one Event with reason
// KernelRefused and cond holds for it, and returns it.
func waitEvent(ctx context.Context, t *testing.T, c *cluster.Cluster, what string, cond func(corev1.Event) bool) corev1.Event {
	t.Helper()
	var last []corev1.Event
	for ctx.Err() == nil {
		l, err := c.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=KernelRefused"})
		must(t, err)
		last = l.Items
		if len(l.Items) == 1 && cond(l.Items[0]) {
			return l.Items[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %s; Events: %+v", what, last)
	return corev1.Event{}
}
