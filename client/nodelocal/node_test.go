package nodelocal

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxysinks/proxysinks/client"
)

var netipEqual = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

func TestConvertNode(t *testing.T) {
	addr := func(t corev1.NodeAddressType, a string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: t, Address: a}
	}
	for _, tc := range []struct {
		name    string
		spec    corev1.NodeSpec
		addrs   []corev1.NodeAddress
		want    *client.Node
		wantErr string
	}{
		{
			name:  "addresses in order, names left out",
			spec:  corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24", "fd00:1::/64"}},
			addrs: []corev1.NodeAddress{addr(corev1.NodeExternalIP, "203.0.113.5"), addr(corev1.NodeHostName, "n"), addr(corev1.NodeInternalIP, "::ffff:10.0.0.1"), addr(corev1.NodeInternalDNS, "n.local")},
			want: &client.Node{Name: "n", Addresses: []client.NodeAddress{
				{Type: client.NodeExternalIP, Addr: netip.MustParseAddr("203.0.113.5")},
				{Type: client.NodeInternalIP, Addr: netip.MustParseAddr("10.0.0.1")},
			}, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:1::/64")}},
		},
		{
			name: "podCIDR alone",
			spec: corev1.NodeSpec{PodCIDR: "10.244.1.7/24"},
			want: &client.Node{Name: "n", PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}},
		},
		{
			name:    "a bad address and a bad CIDR are left out",
			spec:    corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "nope"}},
			addrs:   []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.999"), addr(corev1.NodeInternalIP, "10.0.0.2")},
			want:    &client.Node{Name: "n", Addresses: []client.NodeAddress{{Type: client.NodeInternalIP, Addr: netip.MustParseAddr("10.0.0.2")}}, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}},
			wantErr: `Node n: status.addresses[0].address: invalid IP "10.0.0.999"` + "\n" + `spec.podCIDRs[1]: invalid CIDR "nope" (skipped; the other addresses and CIDRs are kept)`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConvertNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: tc.spec, Status: corev1.NodeStatus{Addresses: tc.addrs}})
			if diff := cmp.Diff(tc.want, got, netipEqual); diff != "" {
				t.Errorf("node (-want +got):\n%s", diff)
			}
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("error %q, want %q", gotErr, tc.wantErr)
			}
		})
	}
}

// TestStateFacts: the node's facts and the service CIDRs reach the
// snapshots only when asked for; their changes mark the state dirty and
// the next snapshot changed, without recomputing a service.
func TestStateFacts(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}}}
	cidr := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16"}}}

	st := NewState(Config{NodeName: "node-1"})
	_ = st.SetService(service("default", "web"))
	st.SetNode(n)
	_ = st.SetServiceCIDR(cidr)
	if s := st.Snapshot(); s.Node != nil || s.ServiceCIDRs != nil {
		t.Errorf("not asked: Node %v, ServiceCIDRs %v", s.Node, s.ServiceCIDRs)
	}

	st = NewState(Config{NodeName: "node-1", Needs: client.Needs{Node: true, ServiceCIDRs: true}})
	_ = st.SetService(service("default", "web"))
	st.SetNode(n)
	_ = st.SetServiceCIDR(cidr)
	s := st.Snapshot()
	if s.Node == nil || len(s.ServiceCIDRs) != 1 || !st.Changed() {
		t.Fatalf("asked: Node %v, ServiceCIDRs %v, changed %v", s.Node, s.ServiceCIDRs, st.Changed())
	}
	steps := []struct {
		name        string
		do          func()
		wantChanged bool
	}{
		{"same node", func() { st.SetNode(n.DeepCopy()) }, false},
		{"other node", func() {
			o := n.DeepCopy()
			o.Name, o.Spec.PodCIDRs = "node-2", []string{"10.244.2.0/24"}
			st.SetNode(o)
		}, false},
		{"pod CIDR", func() {
			o := n.DeepCopy()
			o.Spec.PodCIDRs = []string{"10.244.3.0/24"}
			st.SetNode(o)
		}, true},
		{"same ServiceCIDR", func() { _ = st.SetServiceCIDR(cidr.DeepCopy()) }, false},
		{"ServiceCIDR removed", func() { st.DeleteServiceCIDR("kubernetes") }, true},
		{"unknown ServiceCIDR removed", func() { st.DeleteServiceCIDR("kubernetes") }, false},
		{"node removed", func() { st.DeleteNode("node-1") }, true},
	}
	for _, step := range steps {
		step.do()
		if st.Dirty() != step.wantChanged {
			t.Errorf("%s: Dirty %v, want %v", step.name, st.Dirty(), step.wantChanged)
		}
		s := st.Snapshot()
		if st.Changed() != step.wantChanged || len(s.Changes) != 0 {
			t.Errorf("%s: Changed %v, want %v; %d service changes", step.name, st.Changed(), step.wantChanged, len(s.Changes))
		}
	}
	if s := st.Snapshot(); s.Node != nil || s.ServiceCIDRs != nil {
		t.Errorf("after removals: Node %v, ServiceCIDRs %v", s.Node, s.ServiceCIDRs)
	}
}
