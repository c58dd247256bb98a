// Package ipvssink is what the IPVS sink binaries add to the sink runtime:
// the kernel connections (IPVS, ipset, rtnetlink, conntrack), node setup
// (modules, sysctls, kube-ipvs0, ipsets, iptables rules), the applier and
// reader the controllers work through, and the two controllers
// (full-state and incremental) adapted to runtime.Controller.
package ipvssink

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/diff"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/fullstate"
	"github.com/proxysinks/proxysinks/host/conntrack"
	"github.com/proxysinks/proxysinks/host/kernel"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/incremental"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/link"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// Deps is what an IPVS controller is built from.
type Deps struct {
	Render  render.Config
	Applier *dataplane.Applier
	// Reader reads the kernel's state (nil in a dry run).
	Reader interface {
		Read() (*dataplane.State, error)
	}
	Log    *slog.Logger
	OnSync func(dataplane.SyncStats)
	// Handler is the runtime's metrics handler (nil in a dry run).
	Handler http.Handler
	// Repair, when set, repairs the node's drift (dataplane.Node.Repair)
	// before every resync (nil in a dry run).
	Repair func() ([]string, error)
}

// repairThen runs d.Repair (repair), then resync; a repair error joins
// the resync's.
func repairThen(d Deps, resync func() dataplane.SyncStats) dataplane.SyncStats {
	err := repair(d)
	st := resync()
	st.Err = errors.Join(st.Err, err)
	return st
}

// repairThenSplit is repairThen for a split resync (runtime.SplitResyncer):
// the repair runs before start, and its error joins the resync's at the
// finish.
func repairThenSplit(d Deps, start func() func() func() dataplane.SyncStats) func() func() dataplane.SyncStats {
	err := repair(d)
	read := start()
	return func() func() dataplane.SyncStats {
		finish := read()
		return func() dataplane.SyncStats {
			st := finish()
			st.Err = errors.Join(st.Err, err)
			return st
		}
	}
}

// repair runs d.Repair when set, logging what it wrote and its error.
func repair(d Deps) error {
	if d.Repair == nil {
		return nil
	}
	wrote, err := d.Repair()
	if len(wrote) > 0 {
		d.Log.Warn("node drift repaired", "written", wrote)
	}
	if err != nil {
		d.Log.Error("node drift not repaired in part; retried at the next resync", "error", err)
	}
	return err
}

// Make builds an IPVS controller.
type Make func(Deps) runtime.Controller

// Sink returns the runtime.Sink of an IPVS sink binary whose controller mk
// builds; /proxyMode answers "ipvs".
func Sink(name, usage string, mk Make) runtime.Sink {
	return runtime.Sink{Name: name, Usage: usage, Mode: "ipvs", New: func(env runtime.Env) (runtime.Built, error) { return build(env, mk) },
		Cleanup: cleanup}
}

// cleanup removes what an IPVS sink, or kube-proxy's IPVS mode, programmed
// on this node (dataplane.Node.Cleanup): --cleanup.
func cleanup(c runtime.Config, log *slog.Logger) error {
	s, err := dialSockets()
	if err != nil {
		return err
	}
	defer s.close()
	addrs := c.NodeAddresses
	if len(addrs) == 0 {
		// Node ports kube-proxy left are recognised on the node's addresses.
		if addrs, err = s.links.NodeAddresses(link.DefaultDummy); err != nil {
			return fmt.Errorf("list node addresses: %w", err)
		}
	}
	addrs = c.NodePortFilter(addrs)
	node := &dataplane.Node{Cfg: nodeConfig(c, addrs, dataplane.HostFamilies(HostSysctl)), Kernel: s.kernel(dataplane.BindAddresses), Log: log}
	removed, err := node.Cleanup()
	log.Info("removed", "objects", removed)
	return err
}

