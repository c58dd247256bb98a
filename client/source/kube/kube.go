// Package kube is a source that watches the Kubernetes API with client-go
// shared informers (Services, discovery.k8s.io/v1 EndpointSlices and this
// node's Node), applies the node-local rules of package nodelocal and
// delivers snapshots once the informers have synced, coalescing bursts of
// events into at most one snapshot per minimum interval.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/nodelocal"
	"github.com/proxysinks/proxysinks/client/source/coalesce"
)

// Config configures a kube source.
type Config struct {
	// NodeName is this node's name: endpoints with this nodeName are local
	// and the Node of that name gives the zone for topology hints.
	NodeName string
	// ProxyName selects services by their service-proxy-name label (see
	// nodelocal.ConvertService).
	ProxyName string
	// MinInterval is the shortest time between two snapshots (kube-proxy's
	// --min-sync-period); events within it are coalesced. Zero means 1s.
	MinInterval time.Duration
	// SyncPeriod, when positive, delivers a snapshot at least this often
	// even without changes (kube-proxy's --sync-period).
	SyncPeriod time.Duration
	// ResyncPeriod is the informers' resync period (0: none). Resyncs of
	// unchanged objects produce no change.
	ResyncPeriod time.Duration
	// Logger receives invalid objects and informer problems; nil means
	// slog.Default().
	Logger *slog.Logger
	// Needs are the optional kinds and fields the sink asked for.
	Needs client.Needs
}

// RESTConfig returns the API client configuration: from the kubeconfig file
// at path, or the in-cluster service account when path is empty. It asks
// for protobuf, which is cheaper than JSON for large lists.
func RESTConfig(path string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if path == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	}
	if err != nil {
		return nil, fmt.Errorf("kube source: API client config: %w", err)
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return cfg, nil
}

// NewForConfig returns a source using a clientset built from the kubeconfig
// at path (empty: in-cluster).
func NewForConfig(path string, cfg Config) (*Source, error) {
	rc, err := RESTConfig(path)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kube source: API client: %w", err)
	}
	return New(cs, cfg), nil
}

// Source watches the API and delivers node-local snapshots.
type Source struct {
	cs  kubernetes.Interface
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	state *nodelocal.State
	kick  *coalesce.Coalescer
	// updates counts informer update notifications (resyncs included).
	updates atomic.Uint64
	// delivered is set once the first snapshot is (under mu).
	delivered bool
	node      NodeStatus // of cfg.NodeName, under mu
}

// ToBeDeletedTaint is the taint the cluster autoscaler puts on a node it is
// about to remove.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// NodeStatus is what the source knows of this node's Node object: what a
// sink's /healthz needs (kube-proxy fails it on a node being deleted or
// tainted for deletion, so load balancers drain the node first).
type NodeStatus struct {
	// Known is true once the Node has been read, and while it exists.
	Known bool
	// Deleting is true when the Node has a deletion timestamp.
	Deleting bool
	// ToBeDeleted is true when the Node carries ToBeDeletedTaint.
	ToBeDeleted bool
}

// NodeStatus returns what the source knows of its node's Node object; the
// zero value before it has been read, or without Config.NodeName.
func (s *Source) NodeStatus() NodeStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node
}

// nodeStatus reads a (transformed) Node.
func nodeStatus(o *corev1.Node) NodeStatus {
	st := NodeStatus{Known: true, Deleting: o.DeletionTimestamp != nil}
	for _, t := range o.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			st.ToBeDeleted = true
		}
	}
	return st
}

// New returns a source reading from cs.
func New(cs kubernetes.Interface, cfg Config) *Source {
	if cfg.MinInterval == 0 {
		cfg.MinInterval = time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Source{
		cs:    cs,
		cfg:   cfg,
		log:   log.With("source", "kube"),
		state: nodelocal.NewState(nodelocal.Config{NodeName: cfg.NodeName, ProxyName: cfg.ProxyName, Logger: log}),
		kick:  coalesce.New(cfg.MinInterval, cfg.SyncPeriod),
	}
}

// Stats returns the invalid-object and service counters (for metrics).
// Stale is set until the first snapshot is delivered (the informers have
// not all synced yet); after that the informers' caches keep the last
// state while the API server cannot be reached, and client-go keeps
// retrying.
func (s *Source) Stats() client.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state.Stats()
	if !s.delivered {
		st.Stale, st.StaleReason = true, "no first snapshot yet: waiting for the informers' initial lists"
	}
	return st
}

// Errors returns the API objects that are invalid right now.
func (s *Source) Errors() []*client.ObjectError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Errors()
}

// update runs f on the state under the lock and asks for a snapshot when
// something changed.
func (s *Source) update(f func(st *nodelocal.State)) {
	s.mu.Lock()
	f(s.state)
	dirty := s.state.Dirty()
	s.mu.Unlock()
	if dirty {
		s.kick.Kick()
	}
}

