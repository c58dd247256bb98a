package nodelocal

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/proxysinks/proxysinks/client"
)

func ptr[T any](v T) *T { return &v }

// service returns a valid ClusterIP service; opts adjust it.
func service(ns, name string, opts ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIP:  "10.96.0.10",
			ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080),
			}},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// epSpec describes one endpoint of a test slice.
type epSpec struct {
	addr        string
	pod         string // targetRef name; empty for none
	node, zone  string
	ready       *bool
	serving     *bool
	terminating *bool
	zoneHints   []string
	nodeHints   []string
}

// slice returns an EndpointSlice of service svc with the given endpoints and
// one TCP port named "http" on 8080, unless ports are given.
func slice(ns, name, svc string, v6 bool, eps []epSpec, ports ...discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
	}
	if v6 {
		es.AddressType = discoveryv1.AddressTypeIPv6
	}
	if len(ports) == 0 {
		es.Ports = []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}}
	}
	for _, e := range eps {
		ep := discoveryv1.Endpoint{
			Addresses:  []string{e.addr},
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating},
		}
		if e.pod != "" {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: e.pod}
		}
		if e.node != "" {
			ep.NodeName = ptr(e.node)
		}
		if e.zone != "" {
			ep.Zone = ptr(e.zone)
		}
		if e.zoneHints != nil || e.nodeHints != nil {
			ep.Hints = &discoveryv1.EndpointHints{}
			for _, z := range e.zoneHints {
				ep.Hints.ForZones = append(ep.Hints.ForZones, discoveryv1.ForZone{Name: z})
			}
			for _, n := range e.nodeHints {
				ep.Hints.ForNodes = append(ep.Hints.ForNodes, discoveryv1.ForNode{Name: n})
			}
		}
		es.Endpoints = append(es.Endpoints, ep)
	}
	return es
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func ips(s ...string) client.IPs {
	var out client.IPs
	for _, a := range addrs(s...) {
		out.Add(a)
	}
	return out
}