func nodeConfig(c runtime.Config, addrs []netip.Addr, families []xtables.Family) dataplane.NodeConfig {
	return dataplane.NodeConfig{
		Families: families, Dummy: link.DefaultDummy, Scheduler: c.Scheduler,
		Rules:     rules.Config{MasqueradeBit: c.MasqueradeBit, MasqueradeAll: c.MasqueradeAll, ClusterCIDRs: c.ClusterCIDRs, RandomFully: true},
		StrictARP: c.StrictARP, TCPTimeout: c.TCPTimeout, TCPFinTimeout: c.TCPFinTimeout, UDPTimeout: c.UDPTimeout,
		NodeAddresses: addrs, ExcludeCIDRs: c.ExcludeCIDRs,
	}
}

// HostSysctl is where the IPVS sinks read the host's IP families
// (dataplane.HostFamilies), in a dry run too; tests point it at a
// /proc/sys of their own so that their output does not depend on the
// machine's IPv6.
var HostSysctl = kernel.Sysctl{}

// renderConfig is how services are rendered on this node. Its Families are
// decided once, from the host (dataplane.HostFamilies), and the same list
// makes the node's sets and rules (nodeConfig).
func renderConfig(c runtime.Config, addrs []netip.Addr, s kernel.Sysctl) render.Config {
	return render.Config{Scheduler: c.Scheduler, Weight: c.Weight, NodeAddresses: addrs, Families: dataplane.HostFamilies(s)}
}

// build connects to the kernel, prepares the node and builds the
// controller; in a dry run it builds the controller over the dry-run
// printer only.
func build(env runtime.Env, mk Make) (runtime.Built, error) {
	c := env.Config
	rc := renderConfig(c, env.NodeAddresses, HostSysctl)
	if env.DryRun != nil {
		a := dataplane.NewApplier(dataplane.DryRun{Out: env.DryRun, Binding: c.VIPBinding})
		a.Ordered = true
		return runtime.Built{Controller: mk(Deps{Render: rc, Applier: a, Log: env.Log, OnSync: env.OnSync})}, nil
	}
	var closers []func() error
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	// The writes and the resync's reads, which run beside them
	// (runtime.SplitResyncer), have sockets of their own: a dump of
	// 10,000 virtual servers or set entries does not hold a write back.
	writes, err := dialSockets()
	if err != nil {
		return runtime.Built{}, err
	}
	closers = append(closers, writes.close)
	reads, err := dialSockets()
	if err != nil {
		closeAll()
		return runtime.Built{}, err
	}
	closers = append(closers, reads.close)
	k := writes.kernel(c.VIPBinding)
	node := &dataplane.Node{Cfg: nodeConfig(c, env.NodeAddresses, rc.Families), Kernel: k, Log: env.Log}
	if err := node.Setup(); err != nil {
		closeAll()
		return runtime.Built{}, err
	}
	if w := bridgeWarning("/proc/sys"); w != "" {
		env.Log.Warn(w)
	}
	applier := kernelApplier(k)
	applier.EntryRules = node.EnsureRules
	if ct, err := conntrack.Dial(nil); err != nil {
		env.Log.Warn("no conntrack: stale UDP flows of removed endpoints will not be flushed", "error", err)
	} else {
		closers = append(closers, ct.Close)
		applier.Conntrack = ct
	}
	reader := &dataplane.Node{Cfg: node.Cfg, Kernel: reads.kernel(c.VIPBinding), Log: env.Log}
	ctl := mk(Deps{Render: rc, Applier: applier, Reader: reader, Log: env.Log, OnSync: env.OnSync, Handler: env.Handler, Repair: node.Repair})
	syscalls := func() uint64 { return writes.calls() + reads.calls() }
	return runtime.Built{Controller: ctl, Syscalls: syscalls, Close: closeAll}, nil
}

// sockets are the netlink sockets a dataplane.Kernel speaks through.
type sockets struct {
	ipvs  *ipvs.Conn
	ipset *ipset.Conn
	links *link.Conn
}

