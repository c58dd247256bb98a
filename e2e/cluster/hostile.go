package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// Via is how an object of the hostile cluster reaches the control plane.
type Via int

const (
	// ViaAPI objects are accepted by an apiserver with strict IP and CIDR
	// validation (the default of v1.37.2).
	ViaAPI Via = iota
	// ViaLax objects are refused by it and accepted by an apiserver started
	// with --feature-gates=StrictIPCIDRValidation=false (as clusters
	// upgraded from before v1.36 still hold them).
	ViaLax
	// ViaEtcd objects are refused by both: they are written straight into
	// etcd under the apiserver's key layout (PutEtcd).
	ViaEtcd
)

func (v Via) String() string {
	return [...]string{"api", "lax", "etcd"}[v]
}

// LaxAPIServerFlag is the kube-apiserver flag that switches strict IP and
// CIDR validation off (the gate is beta, on by default, in v1.37.2).
const LaxAPIServerFlag = "--feature-gates=StrictIPCIDRValidation=false"

// HostileObject is one object of the hostile cluster: a Service (with its
// status) or an EndpointSlice, in namespace default.
type HostileObject struct {
	Via Via
	// Class is the input class it stands for.
	Class   string
	Service *corev1.Service
	Slice   *discoveryv1.EndpointSlice
	// KubeProxyFails names the kube-proxy modes that fail a whole sync
	// over this object (the sinks skip only the bad value: issue 31's
	// third input rule), or whose state over it changes at every sync:
	// the differential of such a mode leaves it out, since kube-proxy's
	// capture would then hold nothing of that family to compare with, or
	// whatever its last sync happened to leave.
	KubeProxyFails []string
}

func (o HostileObject) name() string {
	if o.Service != nil {
		return "Service default/" + o.Service.Name
	}
	return "EndpointSlice default/" + o.Slice.Name
}

// LoadHostile fills a control plane started with strict validation (the
// default) with the hostile cluster of kube-proxy mode mode: BroadNode and
// node-b, then every HostileObjects entry but those whose KubeProxyFails
// names mode, the way its Via says, checking that each way is
// the only one: the strict apiserver accepts the ViaAPI objects and
// refuses the others; it is restarted with LaxAPIServerFlag, which
// accepts the ViaLax objects and still refuses the ViaEtcd ones; those
// are written into etcd and read back through the apiserver (its storage
// decoder reads the JSON). The apiserver keeps running lax.
func LoadHostile(t testing.TB, ctx context.Context, c *Cluster, mode string) {
	t.Helper()
	BroadNodes(t, ctx, c)
	var objs []HostileObject
	for _, o := range HostileObjects() {
		if !slices.Contains(o.KubeProxyFails, mode) {
			objs = append(objs, o)
		}
	}
	for _, o := range objs {
		if o.Via == ViaAPI {
			if err := c.createHostile(ctx, o, false); err != nil {
				t.Fatalf("hostile %s (%s): the strict apiserver refused it: %v", o.name(), o.Class, err)
			}
		} else {
			mustRefuse(t, ctx, c, o, "strict")
		}
	}
	c.RestartAPIServer(LaxAPIServerFlag)
	for _, o := range objs {
		switch o.Via {
		case ViaLax:
			if err := c.createHostile(ctx, o, false); err != nil {
				t.Fatalf("hostile %s (%s): the lax apiserver refused it: %v", o.name(), o.Class, err)
			}
		case ViaEtcd:
			mustRefuse(t, ctx, c, o, "lax")
			if err := c.putHostile(ctx, o); err != nil {
				t.Fatalf("hostile %s (%s): %v", o.name(), o.Class, err)
			}
		}
	}
}

// mustRefuse fails t unless the apiserver refuses o as invalid (a dry-run
// create; for a Service whose spec passes, its status update).
func mustRefuse(t testing.TB, ctx context.Context, c *Cluster, o HostileObject, which string) {
	t.Helper()
	err := c.createHostile(ctx, o, true)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("hostile %s (%s, %s): the %s apiserver did not refuse it as invalid: %v", o.name(), o.Class, o.Via, which, err)
	}
}

