package kube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/proxysinks/proxysinks/client/nodelocal"
)

// watched is one informer and its handler's registration, which has
// synced once the handler has seen the whole initial list (the informer's
// own HasSynced only says its store has).
type watched struct {
	inf    cache.SharedIndexInformer
	synced cache.InformerSynced
}

// noIndexers: the source never looks objects up by namespace.
var noIndexers = cache.Indexers{}

// newInformer returns an informer of resource (objects of obj's type) in
// every namespace, as client-go's generated informers build one: the
// source's resync period, no indexers, tweak applied to every list and
// watch request (nil: none).
func (s *Source) newInformer(resource schema.GroupVersionResource, obj runtime.Object, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	var unnamed *cache.InformerName
	return cache.NewSharedIndexInformerWithOptions(s.api.ListWatch(resource, metav1.NamespaceAll, tweak), obj,
		cache.SharedIndexInformerOptions{ResyncPeriod: s.cfg.ResyncPeriod, Indexers: noIndexers, Identifier: unnamed.WithResource(resource)})
}

// informers builds the informers the source runs: Services and
// EndpointSlices always, this node's Node with Config.NodeName, the
// ServiceCIDRs when Config.Needs asks for them.
func (s *Source) informers() ([]watched, error) {
	builders := []func() (watched, error){s.serviceInformer, s.sliceInformer}
	if s.cfg.NodeName != "" {
		builders = append(builders, s.nodeInformer)
	}
	if s.cfg.Needs.ServiceCIDRs {
		builders = append(builders, s.serviceCIDRInformer)
	}
	ws := make([]watched, 0, len(builders))
	for _, b := range builders {
		w, err := b()
		if err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// serviceInformer watches Services; its cache holds their conversions.
func (s *Source) serviceInformer() (watched, error) {
	inf := s.newInformer(servicesResource, &corev1.Service{}, nil)
	proxyName := s.cfg.ProxyName
	return s.register(inf, "service", transform(func(o *corev1.Service) *cachedService {
		return &cachedService{ObjectMeta: trimMeta(&o.ObjectMeta), c: nodelocal.ConvertServiceObject(o, proxyName)}
	}), handler(s, func(st *nodelocal.State, o *cachedService) error { return st.SetConvertedService(&o.c) },
		func(st *nodelocal.State, ns, name string) { st.DeleteService(ns, name) }))
}

// sliceInformer watches EndpointSlices; its cache holds the validated
// slices.
func (s *Source) sliceInformer() (watched, error) {
	inf := s.newInformer(endpointSlicesResource, &discoveryv1.EndpointSlice{}, nil)
	return s.register(inf, "EndpointSlice", transform(func(o *discoveryv1.EndpointSlice) *cachedSlice {
		return &cachedSlice{ObjectMeta: trimMeta(&o.ObjectMeta), p: nodelocal.ParseSliceObject(o)}
	}), handler(s, func(st *nodelocal.State, o *cachedSlice) error { return st.SetParsedSlice(&o.p) },
		func(st *nodelocal.State, ns, name string) { st.DeleteSlice(ns, name) }))
}

// nodeInformer watches this node's Node (a field selector on its name).
func (s *Source) nodeInformer() (watched, error) {
	inf := s.newInformer(nodesResource, &corev1.Node{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.cfg.NodeName).String()
	})
	keepFacts := s.cfg.Needs.Node
	// The handlers run under s.mu (handler), which also guards s.node.
	// The field selector keeps other nodes out, but not every client
	// (fakes) honours it.
	return s.register(inf, "node", transform(func(o *corev1.Node) *corev1.Node { return trimNode(o, keepFacts) }),
		handler(s, func(st *nodelocal.State, o *corev1.Node) error {
			if o.Name == s.cfg.NodeName {
				s.node = nodeStatus(o)
			}
			st.SetNode(o)
			return nil
		}, func(st *nodelocal.State, _, name string) {
			if name == s.cfg.NodeName {
				s.node = NodeStatus{}
			}
			st.DeleteNode(name)
		}))
}

// trimNode is what the Node informer's cache keeps: the node's name,
// version, zone label, deletion timestamp and the autoscaler's taint, and
// with facts its IP addresses and pod CIDRs.
func trimNode(o *corev1.Node, facts bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: trimMeta(&o.ObjectMeta)}
	n.DeletionTimestamp = o.DeletionTimestamp
	if z, ok := o.Labels[nodelocal.LabelTopologyZone]; ok {
		n.Labels = map[string]string{nodelocal.LabelTopologyZone: z}
	}
	for _, t := range o.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			n.Spec.Taints = []corev1.Taint{t}
		}
	}
	if facts {
		for _, a := range o.Status.Addresses {
			if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
				n.Status.Addresses = append(n.Status.Addresses, a)
			}
		}
		n.Spec.PodCIDR, n.Spec.PodCIDRs = o.Spec.PodCIDR, o.Spec.PodCIDRs
	}
	return n
}