// dialSockets opens one socket of each kind.
func dialSockets() (sockets, error) {
	var s sockets
	var err error
	if s.ipvs, err = ipvs.Dial(nil); err != nil {
		return s, err
	}
	if s.ipset, err = ipset.Dial(nil); err != nil {
		s.close()
		return s, err
	}
	if s.links, err = link.Dial(nil); err != nil {
		s.close()
		return s, err
	}
	return s, nil
}

// close closes the sockets opened; it returns nil, for a closer list.
func (s sockets) close() error {
	if s.links != nil {
		s.links.Close()
	}
	if s.ipset != nil {
		s.ipset.Close()
	}
	if s.ipvs != nil {
		s.ipvs.Close()
	}
	return nil
}

// calls counts the system calls made through the sockets.
func (s sockets) calls() uint64 {
	a, b, l := s.ipvs.Counters(), s.ipset.Stats(), s.links.Stats()
	return a.Sendmsg + a.Recvmsg + b.Sendmsg + b.Recvmsg + l.Sendmsg + l.Replies
}

// kernel is a Kernel over the sockets.
func (s sockets) kernel(b dataplane.Binding) *dataplane.Kernel {
	return &dataplane.Kernel{IPVSConn: s.ipvs, IPSet: s.ipset, Link: s.links, Dummy: link.DefaultDummy, Binding: b}
}

// fullStateController adapts the full-state controller to the runtime.
type fullStateController struct {
	c *fullstate.Controller
	d Deps
}

func (f fullStateController) Snapshot(s *client.Snapshot) { client.ToCallback(f.c.Callback)(s) }

func (f fullStateController) Resync() dataplane.SyncStats { return repairThen(f.d, f.c.Resync) }

// StartResync repairs the node, then starts the controller's resync, whose
// kernel read runs while snapshots go on being applied
// (runtime.SplitResyncer).
func (f fullStateController) StartResync() func() func() dataplane.SyncStats {
	return repairThenSplit(f.d, f.c.StartResync)
}

// FullState builds the IPVS full-state controller (the ipvs-fullstate
// sink). Its seed entry points ServeProxyMode and SetUpHttpListen serve the
// runtime's handler.
func FullState(d Deps) runtime.Controller {
	var reader fullstate.Reader
	if d.Reader != nil {
		reader = d.Reader
	}
	c := fullstate.NewController(d.Render, d.Applier, reader, d.Log)
	c.OnSync = d.OnSync
	c.Handler = d.Handler
	return fullStateController{c: c, d: d}
}

// incrementalController adapts the incremental controller to the
// runtime: snapshots become events through client/diff.Events, which ends
// each with Sync.
type incrementalController struct {
	c  *incremental.Controller
	ev *diff.Events
	d  Deps
}

func (i incrementalController) Snapshot(s *client.Snapshot) { i.ev.Apply(s) }

func (i incrementalController) Resync() dataplane.SyncStats { return repairThen(i.d, i.c.Resync) }

// StartResync repairs the node, then starts the controller's resync, whose
// kernel read runs while snapshots go on being applied
// (runtime.SplitResyncer).
func (i incrementalController) StartResync() func() func() dataplane.SyncStats {
	return repairThenSplit(i.d, i.c.StartResync)
}

// Incremental builds the IPVS incremental controller (the ipvs-incremental
// sink).
func Incremental(d Deps) runtime.Controller {
	var reader incremental.Reader
	if d.Reader != nil {
		reader = d.Reader
	}
	c := incremental.New(d.Render, d.Applier, reader, d.Log)
	c.OnSync = d.OnSync
	return incrementalController{c: c, ev: diff.NewEvents(c), d: d}
}

// kernelApplier returns the applier the sinks write to the kernel with:
// its writes overlap (dataplane.Applier.Overlap), which Kernel's separate
// sockets allow.
func kernelApplier(k *dataplane.Kernel) *dataplane.Applier {
	a := dataplane.NewApplier(k)
	a.Overlap = true
	return a
}
