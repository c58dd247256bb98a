package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	kube "github.com/proxysinks/proxysinks/e2e/cluster"
)

// The real-API mode: with -kubeconfig the cases' manifests go to a real
// control plane instead of files. Services are created and updated there
// (with a selector of their own), and every endpoint of the manifests'
// EndpointSlices becomes a Pod (spec.nodeName, status with its IPs and
// Ready, a graceful delete for a terminating one, labels selecting it into
// its services); upstream's EndpointSlice controller (e2e/cluster's
// endpointslice-controller) writes the slices the sink reads. The sink runs with --kubeconfig.
// nodeAPIAddr is where the sink, in the node's namespace, reaches the
// apiserver: a relay there to kube.GuestAPIAddr.
const nodeAPIAddr = "127.0.0.1:6443"

// apiMode tells whether the cases run against a real control plane.
func apiMode() bool { return options.Kubeconfig != "" }

// testNamespace is where the cases' objects live.
const testNamespace = "default"

// selectorKey is the label selecting a pod into service name.
func selectorKey(name string) string { return "svc.e2e.proxysinks.io/" + name }

// apiWriter turns manifests (the documents the cases write) into objects
// of a real control plane.
type apiWriter struct {
	c *kube.Client
	// podName names the pod holding an IP address (the harness's pods).
	podName func(ip string) (string, bool)
	// nodeAddrs are the InternalIP addresses of the nodes it creates.
	nodeAddrs map[string][]string
	nodes     map[string]bool
}

// wantPod is a pod the manifests' endpoints call for.
type wantPod struct {
	name, node string
	ips        []string
	// ready is the pod's Ready condition: the endpoint's serving.
	ready, term bool
	labels      map[string]string
}

// wantEndpoint is one endpoint address the controller must write.
type wantEndpoint struct {
	ready, serving, terminating bool
}

// reset deletes the Services (but the apiserver's own), EndpointSlices
// and Pods a previous case left.
func (w *apiWriter) reset(ctx context.Context) error {
	svcs, err := w.c.Admin.CoreV1().Services(testNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	for _, s := range svcs.Items {
		if s.Name == "kubernetes" {
			continue
		}
		if err := w.deleteService(ctx, s.Name); err != nil {
			return err
		}
	}
	zero := int64(0)
	if err := w.c.Admin.CoreV1().Pods(testNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete pods: %w", err)
	}
	if err := w.c.Admin.DiscoveryV1().EndpointSlices(testNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete EndpointSlices: %w", err)
	}
	return nil
}

// deleteService deletes a service and its EndpointSlices (no garbage
// collector runs in the test control plane).
func (w *apiWriter) deleteService(ctx context.Context, name string) error {
	if err := w.c.Admin.CoreV1().Services(testNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete service %s: %w", name, err)
	}
	if err := w.c.Admin.DiscoveryV1().EndpointSlices(testNamespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name}); err != nil {
		return fmt.Errorf("delete EndpointSlices of service %s: %w", name, err)
	}
	return nil
}