// createHostile creates o through the apiserver (and a Service's load
// balancer status). With dryRun nothing is stored: a Service whose spec
// passes is created for real to try its status, then deleted.
func (c *Cluster) createHostile(ctx context.Context, o HostileObject, dryRun bool) error {
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if o.Slice != nil {
		_, err := c.Admin.DiscoveryV1().EndpointSlices("default").Create(ctx, o.Slice.DeepCopy(), opts)
		return err
	}
	svcs := c.Admin.CoreV1().Services("default")
	created, err := svcs.Create(ctx, o.Service.DeepCopy(), opts)
	if err != nil || len(o.Service.Status.LoadBalancer.Ingress) == 0 {
		return err
	}
	if dryRun {
		if created, err = svcs.Create(ctx, o.Service.DeepCopy(), metav1.CreateOptions{}); err != nil {
			return err
		}
		defer svcs.Delete(ctx, created.Name, metav1.DeleteOptions{})
	}
	created.Status = o.Service.Status
	_, err = svcs.UpdateStatus(ctx, created, metav1.UpdateOptions{DryRun: opts.DryRun})
	return err
}

// putHostile writes o into etcd as JSON and reads it back through the
// apiserver.
func (c *Cluster) putHostile(ctx context.Context, o HostileObject) error {
	var obj any
	var key string
	if o.Service != nil {
		s := o.Service.DeepCopy()
		s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
		s.UID, s.CreationTimestamp = uuid.NewUUID(), metav1.Now()
		obj, key = s, "/registry/services/specs/default/"+s.Name
	} else {
		s := o.Slice.DeepCopy()
		s.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}
		s.UID, s.CreationTimestamp = uuid.NewUUID(), metav1.Now()
		obj, key = s, "/registry/endpointslices/default/"+s.Name
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	if err := c.PutEtcd(ctx, key, b); err != nil {
		return err
	}
	var got, want any
	if o.Service != nil {
		var s *corev1.Service
		s, err = c.Admin.CoreV1().Services("default").Get(ctx, o.Service.Name, metav1.GetOptions{})
		if err == nil {
			got, want = hostileFields(s, o.Service), hostileFields(o.Service, o.Service)
		}
	} else {
		var s *discoveryv1.EndpointSlice
		s, err = c.Admin.DiscoveryV1().EndpointSlices("default").Get(ctx, o.Slice.Name, metav1.GetOptions{})
		if err == nil {
			got, want = s.Endpoints, o.Slice.Endpoints
		}
	}
	if err != nil {
		return fmt.Errorf("read back what was written into etcd: %w", err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		return fmt.Errorf("read back through the apiserver:\n%s\nwant:\n%s", gb, wb)
	}
	return nil
}

// hostileFields are the fields of s the hostile cluster sets beyond
// validation (the apiserver defaults others when it reads, the external
// traffic policy too when ref leaves it empty).
func hostileFields(s, ref *corev1.Service) any {
	f := []any{s.Spec.ExternalIPs, s.Spec.LoadBalancerSourceRanges, s.Spec.InternalTrafficPolicy, s.Status.LoadBalancer.Ingress}
	if ref.Spec.ExternalTrafficPolicy != "" {
		f = append(f, s.Spec.ExternalTrafficPolicy)
	}
	return f
}

// hostilePort is every hostile service's port: http, 80 to 8080.
func hostilePort(nodePort int32) corev1.ServicePort {
	return corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080), NodePort: nodePort}
}

// hsvc returns a selector-less IPv4 ClusterIP service (its endpoints are
// the hostile slices) with cluster IP 10.96.13.<n>, changed by mod.
func hsvc(name string, n int, mod func(*corev1.ServiceSpec)) *corev1.Service {
	ip := fmt.Sprintf("10.96.13.%d", n)
	single := corev1.IPFamilyPolicySingleStack
	cluster := corev1.ServiceInternalTrafficPolicyCluster
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
		IPFamilyPolicy: &single, InternalTrafficPolicy: &cluster, SessionAffinity: corev1.ServiceAffinityNone,
		Ports: []corev1.ServicePort{hostilePort(0)},
	}}
	if mod != nil {
		mod(&s.Spec)
	}
	return s
}

