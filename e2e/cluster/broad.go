package cluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// every service shape the sinks handle (ClusterIP with named and numbered
// target ports, NodePort TCP+UDP with an ExternalIP, LoadBalancer with an
// ingress IP, source ranges and externalTrafficPolicy=Local, NodePort
// eTP=Local with an ExternalIP, internalTrafficPolicy=Local, ClientIP
// affinity, dual stack, SCTP NodePort, headless and ExternalName), the
// pods behind them on BroadNode and another node (ready, not ready,
// terminating), and waits for the EndpointSlices.
func Broad(t testing.TB, ctx context.Context, c *Cluster) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.CreateNode(ctx, BroadNode, "zone-a", BroadNodeIP))
	must(c.CreateNode(ctx, "node-b", "zone-b", "192.168.50.11"))
	tcp := func(name string, port int32, target intstr.IntOrString, nodePort int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port, TargetPort: target, NodePort: nodePort}
	}
	local := corev1.ServiceExternalTrafficPolicyLocal
	iLocal := corev1.ServiceInternalTrafficPolicyLocal
	dual := corev1.IPFamilyPolicyRequireDualStack
	timeout := int32(600)
	svc := func(name string, spec corev1.ServiceSpec) *corev1.Service {
		if spec.Selector == nil && spec.Type != corev1.ServiceTypeExternalName {
			spec.Selector = map[string]string{"app": name}
		}
		if spec.ClusterIP != "" && spec.ClusterIP != corev1.ClusterIPNone && len(spec.ClusterIPs) == 0 {
			spec.ClusterIPs = []string{spec.ClusterIP}
		}
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: spec}
	}
	services := []*corev1.Service{
		svc("web", corev1.ServiceSpec{ClusterIP: "10.96.10.1", Ports: []corev1.ServicePort{
			tcp("http", 80, intstr.FromString("http"), 0), tcp("https", 443, intstr.FromInt32(8443), 0)}}),
		svc("np", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.10.2", ExternalIPs: []string{"192.0.2.10"},
			Ports: []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 30080),
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromString("dns"), NodePort: 30053}}}),
		// A /32 source range is left out: kube-proxy's entry for one
		// (198.51.100.7/32) was present in one run and absent in the
		// next, so it cannot serve as a reference.
		svc("lb", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.10.3", ExternalTrafficPolicy: local,
			HealthCheckNodePort: 32000, LoadBalancerSourceRanges: []string{"203.0.113.0/24", "198.51.100.0/25"},
			Ports: []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 30081)}}),
		svc("np-local", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.10.4", ExternalTrafficPolicy: local,
			ExternalIPs: []string{"192.0.2.30"}, Ports: []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 30082)}}),
		svc("itp", corev1.ServiceSpec{ClusterIP: "10.96.10.5", InternalTrafficPolicy: &iLocal,
			Ports: []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 0)}}),
		svc("aff", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.10.6",
			SessionAffinity:       corev1.ServiceAffinityClientIP,
			SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}},
			Ports:                 []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 30083)}}),
		svc("dual", corev1.ServiceSpec{ClusterIP: "10.96.10.7", ClusterIPs: []string{"10.96.10.7", "fd00:96::7"}, IPFamilyPolicy: &dual,
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports:      []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 0)}}),
		svc("sctp", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.10.8",
			Ports: []corev1.ServicePort{{Name: "sctp", Protocol: corev1.ProtocolSCTP, Port: 2905, TargetPort: intstr.FromString("sctp"), NodePort: 30084}}}),
		svc("headless", corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 0)}}),
		svc("extname", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}),
	}
	for _, s := range services {
		o, err := c.Admin.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create service %s: %v", s.Name, err)
		}
		if s.Name == "lb" {
			o.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.20"}}
			if _, err := c.Admin.CoreV1().Services("default").UpdateStatus(ctx, o, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("set the ingress IP of service lb: %v", err)
			}
		}
	}

	ports := []corev1.ContainerPort{
		{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
		{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP},
		{Name: "sctp", ContainerPort: 2906, Protocol: corev1.ProtocolSCTP},
	}
	type pod struct {
		app, name, node string
		ips             []string
		notReady, term  bool
	}
	pods := []pod{
		{app: "web", name: "web-a", node: BroadNode, ips: []string{"10.244.0.10"}},
		{app: "web", name: "web-b", node: "node-b", ips: []string{"10.244.1.10"}},
		{app: "web", name: "web-c", node: "node-b", ips: []string{"10.244.1.11"}, notReady: true},
		{app: "web", name: "web-d", node: BroadNode, ips: []string{"10.244.0.11"}, term: true},
		{app: "np", name: "np-a", node: BroadNode, ips: []string{"10.244.0.12"}},
		{app: "np", name: "np-b", node: "node-b", ips: []string{"10.244.1.12"}},
		{app: "lb", name: "lb-a", node: BroadNode, ips: []string{"10.244.0.13"}},
		{app: "lb", name: "lb-b", node: "node-b", ips: []string{"10.244.1.13"}},
		{app: "np-local", name: "np-local-b", node: "node-b", ips: []string{"10.244.1.14"}},
		{app: "itp", name: "itp-a", node: BroadNode, ips: []string{"10.244.0.15"}},
		{app: "itp", name: "itp-b", node: "node-b", ips: []string{"10.244.1.15"}},
		{app: "aff", name: "aff-b", node: "node-b", ips: []string{"10.244.1.16"}},
		{app: "dual", name: "dual-a", node: BroadNode, ips: []string{"10.244.0.17", "fd00:244::17"}},
		{app: "dual", name: "dual-b", node: "node-b", ips: []string{"10.244.1.17", "fd00:244:1::17"}},
		{app: "sctp", name: "sctp-b", node: "node-b", ips: []string{"10.244.1.18"}},
		{app: "headless", name: "headless-b", node: "node-b", ips: []string{"10.244.1.19"}},
	}
	for _, p := range pods {
		must(c.CreatePod(ctx, Pod{Namespace: "default", Name: p.name, Node: p.node, IPs: p.ips,
			Labels: map[string]string{"app": p.app}, Ports: ports, NotReady: p.notReady}))
	}
	for _, p := range pods {
		if p.term {
			must(c.TerminatePod(ctx, "default", p.name))
		}
	}
	// Every service with pods has its slices: ready and terminating
	// endpoints (the dual-stack service has one slice per family).
	want := map[string]int{}
	for _, p := range pods {
		if !p.notReady {
			want[p.app] += len(p.ips)
		}
	}
	for _, s := range services {
		if n := want[s.Name]; n > 0 {
			if _, err := c.WaitSlices(ctx, "default", s.Name, func(sl []discoveryv1.EndpointSlice) bool {
				return len(ReadyAddresses(sl)) == n
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