// apply makes the control plane hold what docs describe, and waits until
// the EndpointSlice controller has written every service's endpoints as
// the manifests' slices have them.
func (w *apiWriter) apply(ctx context.Context, docs ...string) error {
	services := map[string]*corev1.Service{}
	var order []string
	pods := map[string]*wantPod{}
	endpoints := map[string]map[string]wantEndpoint{} // service -> address -> conditions
	for _, doc := range docs {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return fmt.Errorf("manifest: %w", err)
		}
		switch tm.Kind {
		case "Node":
			var n corev1.Node
			if err := yaml.UnmarshalStrict([]byte(doc), &n); err != nil {
				return fmt.Errorf("manifest node: %w", err)
			}
			if err := w.ensureNode(ctx, n.Name, n.Labels["topology.kubernetes.io/zone"]); err != nil {
				return err
			}
		case "Service":
			var s corev1.Service
			if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
				return fmt.Errorf("manifest service: %w", err)
			}
			services[s.Name] = &s
			order = append(order, s.Name)
		case "EndpointSlice":
			var es discoveryv1.EndpointSlice
			if err := yaml.UnmarshalStrict([]byte(doc), &es); err != nil {
				return fmt.Errorf("manifest EndpointSlice: %w", err)
			}
			if err := w.slicePods(&es, pods, endpoints); err != nil {
				return err
			}
		default:
			return fmt.Errorf("manifest: unexpected kind %q", tm.Kind)
		}
	}
	for _, p := range pods {
		if err := w.ensureNode(ctx, p.node, ""); err != nil {
			return err
		}
		// The IPv4 address first, as a dual-stack pod's status has it.
		sort.Slice(p.ips, func(i, j int) bool { return !strings.Contains(p.ips[i], ":") && strings.Contains(p.ips[j], ":") })
	}

	// Services first, so that new pods are selected at once; then pods
	// that go, then pods that come or change (never both the old and the
	// new endpoint in a slice); services that go last.
	for _, name := range order {
		if err := w.applyService(ctx, services[name]); err != nil {
			return err
		}
	}
	if err := w.applyPods(ctx, pods); err != nil {
		return err
	}
	cur, err := w.c.Admin.CoreV1().Services(testNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	for _, s := range cur.Items {
		if s.Name != "kubernetes" && services[s.Name] == nil {
			if err := w.deleteService(ctx, s.Name); err != nil {
				return err
			}
		}
	}
	return w.waitEndpoints(ctx, order, services, endpoints)
}

// waitEndpoints waits until the EndpointSlice controller has written, for
// every service in order but ExternalName ones, exactly its endpoints.
func (w *apiWriter) waitEndpoints(ctx context.Context, order []string, services map[string]*corev1.Service, endpoints map[string]map[string]wantEndpoint) error {
	for _, name := range order {
		if services[name].Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		want := endpoints[name]
		var got map[string]wantEndpoint
		if _, err := w.c.WaitSlices(ctx, testNamespace, name, func(ss []discoveryv1.EndpointSlice) bool {
			got = sliceEndpoints(ss)
			return maps.Equal(got, want)
		}); err != nil {
			return fmt.Errorf("%w: endpoints %v, want %v", err, got, want)
		}
	}
	return nil
}

// sliceEndpoints returns the endpoints of a service's slices.
func sliceEndpoints(ss []discoveryv1.EndpointSlice) map[string]wantEndpoint {
	out := map[string]wantEndpoint{}
	for _, s := range ss {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				out[a] = wantEndpoint{
					ready:       e.Conditions.Ready != nil && *e.Conditions.Ready,
					serving:     e.Conditions.Serving != nil && *e.Conditions.Serving,
					terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating,
				}
			}
		}
	}
	return out
}

// ensureNode creates a node once (a node of the manifests' endpoints, too).
func (w *apiWriter) ensureNode(ctx context.Context, name, zone string) error {
	if name == "" || w.nodes[name] {
		return nil
	}
	err := w.c.CreateNode(ctx, name, zone, w.nodeAddrs[name]...)
	if err != nil && !apierrors.IsAlreadyExists(errors.Unwrap(err)) {
		return err
	}
	w.nodes[name] = true
	return nil
}