// serviceCIDRInformer watches networking.k8s.io/v1 ServiceCIDRs; its cache
// holds their parsed prefixes.
func (s *Source) serviceCIDRInformer() (watched, error) {
	inf := s.newInformer(serviceCIDRsResource, &networkingv1.ServiceCIDR{}, nil)
	return s.register(inf, "ServiceCIDR", transform(func(o *networkingv1.ServiceCIDR) *cachedServiceCIDR {
		return &cachedServiceCIDR{ObjectMeta: trimMeta(&o.ObjectMeta), p: nodelocal.ParseServiceCIDRObject(o)}
	}), handler(s, func(st *nodelocal.State, o *cachedServiceCIDR) error { return st.SetParsedServiceCIDR(&o.p) },
		func(st *nodelocal.State, _, name string) { st.DeleteServiceCIDR(name) }))
}

// register sets an informer's transform, handler and list-and-watch
// error handler; what names the informer in errors.
func (s *Source) register(inf cache.SharedIndexInformer, what string, t cache.TransformFunc, h cache.ResourceEventHandler) (watched, error) {
	if err := inf.SetTransform(t); err != nil {
		return watched{}, fmt.Errorf("kube source: %s informer: %w", what, err)
	}
	if err := inf.SetWatchErrorHandlerWithContext(s.causes.watchErrors(what)); err != nil {
		return watched{}, fmt.Errorf("kube source: %s informer: %w", what, err)
	}
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return watched{}, fmt.Errorf("kube source: %s informer: %w", what, err)
	}
	return watched{inf: inf, synced: reg.HasSynced}, nil
}

// cachedService is what the Service informer's cache holds: the object's
// name and version, and its conversion. It is not a runtime.Object, so
// client-go's optional cache mutation detector leaves it alone (the State
// owns the converted content).
type cachedService struct {
	metav1.ObjectMeta
	c nodelocal.ConvertedService
}

// cachedSlice is what the EndpointSlice informer's cache holds: the
// object's name and version, and the validated slice.
type cachedSlice struct {
	metav1.ObjectMeta
	p nodelocal.ParsedSlice
}

// cachedServiceCIDR is what the ServiceCIDR informer's cache holds: the
// object's name and version, and its parsed prefixes.
type cachedServiceCIDR struct {
	metav1.ObjectMeta
	p nodelocal.ParsedServiceCIDR
}

// trimMeta keeps what the informers need of an object's metadata: its key
// and resource version (resyncs of unchanged objects are recognised by it).
func trimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, ResourceVersion: m.ResourceVersion}
}

// transform adapts a typed conversion to an informer transform. Objects of
// another type (already converted ones, which client-go may pass again)
// are returned as they are.
func transform[T, C any](conv func(T) C) cache.TransformFunc {
	return func(obj any) (any, error) {
		if o, ok := obj.(T); ok {
			return conv(o), nil
		}
		return obj, nil
	}
}

// handler adapts typed set/delete functions to an informer event handler.
func handler[T metav1.Object](s *Source, set func(*nodelocal.State, T) error, del func(st *nodelocal.State, ns, name string)) cache.ResourceEventHandler {
	onSet := func(obj any) {
		o, ok := obj.(T)
		if !ok {
			s.log.Warn("unexpected object from informer", "type", fmt.Sprintf("%T", obj))
			return
		}
		// Errors are logged and counted by the state.
		s.mu.Lock()
		_ = set(s.state, o)
		dirty := s.state.Dirty()
		s.mu.Unlock()
		if dirty {
			s.kick.Kick()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: onSet,
		UpdateFunc: func(oldObj, newObj any) {
			s.updates.Add(1)
			if o, n, ok := sameVersion[T](oldObj, newObj); ok && o == n {
				return // a resync of an unchanged object
			}
			onSet(newObj)
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			o, ok := obj.(T)
			if !ok {
				s.log.Warn("unexpected deleted object from informer", "type", fmt.Sprintf("%T", obj))
				return
			}
			s.update(func(st *nodelocal.State) { del(st, o.GetNamespace(), o.GetName()) })
		},
	}
}

// sameVersion returns both resource versions when both objects have one.
func sameVersion[T metav1.Object](a, b any) (string, string, bool) {
	oa, ok1 := a.(T)
	ob, ok2 := b.(T)
	if !ok1 || !ok2 || oa.GetResourceVersion() == "" || ob.GetResourceVersion() == "" {
		return "", "", false
	}
	return oa.GetResourceVersion(), ob.GetResourceVersion(), true
}
