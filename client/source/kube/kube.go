// Package kube is a source that watches the Kubernetes API with client-go
// shared informers (Services, discovery.k8s.io/v1 EndpointSlices and this
// node's Node), applies the node-local rules of package nodelocal and
// delivers snapshots once the informers have synced, coalescing bursts of
// events into at most one snapshot per minimum interval.
//
// It reads through API: in production REST clients of the three API
// groups it reads (NewAPI, with a scheme of those groups alone), not
// client-go's clientset, whose scheme, typed clients and generated
// informers compile every API group into each sink (docs/build-times.md);
// tests adapt a fake clientset with package kubetest. NewRecorder writes
// Events through the same API.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// NewForConfig returns a source reading through NewAPI's clients for the
// kubeconfig at path (empty: in-cluster).
func NewForConfig(path string, cfg Config) (*Source, error) {
	rc, err := RESTConfig(path)
	if err != nil {
		return nil, err
	}
	return newForRESTConfig(rc, cfg)
}

// newForRESTConfig returns a source reading through NewAPI's clients for
// rc, whose transport errors are logged as they happen (see causes): client-go
// retries a refused list for about ten seconds before its informer sees
// the error.
func newForRESTConfig(rc *rest.Config, cfg Config) (*Source, error) {
	c := &causes{}
	rc = rest.CopyConfig(rc)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &errorLogger{next: rt, causes: c} })
	api, err := NewAPI(rc)
	if err != nil {
		return nil, err
	}
	s := New(api, cfg)
	c.log = s.log
	s.causes = c
	return s, nil
}

// Source watches the API and delivers node-local snapshots.
type Source struct {
	api API
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
	// causes logs why the API server cannot be reached or answers with
	// an error, once per distinct cause.
	causes *causes
}

// API returns the API the source watches through, for a sink's own writes
// to the API (Events on Services).
func (s *Source) API() API { return s.api }

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

// New returns a source reading from api.
func New(api API, cfg Config) *Source {
	if cfg.MinInterval == 0 {
		cfg.MinInterval = time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("source", "kube")
	return &Source{
		causes: &causes{log: log},
		api:    api,
		cfg:    cfg,
		log:    log,
		state:  nodelocal.NewState(nodelocal.Config{NodeName: cfg.NodeName, ProxyName: cfg.ProxyName, Logger: log, Needs: cfg.Needs}),
		kick:   coalesce.New(cfg.MinInterval, cfg.SyncPeriod),
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

	ws, err := s.informers()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	synced := make([]cache.InformerSynced, len(ws))
	for i, w := range ws {
		synced[i] = w.synced
		wg.Go(func() { w.inf.RunWithContext(ctx) })
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
		changed := s.state.Changed()
		s.mu.Unlock()
		if changed || s.cfg.SyncPeriod > 0 {
			deliver(snap)
		}
	})
	return nil
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
