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
	"k8s.io/client-go/informers"
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
func (s *Source) Stats() client.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state.Stats()
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
func (s *Source) Run(ctx context.Context, deliver func(*client.Snapshot)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	factory := informers.NewSharedInformerFactory(s.cs, s.cfg.ResyncPeriod)
	svcs := factory.Core().V1().Services().Informer()
	slices := factory.Discovery().V1().EndpointSlices().Informer()
	// A registration has synced once its handler has seen the whole
	// initial list (the informer's own HasSynced only says its store has).
	var synced []cache.InformerSynced
	reg, err := svcs.AddEventHandler(handler(s, func(st *nodelocal.State, o *corev1.Service) error { return st.SetService(o) },
		func(st *nodelocal.State, ns, name string) { st.DeleteService(ns, name) }))
	if err != nil {
		return fmt.Errorf("kube source: service informer: %w", err)
	}
	synced = append(synced, reg.HasSynced)
	reg, err = slices.AddEventHandler(handler(s, func(st *nodelocal.State, o *discoveryv1.EndpointSlice) error { return st.SetSlice(o) },
		func(st *nodelocal.State, ns, name string) { st.DeleteSlice(ns, name) }))
	if err != nil {
		return fmt.Errorf("kube source: EndpointSlice informer: %w", err)
	}
	synced = append(synced, reg.HasSynced)
	var nodeFactory informers.SharedInformerFactory
	if s.cfg.NodeName != "" {
		nodeFactory = informers.NewSharedInformerFactoryWithOptions(s.cs, s.cfg.ResyncPeriod,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.cfg.NodeName).String()
			}))
		nodes := nodeFactory.Core().V1().Nodes().Informer()
		reg, err := nodes.AddEventHandler(handler(s, func(st *nodelocal.State, o *corev1.Node) error { st.SetNode(o); return nil },
			func(st *nodelocal.State, _, name string) { st.DeleteNode(name) }))
		if err != nil {
			return fmt.Errorf("kube source: node informer: %w", err)
		}
		synced = append(synced, reg.HasSynced)
		nodeFactory.Start(ctx.Done())
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
		if nodeFactory != nil {
			nodeFactory.Shutdown()
		}
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

// handler adapts typed set/delete functions to an informer event handler.
func handler[T metav1.Object](s *Source, set func(*nodelocal.State, T) error, del func(st *nodelocal.State, ns, name string)) cache.ResourceEventHandler {
	onSet := func(obj any) {
		o, ok := obj.(T)
		if !ok {
			s.log.Warn("unexpected object from informer", "type", fmt.Sprintf("%T", obj))
			return
		}
		// Errors are logged and counted by the state.
		s.update(func(st *nodelocal.State) { _ = set(st, o) })
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

// waitSynced polls the informers every 10ms (client-go's WaitForCacheSync
// polls every 100ms, which would add up to 100ms to startup).
func waitSynced(ctx context.Context, synced []cache.InformerSynced) bool {
	t := time.NewTicker(10 * time.Millisecond)
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
