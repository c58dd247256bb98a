package gen

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Cluster returns a deterministic cluster of nsvc ClusterIP services with
// one EndpointSlice of neps ready endpoints each, spread over 10 namespaces
// and 100 nodes (node-0 ... node-99). It is the benchmarks' workload.
func Cluster(nsvc, neps int) ([]*corev1.Service, []*discoveryv1.EndpointSlice) {
	svcs := make([]*corev1.Service, 0, nsvc)
	slices := make([]*discoveryv1.EndpointSlice, 0, nsvc)
	for i := range nsvc {
		svc, es := ClusterService(i, neps, 0)
		svcs = append(svcs, svc)
		slices = append(slices, es)
	}
	return svcs, slices
}

func ptr[T any](v T) *T { return &v }

// ClusterService returns service i of Cluster and its slice; version varies
// the slice (the first endpoint is not ready on odd versions) so that
// benchmarks can make one endpoint change.
func ClusterService(i, neps, version int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	ns := fmt.Sprintf("ns-%d", i%10)
	name := fmt.Sprintf("svc-%d", i)
	ip := fmt.Sprintf("10.%d.%d.%d", 96+i>>16, (i>>8)&255, i&255)
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	es := &discoveryv1.EndpointSlice{
		TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
	}
	for j := range neps {
		n := i*neps + j
		ready := !(j == 0 && version%2 == 1)
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 128+n>>16, (n>>8)&255, n&255)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready), Serving: ptr(ready), Terminating: ptr(false)},
			NodeName:   ptr(fmt.Sprintf("node-%d", n%100)),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-%d", name, j)},
		})
	}
	return svc, es
}
