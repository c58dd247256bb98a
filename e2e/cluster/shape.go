package cluster

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Shape is one service of a test cluster with the pods behind it, in
// namespace default: the unit the differential clusters (Broad and each
// mode's own shapes) are made of.
type Shape struct {
	// Name is the service's name; its pods carry the label app=<Name>,
	// which the service selects (but an ExternalName service).
	Name string
	// Spec is the service's spec; ClusterIPs defaults to [ClusterIP].
	Spec corev1.ServiceSpec
	// Ingress, when set, is the load-balancer ingress IP of its status.
	Ingress string
	// Pods are the pods behind it.
	Pods []ShapePod
}

// ShapePod is a pod of a Shape.
type ShapePod struct {
	Name, Node string
	// IPs are its addresses, one per family.
	IPs []string
	// NotReady leaves it unready (no endpoint); Terminating deletes it
	// gracefully once created (a serving, terminating endpoint).
	NotReady, Terminating bool
}

// shapePorts are the container ports of every shape pod: the named
// target ports the shapes' services use.
var shapePorts = []corev1.ContainerPort{
	{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
	{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP},
	{Name: "sctp", ContainerPort: 2906, Protocol: corev1.ProtocolSCTP},
}

// CreateShapes creates the shapes' services (and their ingress IPs),
// then their pods, terminates the pods marked so, and waits until every
// service with pods has exactly their serving endpoints in its
// EndpointSlices (ReadyAddresses: ready ones, and the terminating ones
// marked so).
func CreateShapes(t testing.TB, ctx context.Context, c *Cluster, shapes []Shape) {
	t.Helper()
	for _, s := range shapes {
		createService(t, ctx, c, s)
	}
	for _, s := range shapes {
		for _, p := range s.Pods {
			if err := c.CreatePod(ctx, Pod{Namespace: "default", Name: p.Name, Node: p.Node, IPs: p.IPs,
				Labels: map[string]string{"app": s.Name}, Ports: shapePorts, NotReady: p.NotReady}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range shapes {
		for _, p := range s.Pods {
			if p.Terminating {
				if err := c.TerminatePod(ctx, "default", p.Name); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, s := range shapes {
		want := s.serving()
		if len(want) == 0 {
			continue
		}
		if _, err := c.WaitSlices(ctx, "default", s.Name, func(sl []discoveryv1.EndpointSlice) bool {
			return slices.Equal(slices.Sorted(slices.Values(ReadyAddresses(sl))), want)
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// createService creates a shape's service and sets its ingress IP.
func createService(t testing.TB, ctx context.Context, c *Cluster, s Shape) {
	t.Helper()
	spec := s.Spec
	if spec.Selector == nil && spec.Type != corev1.ServiceTypeExternalName {
		spec.Selector = map[string]string{"app": s.Name}
	}
	if spec.ClusterIP != "" && spec.ClusterIP != corev1.ClusterIPNone && len(spec.ClusterIPs) == 0 {
		spec.ClusterIPs = []string{spec.ClusterIP}
	}
	o, err := c.Admin.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: s.Name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s: %v", s.Name, err)
	}
	if s.Ingress != "" {
		o.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: s.Ingress}}
		if _, err := c.Admin.CoreV1().Services("default").UpdateStatus(ctx, o, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("set the ingress IP of service %s: %v", s.Name, err)
		}
	}
}

// serving returns the addresses ReadyAddresses must list for the shape,
// sorted.
func (s Shape) serving() []string {
	var out []string
	for _, p := range s.Pods {
		for _, ip := range p.IPs {
			switch {
			case p.NotReady:
			case p.Terminating:
				out = append(out, ip+"(terminating)")
			default:
				out = append(out, ip)
			}
		}
	}
	slices.Sort(out)
	return out
}
