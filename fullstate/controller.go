// Package fullstate is the IPVS full-state sink's controller: on every
// snapshot of the cluster it renders every kernel object the node needs,
// keeps them in diffstores, and writes only what changed. At start-up it
// adopts what the kernel already holds, so a restart with an unchanged
// cluster writes nothing; a periodic resync re-reads the kernel and repairs
// drift.
package fullstate

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
)

// ServiceType is a Kubernetes service type.
type ServiceType string

// The service types that get virtual servers.
const (
	ClusterIPService    ServiceType = "ClusterIP"
	NodePortService     ServiceType = "NodePort"
	LoadBalancerService ServiceType = "LoadBalancer"
)

// String returns the type's name.
func (st ServiceType) String() string { return string(st) }

// SessionAffinity is a service's ClientIP affinity, nil when off.
type SessionAffinity struct {
	ClientIP *client.SessionAffinity
}

// Reader reads what the kernel holds of the sink's objects; nil in a dry run.
type Reader interface {
	Read() (*dataplane.State, error)
}

// SyncStats describes one sync.
type SyncStats = dataplane.SyncStats

// Controller handles full-state callbacks. It is safe for concurrent use:
// callbacks and resyncs are serialized.
type Controller struct {
	cfg     render.Config
	mgr     *Manager
	applier *dataplane.Applier
	reader  Reader
	log     *slog.Logger
	// OnSync, when set, is called after every sync (metrics).
	OnSync func(SyncStats)
	// ProxyModeAddress is where ServeProxyMode and SetUpHttpListen listen.
	ProxyModeAddress string
	// Handler is what they serve: the sink runtime's handler of the
	// metrics address (/proxyMode, /metrics, /healthz), set by the
	// runtime when it builds the controller.
	Handler http.Handler

	mu      sync.Mutex
	adopted bool
	synced  bool
}

// NewController returns a controller that renders with cfg, writes through
// applier and adopts the kernel's state through reader (nil for none).
func NewController(cfg render.Config, applier *dataplane.Applier, reader Reader, log *slog.Logger) *Controller {
	if log == nil {
		log = slog.Default()
	}
	return &Controller{cfg: cfg, mgr: NewManager(applier), applier: applier, reader: reader, log: log}
}

// Manager returns the controller's IPVS manager.
func (c *Controller) Manager() *Manager { return c.mgr }

// adopt reads the kernel once, before the first sync.
func (c *Controller) adopt() error {
	if c.adopted || c.reader == nil {
		c.adopted = true
		return nil
	}
	st, err := c.reader.Read()
	if err != nil {
		return err
	}
	c.mgr.Reconcile(st)
	c.adopted = true
	return nil
}

// Callback consumes one snapshot (the channel closes at its end), renders
// every service, and writes the differences to the kernel.
func (c *Controller) Callback(ch <-chan *client.ServiceEndpoints) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := SyncStats{Start: time.Now()}
	if err := c.adopt(); err != nil {
		// Without the kernel's state the diff would be wrong: drain the
		// snapshot and try again next time.
		for range ch {
		}
		st.Err = err
		c.finish(&st, "sync")
		return
	}
	c.mgr.Reset()
	for se := range ch {
		st.Services++
		for _, err := range render.Render(se, c.cfg, c.mgr) {
			st.RenderErrors++
			c.log.Warn("service skipped in part", "error", err)
		}
		if se.NoLocalEndpoints() {
			st.NoLocalEndpoints++
		}
	}
	c.mgr.Done()
	c.apply(&st)
	c.synced = true
	c.finish(&st, "sync")
}

func (c *Controller) apply(st *SyncStats) {
	res := c.mgr.Apply()
	st.Writes, st.Failed = res.Writes, len(res.Failed)
	if err := res.Err(); err != nil {
		st.Err = err
	}
	c.applier.ReapInto(st)
}

// finish reports and logs a sync; what is "sync" (a snapshot, with its
// services) or "resync" (the periodic repair, which reads no snapshot).
// The report comes first: the kernel is programmed, and the metrics of
// the time until then must not count writing the log line.
func (c *Controller) finish(st *SyncStats, what string) {
	st.Duration = time.Since(st.Start)
	if c.OnSync != nil {
		c.OnSync(*st)
	}
	if st.Err != nil {
		c.log.Error(what+" failed in part; failed objects are retried at the next sync", st.LogAttrs(what == "sync")...)
	} else {
		c.log.Info(what, append(st.LogAttrs(what == "sync"), "duration", st.Duration)...)
	}
}

// Resync re-reads the kernel and repairs what drifted from the last
// snapshot (a destination deleted by hand comes back, an address added by
// hand to the dummy link goes), and removes terminated destinations. Before
// the first snapshot it does nothing.
func (c *Controller) Resync() SyncStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := SyncStats{Start: time.Now()}
	if !c.synced {
		return st
	}
	if c.reader == nil {
		return c.repair(st, nil, nil)
	}
	k, err := c.reader.Read()
	return c.repair(st, k, err)
}

// StartResync begins a resync whose kernel read runs apart from the
// syncs, so that a snapshot arriving meanwhile waits for no read of the
// whole kernel: read (on any goroutine) reads the kernel while Callback
// goes on; finish, called once read returned, on the goroutine that calls
// Callback, repairs the drift the read showed, leaving alone the objects
// written since the read started (dataplane.Applier.ReadApart). Before the
// first snapshot, or without a reader, read does nothing and finish is
// Resync.
func (c *Controller) StartResync() (read func() (finish func() SyncStats)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.synced || c.reader == nil {
		return func() func() SyncStats { return c.Resync }
	}
	return c.applier.ReadApart(&c.mu, c.reader, func(start time.Time, k *dataplane.State, err error) SyncStats {
		return c.repair(SyncStats{Start: start}, k, err)
	})
}

// repair is a resync once the kernel was read: k (nil without a reader)
// or the read's error.
func (c *Controller) repair(st SyncStats, k *dataplane.State, err error) SyncStats {
	if err != nil {
		st.Err = err
		c.finish(&st, "resync")
		return st
	}
	if k != nil {
		c.mgr.Reconcile(k)
	}
	c.mgr.Done()
	c.apply(&st)
	c.finish(&st, "resync")
	return st
}
