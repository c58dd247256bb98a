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
	"net/netip"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/diff"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/controller"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/fullstate"
	"github.com/proxysinks/proxysinks/host/addrwatch"
	"github.com/proxysinks/proxysinks/host/conntrack"
	"github.com/proxysinks/proxysinks/host/kernel"
	"github.com/proxysinks/proxysinks/host/quarantine"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/incremental"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/link"
	"github.com/proxysinks/proxysinks/nftables"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// Deps is what an IPVS controller is built from.
type Deps struct {
	Render  render.Config
	Applier *dataplane.Applier
	// Reader reads the kernel's state (nil in a dry run).
	Reader controller.Reader
	Log    *slog.Logger
	OnSync func(dataplane.SyncStats)
	// Repair, when set, repairs the node's drift (dataplane.Node.Repair)
	// before every resync (nil in a dry run).
	Repair func() ([]string, error)
	// NodeAddresses, when set, hands the node's setup and reader the
	// addresses NodePorts are served on when they change
	// (dataplane.NodeConfig.NodeAddresses: node ports adopted from
	// kube-proxy are recognised on them).
	NodeAddresses func([]netip.Addr)
	// Before, when set, sees every snapshot before the controller does
	// (the rules follow the Node's pod CIDRs, nodeCIDRs).
	Before func(*client.Snapshot)
}

// resyncer is what the adapter needs of an IPVS controller besides its
// snapshots: both controllers' resyncs (dataplane/controller.Core).
type resyncer interface {
	Resync() dataplane.SyncStats
	Retry() dataplane.SyncStats
	StartResync() (read func() (finish func() dataplane.SyncStats))
	SetNodeAddresses([]netip.Addr)
}

// adapter adapts an IPVS controller to the runtime: snapshot hands it a
// snapshot; every resync repairs the node first.
type adapter struct {
	snapshot func(*client.Snapshot)
	c        resyncer
	d        Deps
}

// Snapshot hands the controller a snapshot, after Deps.Before
// (runtime.Controller).
func (a adapter) Snapshot(s *client.Snapshot) {
	if a.d.Before != nil {
		a.d.Before(s)
	}
	a.snapshot(s)
}

var _ runtime.NodePortsSetter = adapter{}

// SetNodePorts hands the controller, and the node's setup and reader, the
// addresses NodePorts are served on (runtime.NodePortsSetter); the next
// snapshot programs them.
func (a adapter) SetNodePorts(n runtime.NodePorts) {
	a.c.SetNodeAddresses(n.Addrs)
	if a.d.NodeAddresses != nil {
		a.d.NodeAddresses(n.Addrs)
	}
}

// Resync repairs the node (Deps.Repair), then resyncs the controller; a
// repair error joins the resync's (runtime.Controller).
func (a adapter) Resync() runtime.SyncStats {
	err := repair(a.d)
	st := a.c.Resync()
	st.Err = errors.Join(st.Err, err)
	return syncStats(st)
}

// Retry writes, alone, the objects the kernel refused whose retry is due
// (runtime.Retrier).
func (a adapter) Retry() runtime.SyncStats { return syncStats(a.c.Retry()) }

// StartResync repairs the node, then starts the controller's resync, whose
// kernel read runs while snapshots go on being applied
// (runtime.SplitResyncer); the repair's error joins the resync's at the
// finish.
func (a adapter) StartResync() (read func() (finish func() runtime.SyncStats)) {
	err := repair(a.d)
	start := a.c.StartResync()
	return func() func() runtime.SyncStats {
		finish := start()
		return func() runtime.SyncStats {
			st := finish()
			st.Err = errors.Join(st.Err, err)
			return syncStats(st)
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
		Cleanup: cleanup, Flags: flags, Parse: parse, Fields: fields, ExcludeLinks: []string{link.DefaultDummy}, Metrics: referenceMetrics}
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
		if addrs, err = addrwatch.List(addrwatch.Config{Exclude: []string{link.DefaultDummy}}); err != nil {
			return err
		}
	}
	addrs = c.SelectNodePorts(addrs, runtime.PrimaryIPs(nil, c.BindAddress)).Addrs
	node := &dataplane.Node{Cfg: nodeConfig(c, config(c), addrs, dataplane.HostFamilies(HostSysctl)), Kernel: s.kernel(dataplane.BindAddresses), Log: log}
	removed, err := node.Cleanup()
	log.Info("removed", "objects", removed)
	return err
}

