package cluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BroadNode is the node the proxies of the differential tests run as,
// BroadNodeIP its address and BroadNodeCIDR its network (the proxies'
// --nodeport-addresses).
const (
	BroadNode     = "node-a"
	BroadNodeIP   = "192.168.50.10"
	BroadNodeCIDR = "192.168.50.0/24"
)

// Broad creates the broad cluster of the kube-proxy differential tests:
// BroadNode and another node, and BroadShapes.
func Broad(t testing.TB, ctx context.Context, c *Cluster) {
	t.Helper()
	BroadNodes(t, ctx, c)
	CreateShapes(t, ctx, c, BroadShapes())
}

// BroadNodes creates BroadNode (zone-a) and node-b (zone-b, 192.168.50.11).
func BroadNodes(t testing.TB, ctx context.Context, c *Cluster) {
	t.Helper()
	for _, n := range []struct{ name, zone, addr string }{{BroadNode, "zone-a", BroadNodeIP}, {"node-b", "zone-b", "192.168.50.11"}} {
		if err := c.CreateNode(ctx, n.name, n.zone, n.addr); err != nil {
			t.Fatal(err)
		}
	}
}

// BroadShapes are every service shape the sinks handle (ClusterIP with
// named and numbered target ports, NodePort TCP+UDP with an ExternalIP,
// LoadBalancer with an ingress IP, source ranges and
// externalTrafficPolicy=Local, NodePort eTP=Local with an ExternalIP,
// internalTrafficPolicy=Local, ClientIP affinity, dual stack, SCTP
// NodePort, headless and ExternalName), with the pods behind them on
// BroadNode and node-b (ready, not ready, terminating).
func BroadShapes() []Shape {
	tcp := func(name string, port int32, target intstr.IntOrString, nodePort int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port, TargetPort: target, NodePort: nodePort}
	}
	http := func(nodePort int32) []corev1.ServicePort {
		return []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), nodePort)}
	}
	local := corev1.ServiceExternalTrafficPolicyLocal
	iLocal := corev1.ServiceInternalTrafficPolicyLocal
	dual := corev1.IPFamilyPolicyRequireDualStack
	timeout := int32(600)
	a := func(name, ip string, more ...string) ShapePod {
		return ShapePod{Name: name, Node: BroadNode, IPs: append([]string{ip}, more...)}
	}
	b := func(name, ip string, more ...string) ShapePod {
		return ShapePod{Name: name, Node: "node-b", IPs: append([]string{ip}, more...)}
	}
	notReady, terminating := b("web-c", "10.244.1.11"), a("web-d", "10.244.0.11")
	notReady.NotReady, terminating.Terminating = true, true
	return []Shape{
		{Name: "web", Spec: corev1.ServiceSpec{ClusterIP: "10.96.10.1", Ports: []corev1.ServicePort{
			tcp("http", 80, intstr.FromString("http"), 0), tcp("https", 443, intstr.FromInt32(8443), 0)}},
			Pods: []ShapePod{a("web-a", "10.244.0.10"), b("web-b", "10.244.1.10"), notReady, terminating}},
		{Name: "np", Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.10.2", ExternalIPs: []string{"192.0.2.10"},
			Ports: []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 30080),
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromString("dns"), NodePort: 30053}}},
			Pods: []ShapePod{a("np-a", "10.244.0.12"), b("np-b", "10.244.1.12")}},
		// A /32 source range is left out: kube-proxy's entry for one
		// (198.51.100.7/32) was present in one run and absent in the
		// next, so it cannot serve as a reference.
		{Name: "lb", Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.10.3", ExternalTrafficPolicy: local,
			HealthCheckNodePort: 32000, LoadBalancerSourceRanges: []string{"203.0.113.0/24", "198.51.100.0/25"}, Ports: http(30081)},
			Ingress: "192.0.2.20", Pods: []ShapePod{a("lb-a", "10.244.0.13"), b("lb-b", "10.244.1.13")}},
		{Name: "np-local", Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.10.4", ExternalTrafficPolicy: local,
			ExternalIPs: []string{"192.0.2.30"}, Ports: http(30082)},
			Pods: []ShapePod{b("np-local-b", "10.244.1.14")}},
		{Name: "itp", Spec: corev1.ServiceSpec{ClusterIP: "10.96.10.5", InternalTrafficPolicy: &iLocal, Ports: http(0)},
			Pods: []ShapePod{a("itp-a", "10.244.0.15"), b("itp-b", "10.244.1.15")}},
		{Name: "aff", Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.10.6",
			SessionAffinity:       corev1.ServiceAffinityClientIP,
			SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}},
			Ports:                 http(30083)},
			Pods: []ShapePod{b("aff-b", "10.244.1.16")}},
		{Name: "dual", Spec: corev1.ServiceSpec{ClusterIP: "10.96.10.7", ClusterIPs: []string{"10.96.10.7", "fd00:96::7"}, IPFamilyPolicy: &dual,
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, Ports: http(0)},
			Pods: []ShapePod{a("dual-a", "10.244.0.17", "fd00:244::17"), b("dual-b", "10.244.1.17", "fd00:244:1::17")}},
		{Name: "sctp", Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.10.8",
			Ports: []corev1.ServicePort{{Name: "sctp", Protocol: corev1.ProtocolSCTP, Port: 2905, TargetPort: intstr.FromString("sctp"), NodePort: 30084}}},
			Pods: []ShapePod{b("sctp-b", "10.244.1.18")}},
		{Name: "headless", Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: http(0)},
			Pods: []ShapePod{b("headless-b", "10.244.1.19")}},
		{Name: "extname", Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}},
	}
}