// slicePods adds the pods a manifest EndpointSlice's endpoints call for to
// pods, labelled into its service, and the endpoints the controller must
// write to endpoints (service -> address -> conditions).
func (w *apiWriter) slicePods(es *discoveryv1.EndpointSlice, pods map[string]*wantPod, endpoints map[string]map[string]wantEndpoint) error {
	svc := es.Labels[discoveryv1.LabelServiceName]
	if endpoints[svc] == nil {
		endpoints[svc] = map[string]wantEndpoint{}
	}
	for _, e := range es.Endpoints {
		node := ""
		if e.NodeName != nil {
			node = *e.NodeName
		}
		ready := e.Conditions.Ready == nil || *e.Conditions.Ready
		term := e.Conditions.Terminating != nil && *e.Conditions.Terminating
		// A pod's Ready condition is what the controller writes as
		// serving; a live pod serves when ready.
		serving := ready
		if term && e.Conditions.Serving != nil {
			serving = *e.Conditions.Serving
		}
		for _, a := range e.Addresses {
			name, ok := w.podName(a)
			if !ok {
				return fmt.Errorf("EndpointSlice %s: address %s is no pod's", es.Name, a)
			}
			p := pods[name]
			if p == nil {
				p = &wantPod{name: name, node: node, ready: serving, term: term, labels: map[string]string{}}
				pods[name] = p
			}
			if p.node != node || p.ready != serving || p.term != term {
				return fmt.Errorf("EndpointSlice %s: pod %s (%s) is another endpoint elsewhere with other conditions", es.Name, name, a)
			}
			if !slices.Contains(p.ips, a) {
				p.ips = append(p.ips, a)
			}
			p.labels[selectorKey(svc)] = "y"
			endpoints[svc][a] = wantEndpoint{ready: ready && !term, serving: serving, terminating: term}
		}
	}
	return nil
}