// nodeConfig is the node's setup from the runtime's flags (c) and the IPVS
// sinks' (ic).
func nodeConfig(c runtime.Config, ic Config, addrs []netip.Addr, families []xtables.Family) dataplane.NodeConfig {
	return dataplane.NodeConfig{
		Families: families, Dummy: link.DefaultDummy, Scheduler: ic.Scheduler,
		Rules:     rules.Config{MasqueradeBit: c.MasqueradeBit, MasqueradeAll: c.MasqueradeAll, Local: c.LocalTraffic(nil), RandomFully: true},
		StrictARP: ic.StrictARP, TCPTimeout: ic.TCPTimeout, TCPFinTimeout: ic.TCPFinTimeout, UDPTimeout: ic.UDPTimeout,
		NodeAddresses: addrs, ExcludeCIDRs: ic.ExcludeCIDRs,
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
func renderConfig(ic Config, addrs []netip.Addr, s kernel.Sysctl) render.Config {
	return render.Config{Scheduler: ic.Scheduler, Weight: ic.Weight, NodeAddresses: addrs, Families: dataplane.HostFamilies(s)}
}

// build connects to the kernel, prepares the node and builds the
// controller; in a dry run it builds the controller over the dry-run
// printer only.
func build(env runtime.Env, mk Make) (runtime.Built, error) {
	c, ic := env.Config, config(env.Config)
	rc := renderConfig(ic, env.NodePorts.Addrs, HostSysctl)
	var onSync func(dataplane.SyncStats)
	if env.OnSync != nil {
		onSync = func(st dataplane.SyncStats) { env.OnSync(syncStats(st)) }
	}
	if env.DryRun != nil {
		a := dataplane.NewApplier(dataplane.DryRun{Out: env.DryRun, Binding: ic.VIPBinding})
		a.Ordered = true
		return runtime.Built{Controller: mk(Deps{Render: rc, Applier: a, Log: env.Log, OnSync: onSync})}, nil
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
	k := writes.kernel(ic.VIPBinding)
	node := &dataplane.Node{Cfg: nodeConfig(c, ic, env.NodePorts.Addrs, rc.Families), Kernel: k, Log: env.Log}
	if err := node.Setup(); err != nil {
		closeAll()
		return runtime.Built{}, err
	}
	// As kube-proxy's IPVS mode at start: the nftables mode's tables
	// would go on answering for the services.
	nftables.CleanupForOtherMode(env.Log)
	if w := bridgeWarning("/proc/sys"); w != "" {
		env.Log.Warn(w)
	}
	applier := kernelApplier(k)
	// Refused objects are retried from 1 s up to the sync period.
	applier.Quarantine = quarantine.New[any](quarantine.DefaultMin, c.SyncPeriod)
	applier.EntryRules = node.EnsureRules
	var ctr conntrack.Reconciler
	if ct, err := conntrack.Dial(nil); err != nil {
		env.Log.Warn("no conntrack: stale UDP flows will not be deleted", "error", err)
	} else {
		closers = append(closers, ct.Close)
		ctr = ct
	}
	if ic.Stats && env.MetricsText != nil {
		// Scrapes dump through a socket of their own.
		stats, err := ipvs.Dial(nil)
		if err != nil {
			closeAll()
			return runtime.Built{}, fmt.Errorf("--ipvs-stats: %w", err)
		}
		closers = append(closers, stats.Close)
		env.MetricsText(NewStats(stats).AppendText)
	}
	reader := &dataplane.Node{Cfg: node.Cfg, Kernel: reads.kernel(ic.VIPBinding), Log: env.Log}
	setAddrs := func(addrs []netip.Addr) { node.Cfg.NodeAddresses, reader.Cfg.NodeAddresses = addrs, addrs }
	d := Deps{Render: rc, Applier: applier, Reader: reader, Log: env.Log, OnSync: onSync, Repair: node.Repair, NodeAddresses: setAddrs}
	if c.DetectLocalMode == xtables.LocalNodeCIDR {
		d.Before = nodeCIDRs{node: node, c: c, log: env.Log}.follow
	}
	ctl := mk(d)
	syscalls := func() uint64 { return writes.calls() + reads.calls() }
	return runtime.Built{Controller: ctl, Syscalls: syscalls, Close: closeAll, Conntrack: ctr}, nil
}

// nodeCIDRs keeps the rules' local-traffic detection on the Node's pod
// CIDRs (--detect-local-mode=NodeCIDR): the rules are installed before the
// Node is known, without detection, and rewritten whenever its pod CIDRs
// change (kube-proxy waits for them at start and exits when they change).
type nodeCIDRs struct {
	node *dataplane.Node
	c    runtime.Config
	log  *slog.Logger
}

// follow rewrites the rules when the snapshot's Node has other pod CIDRs
// than the rules detect; a snapshot without the Node changes nothing.
func (n nodeCIDRs) follow(s *client.Snapshot) {
	if s.Node == nil {
		return
	}
	l := n.c.LocalTraffic(s.Node)
	if l.Equal(n.node.Cfg.Rules.Local) {
		return
	}
	n.node.Cfg.Rules.Local = l
	if _, err := n.node.EnsureRules(n.node.Cfg.Families); err != nil {
		n.log.Error("local traffic detection: rules not rewritten for the node's pod CIDRs; retried at the next resync", "pod-cidrs", s.Node.PodCIDRs, "error", err)
		return
	}
	n.log.Info("local traffic detection follows the node's pod CIDRs", "pod-cidrs", s.Node.PodCIDRs)
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

// FullState builds the IPVS full-state controller (the ipvs-fullstate
// sink): snapshots go to fullstate.Controller.Snapshot.
func FullState(d Deps) runtime.Controller {
	c := fullstate.NewController(d.Render, d.Applier, d.Reader, d.Log)
	c.OnSync = d.OnSync
	return adapter{snapshot: c.Snapshot, c: c, d: d}
}

// Incremental builds the IPVS incremental controller (the ipvs-incremental
// sink): snapshots become events through client/diff.Events, which ends
// each with Sync.
func Incremental(d Deps) runtime.Controller {
	c := incremental.New(d.Render, d.Applier, d.Reader, d.Log)
	c.OnSync = d.OnSync
	return adapter{snapshot: diff.NewEvents(c).Apply, c: c, d: d}
}

// kernelApplier returns the applier the sinks write to the kernel with:
// its writes overlap (dataplane.Applier.Overlap), which Kernel's separate
// sockets allow, and it quarantines the objects the kernel refuses
// (dataplane.Applier.Quarantine; build bounds their backoff by the sync
// period).
func kernelApplier(k *dataplane.Kernel) *dataplane.Applier {
	a := dataplane.NewApplier(k)
	a.Overlap = true
	a.Quarantine = quarantine.New[any](0, 0)
	return a
}
