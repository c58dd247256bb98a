package node

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kube "github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// TestAPIWriterHost runs on the host (no VM): the real-API mode's
// translation of the cases' manifests, against a real control plane.
// apply itself fails unless the EndpointSlice controller writes, for every
// service, the endpoints of the manifest's slices (ready, serving,
// terminating), so each step below checks the pods, labels and services
// it made.
func TestAPIWriterHost(t *testing.T) {
	if nstest.InVM() {
		t.Skip("a host test: the VM runs no control plane")
	}
	c := kube.Start(t, kube.Options{})
	ips := map[string]string{"10.244.0.2": "pod-a", "10.244.0.3": "pod-b", "fd00:244::2": "pod-a"}
	w := &apiWriter{
		c:         c.Client,
		podName:   func(ip string) (string, bool) { n, ok := ips[ip]; return n, ok },
		nodeAddrs: map[string][]string{"node-1": {nodeAddr.String()}},
		nodes:     map[string]bool{},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ports := []port{{"http", "TCP", 80, 8080, 30084}}
	a := ep{ip: "10.244.0.2", ready: true}
	b := ep{ip: "10.244.0.3", ready: true}
	apply := func(step string, docs ...string) {
		t.Helper()
		if err := w.apply(ctx, docs...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	s := func(typ string) string {
		return svc{name: "chg", typ: typ, clusterIP: "10.96.0.21", ports: ports, lbIP: map[bool]string{true: "203.0.113.20"}[typ == "LoadBalancer"]}.yaml()
	}
	apply("ClusterIP", nodeManifest, s("ClusterIP"), slice("chg", ports, a))
	for _, typ := range []string{"NodePort", "ClusterIP", "ExternalName", "ClusterIP", "LoadBalancer", "ExternalName", "NodePort"} {
		apply(typ, nodeManifest, s(typ), slice("chg", ports, a))
		got, err := c.Admin.CoreV1().Services("default").Get(ctx, "chg", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Spec.Type) != typ {
			t.Fatalf("service type %s, want %s", got.Spec.Type, typ)
		}
		if typ != "ExternalName" && got.Spec.ClusterIP != "10.96.0.21" {
			t.Errorf("%s: cluster IP %s, want 10.96.0.21", typ, got.Spec.ClusterIP)
		}
	}
	// Endpoint replaced, one terminating, one on another node, affinity
	// and eTP=Local: the controller's slices follow each.
	apply("replaced", nodeManifest, s("NodePort"), slice("chg", ports, b))
	apply("terminating", nodeManifest, s("NodePort"), slice("chg", ports, ep{ip: b.ip, terminating: true}, a))
	apply("terminating alone, still serving", nodeManifest, s("NodePort"), slice("chg", ports, ep{ip: b.ip, terminating: true}))
	apply("other node", nodeManifest, svc{name: "chg", typ: "NodePort", clusterIP: "10.96.0.21", ports: ports, affinity: true, etpLocal: true, hcNodePort: 32001}.yaml(),
		slice("chg", ports, ep{ip: a.ip, ready: true, node: "node-2"}))
	// Dual stack: one pod with both families, one slice of each.
	dual := strings.Replace(svc{name: "dual", typ: "ClusterIP", clusterIP: "10.96.0.24", ports: web}.yaml(),
		"clusterIPs: [10.96.0.24]", "clusterIPs: [10.96.0.24, \"fd00:96::24\"]\n  ipFamilies: [IPv4, IPv6]\n  ipFamilyPolicy: RequireDualStack", 1)
	slice6 := strings.Replace(strings.Replace(slice("dual", web, ep{ip: "fd00:244::2", ready: true}), "addressType: IPv4", "addressType: IPv6", 1), "dual-slice", "dual-v6", 1)
	apply("dual stack", nodeManifest, dual, slice("dual", web, a), slice6)
	// Everything gone but the node.
	apply("empty", nodeManifest)
	if l, err := c.Admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("pods left with no endpoint: %v (%v)", l, err)
	}
	// reset leaves the control plane as a fresh case needs it.
	apply("again", nodeManifest, s("NodePort"), slice("chg", ports, a))
	if err := w.reset(ctx); err != nil {
		t.Fatal(err)
	}
	apply("after reset", nodeManifest, s("NodePort"), slice("chg", ports, b))
}