func (w *apiWriter) applyService(ctx context.Context, s *corev1.Service) error {
	api := w.c.Admin.CoreV1().Services(testNamespace)
	s.Namespace = testNamespace
	s.Spec.Selector = map[string]string{selectorKey(s.Name): "y"}
	typ := s.Spec.Type
	if typ == corev1.ServiceTypeClusterIP || typ == corev1.ServiceTypeExternalName {
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
	}
	if typ != corev1.ServiceTypeLoadBalancer {
		// The API allocates a health-check node port only for a
		// LoadBalancer; the manifests give NodePort ones one too.
		s.Spec.HealthCheckNodePort = 0
	}
	status := s.Status
	cur, err := api.Get(ctx, s.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s.Status = corev1.ServiceStatus{}
		// A cluster IP or node port a previous case's service held may
		// still be on its way to being released.
		err = retryAllocation(ctx, func() error {
			var err error
			cur, err = api.Create(ctx, s, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("create service %s: %w", s.Name, err)
		}
	case err != nil:
		return fmt.Errorf("get service %s: %w", s.Name, err)
	default:
		sp := &cur.Spec
		sp.Type, sp.Selector, sp.Ports = typ, s.Spec.Selector, s.Spec.Ports
		sp.ExternalIPs, sp.LoadBalancerSourceRanges = s.Spec.ExternalIPs, s.Spec.LoadBalancerSourceRanges
		sp.SessionAffinity, sp.SessionAffinityConfig = s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig
		sp.ExternalTrafficPolicy, sp.HealthCheckNodePort = s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort
		sp.InternalTrafficPolicy, sp.ExternalName = s.Spec.InternalTrafficPolicy, s.Spec.ExternalName
		if typ == corev1.ServiceTypeExternalName {
			sp.ClusterIP, sp.ClusterIPs, sp.IPFamilies, sp.IPFamilyPolicy = "", nil, nil, nil
			sp.InternalTrafficPolicy, sp.AllocateLoadBalancerNodePorts = nil, nil
		} else if sp.ClusterIP == "" {
			sp.ClusterIP, sp.ClusterIPs = s.Spec.ClusterIP, s.Spec.ClusterIPs
		}
		if typ != corev1.ServiceTypeLoadBalancer {
			sp.AllocateLoadBalancerNodePorts = nil
		}
		err = retryAllocation(ctx, func() error {
			var err error
			cur, err = api.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("update service %s: %w", s.Name, err)
		}
	}
	if len(status.LoadBalancer.Ingress) > 0 || len(cur.Status.LoadBalancer.Ingress) > 0 {
		cur.Status = status
		if _, err := api.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("set status of service %s: %w", s.Name, err)
		}
	}
	return nil
}

// retryAllocation retries f for a while when the apiserver says an
// address or port is allocated.
func retryAllocation(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil || !strings.Contains(err.Error(), "already allocated") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// applyPods deletes (grace 0) the pods no endpoint calls for or that
// must change in a way a pod cannot (node, IPs, a terminating one
// becoming live), then creates the missing ones and updates labels and
// readiness, and deletes gracefully those that become terminating.
func (w *apiWriter) applyPods(ctx context.Context, want map[string]*wantPod) error {
	api := w.c.Admin.CoreV1().Pods(testNamespace)
	list, err := api.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	have := map[string]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		wp := want[p.Name]
		var ips []string
		for _, ip := range p.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		if wp == nil || wp.node != p.Spec.NodeName || !slices.Equal(ips, wp.ips) || (p.DeletionTimestamp != nil && !wp.term) {
			if err := w.c.DeletePod(ctx, testNamespace, p.Name); err != nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
				return err
			}
			if err := waitPodGone(ctx, w.c, p.Name); err != nil {
				return err
			}
			continue
		}
		have[p.Name] = p
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		wp := want[n]
		p := have[n]
		if p == nil {
			if err := w.c.CreatePod(ctx, kube.Pod{Namespace: testNamespace, Name: n, Node: wp.node, IPs: wp.ips, Labels: wp.labels, NotReady: !wp.ready}); err != nil {
				return err
			}
		} else if p.DeletionTimestamp == nil {
			if !maps.Equal(p.Labels, wp.labels) {
				p.Labels = wp.labels
				if _, err := api.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
					return fmt.Errorf("relabel pod %s: %w", n, err)
				}
			}
			if podReady(p) != wp.ready {
				if err := w.c.SetPodReady(ctx, testNamespace, n, wp.ready); err != nil {
					return err
				}
			}
		}
		if wp.term && (p == nil || p.DeletionTimestamp == nil) {
			if err := w.c.TerminatePod(ctx, testNamespace, n); err != nil {
				return err
			}
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitPodGone waits until a pod deleted with grace 0 is gone.
func waitPodGone(ctx context.Context, c *kube.Client, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.Admin.CoreV1().Pods(testNamespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pod %s not gone after its deletion: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// apiClient is the -kubeconfig client, made once for the test binary.
var apiClient *kube.Client

// startAPI connects the harness to the control plane of -kubeconfig:
// the objects a previous case left are deleted, node-1 (the node's
// addresses) is created, and a relay in the node's namespace on
// nodeAPIAddr takes the sink's connections to the apiserver.
func (c *cluster) startAPI() {
	t := c.t
	if options.SinkKubeconfig == "" {
		t.Fatal("a kubeconfig without the sink's (Options.SinkKubeconfig)")
	}
	if apiClient == nil {
		cl, err := kube.NewClient(options.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		apiClient = cl
	}
	c.api = &apiWriter{
		c: apiClient,
		podName: func(ip string) (string, bool) {
			for name, p := range c.pods {
				if p.ip.String() == ip || (p.ip6.IsValid() && p.ip6.String() == ip) {
					return name, true
				}
			}
			return "", false
		},
		nodeAddrs: map[string][]string{"node-1": {nodeAddr.String()}},
		nodes:     map[string]bool{},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.api.reset(ctx); err != nil {
		t.Fatalf("reset the control plane: %v", err)
	}
	var l net.Listener
	if err := c.node.Do(func() error {
		var err error
		l, err = net.Listen("tcp", nodeAPIAddr)
		return err
	}); err != nil {
		t.Fatalf("relay to the apiserver in the node's namespace: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	go kube.Relay(l, kube.GuestAPIAddr)
}

// applyAPI is write in the real-API mode.
func (c *cluster) applyAPI(docs ...string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.api.apply(ctx, docs...); err != nil {
		c.t.Fatalf("apply the manifests to the control plane: %v", err)
	}
}