// lb makes a spec a LoadBalancer with node port np and the given source
// ranges.
func lb(np int32, ranges ...string) func(*corev1.ServiceSpec) {
	return func(s *corev1.ServiceSpec) {
		s.Type = corev1.ServiceTypeLoadBalancer
		s.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
		s.Ports = []corev1.ServicePort{hostilePort(np)}
		s.LoadBalancerSourceRanges = ranges
	}
}

// dualStack makes a spec require dual stack with the second cluster IP v6.
func dualStack(v6 string) func(*corev1.ServiceSpec) {
	return func(s *corev1.ServiceSpec) {
		dual := corev1.IPFamilyPolicyRequireDualStack
		s.IPFamilyPolicy = &dual
		s.ClusterIPs = append(s.ClusterIPs, v6)
		s.IPFamilies = append(s.IPFamilies, corev1.IPv6Protocol)
	}
}

// both applies every mod.
func both(mods ...func(*corev1.ServiceSpec)) func(*corev1.ServiceSpec) {
	return func(s *corev1.ServiceSpec) {
		for _, m := range mods {
			m(s)
		}
	}
}

// ingress sets a service's load-balancer ingress IPs (ipMode VIP, which
// the apiserver requires with an IP, unless mode names another).
func ingress(s *corev1.Service, mode string, ips ...string) *corev1.Service {
	if mode == "" {
		mode = string(corev1.LoadBalancerIPModeVIP)
	}
	for _, ip := range ips {
		m := corev1.LoadBalancerIPMode(mode)
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip, IPMode: &m})
	}
	return s
}

// Endpoint conditions of the hostile slices.
var (
	yes, no  = true, false
	readyEP  = discoveryv1.EndpointConditions{Ready: &yes, Serving: &yes, Terminating: &no}
	noneEP   = discoveryv1.EndpointConditions{}
	nodeA    = BroadNode
	nodeB    = "node-b"
	httpName = "http"
	tcp      = corev1.ProtocolTCP
)

// hep is an endpoint with one address on node with conditions cond.
func hep(addr, node string, cond discoveryv1.EndpointConditions) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: &node, Conditions: cond}
}

// hslice returns the EndpointSlice name of service svc (label
// kubernetes.io/service-name unless svc is empty) with port http 8080.
func hslice(name, svc string, family discoveryv1.AddressType, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	port := int32(8080)
	labels := map[string]string{discoveryv1.LabelManagedBy: "e2e.proxysinks"}
	if svc != "" {
		labels[discoveryv1.LabelServiceName] = svc
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
		AddressType: family, Endpoints: eps,
		Ports: []discoveryv1.EndpointPort{{Name: &httpName, Protocol: &tcp, Port: &port}},
	}
}

// v4 is the IPv4 slice <svc>-v4 with one ready endpoint on node-b.
func v4(svc, addr string) HostileObject {
	return HostileObject{Via: ViaAPI, Class: "endpoints", Slice: hslice(svc+"-v4", svc, discoveryv1.AddressTypeIPv4, hep(addr, nodeB, readyEP))}
}

// HostileObjects is the hostile cluster: the input classes of issue 31
// (malformed, legacy, IPv4-mapped, zero-length, duplicate, out-of-family,
// unknown enum values, absent optional fields, bad entries among good
// ones, the beta source-range annotation) and a few more, each on a
// service of its own (cluster IPs 10.96.13.0/24, endpoints on node-b in
// 10.244.5.0/24 unless the class is about them).
func HostileObjects() []HostileObject {
	return append(append(hostileAPI(), hostileEtcd()...), hostileLax()...)
}
