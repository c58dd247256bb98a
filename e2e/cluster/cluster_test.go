package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/proxysinks/proxysinks/e2e/cluster"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// webService is a ClusterIP service selecting app=web, target port named
// "web".
func webService(name, ip string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{
			Selector:  map[string]string{"app": name},
			ClusterIP: ip,
			Ports:     []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("web")}},
		},
	}
}

func webPod(svc, name, node, ip string, notReady bool) cluster.Pod {
	return cluster.Pod{
		Namespace: "default", Name: name, Node: node, IPs: []string{ip},
		Labels:   map[string]string{"app": svc},
		Ports:    []corev1.ContainerPort{{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		NotReady: notReady,
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }

// TestEndpointSlicesFromPods checks the harness: the real EndpointSlice
// controller turns the pods the test creates into EndpointSlices, and
// follows readiness, graceful deletion (terminating) and deletion.
func TestEndpointSlicesFromPods(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	ctx := ctxFor(t, 2*time.Minute)
	must(t, c.CreateNode(ctx, "node-a", "zone-a", "192.168.50.10"))
	if _, err := c.Admin.CoreV1().Services("default").Create(ctx, webService("web", "10.96.1.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	must(t, c.CreatePod(ctx, webPod("web", "a", "node-a", "10.244.0.1", false)))
	must(t, c.CreatePod(ctx, webPod("web", "b", "node-a", "10.244.0.2", true)))
	must(t, c.CreatePod(ctx, webPod("web", "c", "node-a", "10.244.0.3", false)))
	want := func(addrs ...string) func([]discoveryv1.EndpointSlice) bool {
		return func(s []discoveryv1.EndpointSlice) bool {
			return cmp.Equal(sorted(cluster.ReadyAddresses(s)), addrs)
		}
	}
	s, err := c.WaitSlices(ctx, "default", "web", want("10.244.0.1", "10.244.0.3"))
	must(t, err)
	if _, ok := s[0].Annotations[corev1.EndpointsLastChangeTriggerTime]; !ok {
		t.Errorf("slice %s has no trigger-time annotation: %v", s[0].Name, s[0].Annotations)
	}
	if got := *s[0].Ports[0].Port; got != 8080 {
		t.Errorf("slice port %d, want the named target port's 8080", got)
	}
	must(t, c.SetPodReady(ctx, "default", "b", true))
	must(t, c.TerminatePod(ctx, "default", "c"))
	_, err = c.WaitSlices(ctx, "default", "web", want("10.244.0.1", "10.244.0.2", "10.244.0.3(terminating)"))
	must(t, err)
	must(t, c.DeletePod(ctx, "default", "c"))
	must(t, c.SetPodReady(ctx, "default", "a", false))
	_, err = c.WaitSlices(ctx, "default", "web", want("10.244.0.2"))
	must(t, err)
}

// TestRBACMissingVerb checks that the ServiceAccount kubeconfig really is
// limited by the RBAC manifest: without the endpointslices rule the kube
// source never syncs, and applying the shipped manifest lets it sync (the
// other tests run the source and the sinks with the shipped manifest).
func TestRBACMissingVerb(t *testing.T) {
	c := cluster.Start(t, cluster.Options{NoEndpointSliceController: true})
	ctx := ctxFor(t, 2*time.Minute)
	shipped, err := cluster.RBACFile()
	must(t, err)
	b, err := os.ReadFile(shipped)
	must(t, err)
	rule := "  - apiGroups: [\"discovery.k8s.io\"]\n    resources: [\"endpointslices\"]\n    verbs: [\"list\", \"watch\"]\n"
	if !strings.Contains(string(b), rule) {
		t.Fatalf("%s: no endpointslices rule to drop", shipped)
	}
	reduced := filepath.Join(t.TempDir(), "rbac.yaml")
	must(t, os.WriteFile(reduced, []byte(strings.Replace(string(b), rule, "", 1)), 0o644))
	kc, err := c.KubeconfigFor(ctx, reduced, c.Server())
	must(t, err)
	src := startSource(t, kc, "node-a")
	select {
	case s := <-src.snaps:
		t.Fatalf("the source synced without access to endpointslices (%d services)", s.Len())
	case <-time.After(8 * time.Second):
	}
	// The shipped manifest restores the verb; the source recovers on its own.
	_, err = c.KubeconfigFor(ctx, shipped, c.Server())
	must(t, err)
	select {
	case <-src.snaps:
	case <-time.After(90 * time.Second):
		t.Fatal("the source did not sync once the shipped RBAC manifest was applied")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