// Run starts the informers, waits for them to sync, delivers the first
// snapshot, then one snapshot per coalesced burst of changes (and per
// SyncPeriod), until ctx is done. It fails if the informers cannot sync.
//
// The informers convert objects as they arrive (a transform on each
// informer, run on the informer's own goroutine, so Services and
// EndpointSlices are converted in parallel), and their caches hold the
// converted form, not the API objects: the handlers only do the
// bookkeeping, and memory holds one copy of each object.
func (s *Source) Run(ctx context.Context, deliver func(*client.Snapshot)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// No indexers: the source never looks objects up by namespace.
	none := cache.Indexers{}
	svcs := coreinformers.NewServiceInformer(s.cs, metav1.NamespaceAll, s.cfg.ResyncPeriod, none)
	slices := discoveryinformers.NewEndpointSliceInformer(s.cs, metav1.NamespaceAll, s.cfg.ResyncPeriod, none)
	infs := []cache.SharedIndexInformer{svcs, slices}
	proxyName := s.cfg.ProxyName
	if err := svcs.SetTransform(transform(func(o *corev1.Service) *cachedService {
		return &cachedService{ObjectMeta: trimMeta(&o.ObjectMeta), c: nodelocal.ConvertServiceObject(o, proxyName)}
	})); err != nil {
		return fmt.Errorf("kube source: service informer: %w", err)
	}
	if err := slices.SetTransform(transform(func(o *discoveryv1.EndpointSlice) *cachedSlice {
		return &cachedSlice{ObjectMeta: trimMeta(&o.ObjectMeta), p: nodelocal.ParseSliceObject(o)}
	})); err != nil {
		return fmt.Errorf("kube source: EndpointSlice informer: %w", err)
	}
	// A registration has synced once its handler has seen the whole
	// initial list (the informer's own HasSynced only says its store has).
	var synced []cache.InformerSynced
	reg, err := svcs.AddEventHandler(handler(s, func(st *nodelocal.State, o *cachedService) error { return st.SetConvertedService(&o.c) },
		func(st *nodelocal.State, ns, name string) { st.DeleteService(ns, name) }))
	if err != nil {
		return fmt.Errorf("kube source: service informer: %w", err)
	}
	synced = append(synced, reg.HasSynced)
	reg, err = slices.AddEventHandler(handler(s, func(st *nodelocal.State, o *cachedSlice) error { return st.SetParsedSlice(&o.p) },
		func(st *nodelocal.State, ns, name string) { st.DeleteSlice(ns, name) }))
	if err != nil {
		return fmt.Errorf("kube source: EndpointSlice informer: %w", err)
	}
	synced = append(synced, reg.HasSynced)
	if s.cfg.NodeName != "" {
		nodes := coreinformers.NewFilteredNodeInformer(s.cs, s.cfg.ResyncPeriod, none, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.cfg.NodeName).String()
		})
		// The cache keeps the node's name, version, zone label, deletion
		// timestamp and the autoscaler's taint only.
		if err := nodes.SetTransform(transform(func(o *corev1.Node) *corev1.Node {
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
			return n
		})); err != nil {
			return fmt.Errorf("kube source: node informer: %w", err)
		}
		// The handlers run under s.mu (handler), which also guards s.node.
		// The field selector keeps other nodes out, but not every client
		// (fakes) honours it.
		reg, err := nodes.AddEventHandler(handler(s, func(st *nodelocal.State, o *corev1.Node) error {
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
		if err != nil {
			return fmt.Errorf("kube source: node informer: %w", err)
		}
		synced = append(synced, reg.HasSynced)
		infs = append(infs, nodes)
	}
	var wg sync.WaitGroup
	for _, inf := range infs {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
	defer func() {
		cancel()
		wg.Wait()
	}()

	if !waitSynced(ctx, synced) {
		if ctx.Err() != nil {
			return nil // stopped before the first snapshot
		}
		return errors.New("kube source: informers did not sync")
	}
	s.log.Info("informers synced", "node", s.cfg.NodeName)

	s.mu.Lock()
	snap := s.state.Snapshot()
	s.delivered = true
	s.mu.Unlock()
	deliver(snap)

	s.kick.Run(ctx, func() {
		s.mu.Lock()
		snap := s.state.Snapshot()
		s.mu.Unlock()
		if len(snap.Changes) > 0 || s.cfg.SyncPeriod > 0 {
			deliver(snap)
		}
	})
	return nil
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

// waitSynced polls the informers every 2ms (client-go's WaitForCacheSync
// polls every 100ms, which would add up to 100ms to startup).
func waitSynced(ctx context.Context, synced []cache.InformerSynced) bool {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		all := true
		for _, s := range synced {
			all = all && s()
		}
		if all {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

var _ client.Source = (*Source)(nil)
