package kube

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/proxysinks/proxysinks/client"
)

var prefixEqual = cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })

// nodeWith is node-a with an InternalIP, a Hostname and an ExternalIP, and
// the given pod CIDRs.
func nodeWith(internal string, podCIDRs ...string) *corev1.Node {
	n := node("node-a", "zone-a")
	n.Spec.PodCIDRs = podCIDRs
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: internal},
		{Type: corev1.NodeHostName, Address: "node-a"},
		{Type: corev1.NodeExternalIP, Address: "2001:db8::1"},
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

func serviceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// watchedResources lists the resources the source listed or watched.
func watchedResources(cs *fake.Clientset) map[string]bool {
	out := map[string]bool{}
	for _, a := range cs.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			out[a.GetResource().Resource] = true
		}
	}
	return out
}

func TestNeedsNotAsked(t *testing.T) {
	h := start(t, Config{NodeName: "node-a", MinInterval: 10 * time.Millisecond},
		nodeWith("192.0.2.10", "10.244.1.0/24"), serviceCIDR("kubernetes", "10.96.0.0/16"), service("api", "10.96.0.2"))
	s := h.next("start")
	if s.Node != nil || s.ServiceCIDRs != nil {
		t.Errorf("not asked, but the snapshot has Node %v, ServiceCIDRs %v", s.Node, s.ServiceCIDRs)
	}
	if got := watchedResources(h.cs); got["servicecidrs"] || !got["nodes"] {
		t.Errorf("listed or watched %v: want nodes, and no servicecidrs", got)
	}
	// An address change is nothing to this sink.
	n := nodeWith("192.0.2.11", "10.244.1.0/24")
	n.ResourceVersion = "2"
	if _, err := h.cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.quiet("address change, not asked", 200*time.Millisecond)
}

// TestTrimNode: the Node cache keeps the addresses and pod CIDRs only when
// asked for them.
func TestTrimNode(t *testing.T) {
	n := nodeWith("192.0.2.10", "10.244.1.0/24")
	n.Spec.PodCIDR = "10.244.1.0/24"
	n.Spec.ProviderID = "cloud://x"
	for _, tc := range []struct {
		facts bool
		want  *corev1.Node
	}{
		{facts: false, want: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: n.Labels}}},
		{facts: true, want: &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: n.Labels},
			Spec:       corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "192.0.2.10"},
				{Type: corev1.NodeExternalIP, Address: "2001:db8::1"},
			}},
		}},
	} {
		if diff := cmp.Diff(tc.want, trimNode(n, tc.facts)); diff != "" {
			t.Errorf("trimNode(facts=%v) (-want +got):\n%s", tc.facts, diff)
		}
	}
}

