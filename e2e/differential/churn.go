package differential

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// RunChurn is the differential of mode m (a mode with a host kernel
// reader) after changes: kube-proxy and each sink of m run side by side,
// each on a fresh node of this host, on the broad cluster and the mode's
// shapes; once every one is stable, the cluster changes (Churn) and the
// states they settle in are compared as Run compares them (a subtest
// per sink), against m.Differences. It checks the sinks' incremental
// writes where Run sees only a first sync.
func RunChurn(t *testing.T, m Mode) {
	if m.host == nil {
		t.Fatalf("mode %s has no host kernel reader: RunChurn runs on this host only", m.Name)
	}
	e, intended := start(t, m, m.Differences, cluster.Options{}, func(t *testing.T, ctx context.Context, c *cluster.Cluster) {
		cluster.Broad(t, ctx, c)
		cluster.CreateShapes(t, ctx, c, m.Shapes())
	})
	bins := buildSinks(t, m)
	s := Setting{NodePortAddresses: cluster.BroadNodeCIDR}
	type proxy struct {
		name string
		ns   *nstest.NetNS
		p    *process
		cap  Capture
	}
	kube := filepath.Join(cluster.Require(t), "kube-proxy")
	proxies := []*proxy{{name: "kube-proxy"}}
	proxies[0].ns = hostNode(e, *m.host)
	proxies[0].p = startIn(t, proxies[0].ns, kube, kubeProxyArgs(e, m, s)...)
	for _, sink := range m.Sinks {
		if bins[sink] == "" {
			t.Logf("sink %s not built: sinks/%s/main.go is not in this tree yet", sink, sink)
			continue
		}
		px := &proxy{name: sink, ns: hostNode(e, *m.host)}
		px.p = startIn(t, px.ns, bins[sink], sinkArgs(e, m, s)...)
		proxies = append(proxies, px)
	}
	for _, px := range proxies {
		defer px.p.stop()
		px.cap = settle(e, *m.host, px.ns, px.p, px.name, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	Churn(t, ctx, e.Cluster)
	for _, px := range proxies {
		px.cap = settle(e, *m.host, px.ns, px.p, px.name, px.cap.State)
		delete(px.cap.State, cluster.SectionErrors)
	}
	for _, px := range proxies[1:] {
		t.Run(px.name+"-churn", func(t *testing.T) {
			compare(t, m, px.name, proxies[0].cap, px.cap, func(sink string, diffs []cluster.Difference) ([]cluster.Difference, []cluster.Intended) {
				return cluster.Unexplained(sink, diffs, intended)
			})
		})
	}
	if len(proxies) == 1 {
		t.Skipf("no sink of mode %s in this tree: only kube-proxy's captures ran", m.Name)
	}
}

// Churn changes the broad cluster (cluster.Broad): service np deleted,
// aff's session affinity dropped, lb's source ranges narrowed, itp's
// internal traffic policy back to Cluster, web's endpoint web-a deleted,
// and a NodePort service churn-new with an endpoint on each node added;
// it returns once the EndpointSlice controller has written web's and
// churn-new's endpoints.
func Churn(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	svcs := c.Admin.CoreV1().Services("default")
	if err := svcs.Delete(ctx, "np", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cluster.CreateShapes(t, ctx, c, []cluster.Shape{{Name: "churn-new",
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.13.1", Ports: httpPorts(30099)},
		Pods: []cluster.ShapePod{{Name: "churn-new-a", Node: cluster.BroadNode, IPs: []string{"10.244.0.50"}},
			{Name: "churn-new-b", Node: "node-b", IPs: []string{"10.244.1.50"}}}}})
	for name, change := range map[string]func(*corev1.ServiceSpec){
		"aff": func(s *corev1.ServiceSpec) {
			s.SessionAffinity, s.SessionAffinityConfig = corev1.ServiceAffinityNone, nil
		},
		"lb":  func(s *corev1.ServiceSpec) { s.LoadBalancerSourceRanges = []string{"203.0.113.0/24"} },
		"itp": func(s *corev1.ServiceSpec) { s.InternalTrafficPolicy = nil },
	} {
		svc, err := svcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(&svc.Spec)
		if _, err := svcs.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update service %s: %v", name, err)
		}
	}
	if err := c.DeletePod(ctx, "default", "web-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitSlices(ctx, "default", "web", func(s []discoveryv1.EndpointSlice) bool {
		return !slices.Contains(cluster.ReadyAddresses(s), "10.244.0.10")
	}); err != nil {
		t.Fatal(err)
	}
}
