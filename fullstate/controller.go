// Package fullstate is the IPVS full-state sink's controller: on every
// snapshot of the cluster it renders every kernel object the node needs,
// keeps them in diffstores, and writes only what changed. At start-up it
// adopts what the kernel already holds, so a restart with an unchanged
// cluster writes nothing; a periodic resync re-reads the kernel and repairs
// drift. The round around that (adoption, writes, reaping, resync, logs)
// is the controller core both IPVS sinks share (dataplane/controller); the
// seed's names are in fullstate/seed.
package fullstate

import (
	"iter"
	"log/slog"
	"net/netip"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/controller"
	"github.com/proxysinks/proxysinks/dataplane/render"
)

// Controller renders full-state snapshots. It is safe for concurrent use:
// snapshots and resyncs are serialized.
type Controller struct {
	cfg  render.Config
	mgr  *Manager
	core *controller.Core
	// OnSync, when set, is called after every sync (metrics).
	OnSync func(dataplane.SyncStats)
}

// NewController returns a controller that renders with cfg, writes through
// applier and adopts the kernel's state through reader (nil for none).
func NewController(cfg render.Config, applier *dataplane.Applier, reader controller.Reader, log *slog.Logger) *Controller {
	c := &Controller{cfg: cfg, mgr: NewManager(applier)}
	c.core = &c.mgr.core
	c.core.Init(applier, reader, log, c.core.Records)
	c.core.OnSync = func(st dataplane.SyncStats) {
		if c.OnSync != nil {
			c.OnSync(st)
		}
	}
	return c
}

// SetNodeAddresses replaces the addresses NodePorts are served on
// (render.Config.NodeAddresses): the next snapshot renders with them.
func (c *Controller) SetNodeAddresses(addrs []netip.Addr) {
	c.core.Mu.Lock()
	defer c.core.Mu.Unlock()
	c.cfg.NodeAddresses = addrs
}

// Manager returns the controller's IPVS manager.
func (c *Controller) Manager() *Manager { return c.mgr }

// Snapshot renders every service of s and writes the differences to the
// kernel.
func (c *Controller) Snapshot(s *client.Snapshot) { c.Sync(s.All()) }

// Sync renders every service of one snapshot and writes the differences
// to the kernel. Before the first sync it adopts what the kernel holds;
// when that read fails, it does not consume all and writes nothing (the
// next snapshot tries again).
func (c *Controller) Sync(all iter.Seq[*client.ServiceEndpoints]) dataplane.SyncStats {
	c.core.Mu.Lock()
	defer c.core.Mu.Unlock()
	return c.core.Sync(func() (n controller.Counts) {
		c.mgr.Reset()
		for se := range all {
			n.Services++
			for _, err := range render.Render(se, c.cfg, c.mgr) {
				n.RenderErrors++
				c.core.Log.Warn("service skipped in part", "error", err)
			}
			if se.NoLocalEndpoints() {
				n.NoLocalEndpoints++
			}
		}
		c.mgr.Done()
		return n
	})
}

// Resync re-reads the kernel and repairs what drifted from the last
// snapshot (a destination deleted by hand comes back, an address added by
// hand to the dummy link goes), and removes terminated destinations. Before
// the first snapshot it does nothing.
func (c *Controller) Resync() dataplane.SyncStats {
	c.core.Mu.Lock()
	defer c.core.Mu.Unlock()
	return c.core.Resync(notYet, c.repair)
}

// Retry writes, alone, the objects the last rounds left unwritten whose
// quarantine retry is due (controller.Core.Retry); it reads no snapshot
// and no kernel.
func (c *Controller) Retry() dataplane.SyncStats {
	c.core.Mu.Lock()
	defer c.core.Mu.Unlock()
	return c.core.Retry(c.repair)
}

// StartResync begins a resync whose kernel read runs apart from the
// syncs, so that a snapshot arriving meanwhile waits for no read of the
// whole kernel (controller.Core.StartResync). Before the first snapshot,
// or without a reader, read does nothing and finish is Resync.
func (c *Controller) StartResync() (read func() (finish func() dataplane.SyncStats)) {
	return c.core.StartResync(c.Resync, c.repair)
}

// repair is a resync's decision: the last snapshot's objects against the
// kernel's, as reconciled. It reads no snapshot: it counts nothing.
func (c *Controller) repair() controller.Counts {
	c.mgr.Done()
	return controller.Counts{}
}

// notYet is a resync before the first snapshot: nothing.
func notYet() dataplane.SyncStats { return dataplane.SyncStats{Start: time.Now()} }