func TestNeedsNode(t *testing.T) {
	ctx := context.Background()
	h := start(t, Config{NodeName: "node-a", MinInterval: 10 * time.Millisecond, Needs: client.Needs{Node: true}},
		nodeWith("192.0.2.10", "10.244.1.0/24", "fd00:10:244:1::/64"), service("api", "10.96.0.2"))
	s := h.next("start")
	want := &client.Node{
		Name: "node-a",
		Addresses: []client.NodeAddress{
			{Type: client.NodeInternalIP, Addr: netip.MustParseAddr("192.0.2.10")},
			{Type: client.NodeExternalIP, Addr: netip.MustParseAddr("2001:db8::1")},
		},
		PodCIDRs: prefixes("10.244.1.0/24", "fd00:10:244:1::/64"),
	}
	if !want.Equal(s.Node) {
		t.Fatalf("first snapshot: Node %+v, want %+v", s.Node, want)
	}
	if s.ServiceCIDRs != nil || watchedResources(h.cs)["servicecidrs"] {
		t.Errorf("ServiceCIDRs not asked, but %v (watched %v)", s.ServiceCIDRs, watchedResources(h.cs))
	}

	update := func(n *corev1.Node, version string) {
		t.Helper()
		n.ResourceVersion = version
		if _, err := h.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A condition changes: nothing a sink sees.
	n := nodeWith("192.0.2.10", "10.244.1.0/24", "fd00:10:244:1::/64")
	n.Status.Conditions[0].Status = corev1.ConditionFalse
	update(n, "2")
	h.quiet("condition change", 200*time.Millisecond)

	update(nodeWith("192.0.2.11", "10.244.1.0/24", "fd00:10:244:1::/64"), "3")
	s = h.next("address change")
	if got := s.Node.IPs(client.NodeInternalIP); len(got) != 1 || got[0] != netip.MustParseAddr("192.0.2.11") {
		t.Errorf("after the address change: internal IPs %v", got)
	}
	if len(s.Changes) != 0 {
		t.Errorf("after the address change: %d service changes", len(s.Changes))
	}

	update(nodeWith("192.0.2.11", "10.244.2.0/24"), "4")
	s = h.next("pod CIDR change")
	if diff := cmp.Diff(prefixes("10.244.2.0/24"), s.Node.PodCIDRs, prefixEqual); diff != "" {
		t.Errorf("after the pod CIDR change (-want +got):\n%s", diff)
	}

	// A bad address is left out and reported; the others are kept.
	update(nodeWith("192.0.2.999", "10.244.2.0/24"), "5")
	s = h.next("bad address")
	if got := s.Node.IPs(client.NodeInternalIP); len(got) != 0 {
		t.Errorf("after the bad address: internal IPs %v", got)
	}
	if got := s.Node.IPs(client.NodeExternalIP); len(got) != 1 {
		t.Errorf("after the bad address: external IPs %v", got)
	}
	if errs := h.src.Errors(); len(errs) != 1 || errs[0].Field != "status.addresses[0].address" {
		t.Errorf("after the bad address: errors %v", errs)
	}

	if err := h.cs.CoreV1().Nodes().Delete(ctx, "node-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s = h.next("node deleted")
	if s.Node != nil {
		t.Errorf("after the deletion: Node %+v", s.Node)
	}
	if errs := h.src.Errors(); len(errs) != 0 {
		t.Errorf("after the deletion: errors %v", errs)
	}
}

func TestNeedsServiceCIDRs(t *testing.T) {
	ctx := context.Background()
	h := start(t, Config{NodeName: "node-a", MinInterval: 10 * time.Millisecond, Needs: client.Needs{ServiceCIDRs: true}},
		nodeWith("192.0.2.10", "10.244.1.0/24"), service("api", "10.96.0.2"),
		serviceCIDR("kubernetes", "10.96.0.0/16", "fd00:10:96::/112"), serviceCIDR("extra", "10.100.0.0/16", "10.96.0.0/16"))
	s := h.next("start")
	if diff := cmp.Diff(prefixes("10.96.0.0/16", "10.100.0.0/16", "fd00:10:96::/112"), s.ServiceCIDRs, prefixEqual); diff != "" {
		t.Errorf("first snapshot (-want +got):\n%s", diff)
	}
	if s.Node != nil {
		t.Errorf("Node not asked, but %+v", s.Node)
	}
	cidrs := h.cs.NetworkingV1().ServiceCIDRs()
	if _, err := cidrs.Create(ctx, serviceCIDR("more", "10.200.0.0/16", "bad"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = h.next("created")
	if diff := cmp.Diff(prefixes("10.96.0.0/16", "10.100.0.0/16", "10.200.0.0/16", "fd00:10:96::/112"), s.ServiceCIDRs, prefixEqual); diff != "" {
		t.Errorf("after a creation (-want +got):\n%s", diff)
	}
	if len(s.Changes) != 0 {
		t.Errorf("after a creation: %d service changes", len(s.Changes))
	}
	if errs := h.src.Errors(); len(errs) != 1 || errs[0].Kind != "ServiceCIDR" || errs[0].Field != "spec.cidrs[1]" {
		t.Errorf("after a creation: errors %v", errs)
	}
	// A duplicate prefix goes: nothing changes.
	if err := cidrs.Delete(ctx, "extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s = h.next("deleted")
	if diff := cmp.Diff(prefixes("10.96.0.0/16", "10.200.0.0/16", "fd00:10:96::/112"), s.ServiceCIDRs, prefixEqual); diff != "" {
		t.Errorf("after a deletion (-want +got):\n%s", diff)
	}
	if _, err := cidrs.Create(ctx, serviceCIDR("again", "10.96.0.0/16"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.quiet("a known prefix", 200*time.Millisecond)
}

// TestNeedsForbidden: a ServiceCIDR list the API refuses (a ClusterRole
// without the verb) holds the first snapshot back, as a refused list of
// Services or EndpointSlices does.
func TestNeedsForbidden(t *testing.T) {
	for _, resource := range []string{"services", "endpointslices", "servicecidrs"} {
		t.Run(resource, func(t *testing.T) {
			cs := fake.NewClientset(service("api", "10.96.0.2"), serviceCIDR("kubernetes", "10.96.0.0/16"))
			cs.PrependReactor("list", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", nil)
			})
			h := startClient(t, cs, Config{MinInterval: 10 * time.Millisecond, Needs: client.Needs{ServiceCIDRs: true}})
			h.quiet("list refused", 300*time.Millisecond)
			if st := h.src.Stats(); !st.Stale {
				t.Errorf("list refused: Stats %+v, want Stale", st)
			}
		})
	}
}
