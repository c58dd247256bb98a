// Package nftablessink is what the nftables sink binary adds to the sink
// runtime: nftables.Proxier as the runtime's controller (kube-proxy
// v1.37.2's nftables mode: tables ip and ip6 kube-proxy, written in
// nf_tables transactions over netlink), kube-proxy's nftables-mode metrics
// and a count of other writers' changes to the tables, its classes of the
// flags and configuration fields (the nftables section honoured; the
// iptables and ipvs settings ignored, as kube-proxy's nftables mode
// ignores them; the IPVS sinks' own flags refused), and --cleanup through
// nftables.CleanupLeftovers. At start it removes what kube-proxy's other
// modes left, as kube-proxy's nftables mode does (cleanOtherModes).
//
// One difference from kube-proxy's flags: kube-proxy's nftables mode has
// no flag for its masquerade bit (only nftables.masqueradeBit in the
// file), while --masquerade-bit (alias --iptables-masquerade-bit) sets it
// here, as in every sink.
package nftablessink

import (
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/host/conntrack"
	"github.com/proxysinks/proxysinks/host/kernel"
	"github.com/proxysinks/proxysinks/host/quarantine"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/nftables"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// Sink returns the runtime.Sink of the nftables sink binary; /proxyMode
// answers "nftables".
func Sink(name, usage string) runtime.Sink {
	return runtime.Sink{Name: name, Usage: usage, Mode: "nftables", New: build, Flags: flags, Fields: fields,
		// cluster-ips-check rejects traffic to the ServiceCIDRs' unused
		// addresses, as kube-proxy's nftables mode does.
		Needs:   client.Needs{ServiceCIDRs: true},
		Cleanup: cleanup,
		Metrics: func(reg prometheus.Registerer, _ func(httpserve.TextSource)) error {
			_, err := NewMetrics(reg)
			return err
		}}
}

// cleanup removes the tables ip and ip6 kube-proxy (the sink's, or
// kube-proxy's nftables mode's) and logs what it removed.
func cleanup(_ runtime.Config, log *slog.Logger) error {
	removed, err := nftables.CleanupLeftovers(0)
	for _, r := range removed {
		log.Info("removed", "object", r)
	}
	return err
}

// SkipKernelVersionEnv is kube-proxy's environment variable that skips
// its nftables mode's kernel version check (5.13 or later); the sink
// honours it too.
const SkipKernelVersionEnv = "KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK"

// ProxierConfig is the Proxier's configuration from the runtime's: IPv6
// too when the node has an IPv6 address (build also enables it when the
// host has IPv6 on, as kube-proxy does); NodePorts on the selected node
// addresses (Env.NodePorts) in the families --nodeport-addresses
// restricts (primary when unset, the runtime's default in this mode),
// else on every local address. The node's IP of a family (load-balancer
// source ranges) is --bind-address's, else --node-address's, else the
// first selected.
func ProxierConfig(env runtime.Env) nftables.Config {
	c := env.Config
	nodeIPs := c.NodeAddresses
	if len(nodeIPs) == 0 {
		nodeIPs = env.NodePorts.Addrs
	}
	nodeIPs = append(runtime.PrimaryIPs(nil, c.BindAddress), nodeIPs...)
	rc := ruleset.Config{MasqueradeBit: &c.MasqueradeBit, MasqueradeAll: c.MasqueradeAll, Local: c.LocalTraffic(nil)}
	rc.SetNodePorts(env.NodePorts.CIDRs, env.NodePorts.Addrs)
	if i := slices.IndexFunc(nodeIPs, netip.Addr.Is4); i >= 0 {
		rc.IPv4.NodeIP = nodeIPs[i]
	}
	if i := slices.IndexFunc(nodeIPs, netip.Addr.Is6); i >= 0 {
		rc.IPv6.NodeIP = nodeIPs[i]
	}
	return nftables.Config{
		IPv4: true, IPv6: slices.ContainsFunc(env.NodePorts.Addrs, netip.Addr.Is6) || slices.ContainsFunc(nodeIPs, netip.Addr.Is6),
		Ruleset: rc, DryRun: env.DryRun, Log: env.Log, SyncPeriod: c.SyncPeriod,
		SkipKernelVersionCheck: os.Getenv(SkipKernelVersionEnv) != "",
	}
}

// build builds the Proxier (printing scripts in a dry run) and its
// controller.
func build(env runtime.Env) (runtime.Built, error) {
	cfg := ProxierConfig(env)
	if env.DryRun != nil {
		p, err := nftables.NewProxier(cfg)
		if err != nil {
			return runtime.Built{}, err
		}
		return runtime.Built{Controller: &Controller{P: p, Log: env.Log, OnSync: env.OnSync, Local: nodeLocal(env.Config)}}, nil
	}
	if len(env.NodePorts.CIDRs) > 0 && !slices.ContainsFunc(env.NodePorts.Addrs, env.NodePorts.Restricted) {
		env.Log.Warn("no node address is in --nodeport-addresses yet: NodePorts are served once one is added", "cidrs", env.NodePorts.CIDRs)
	}
	// As kube-proxy (platformCheckSupported): IPv6 whenever the host has
	// it on, so that pods with IPv6 addresses reach IPv6 cluster IPs.
	cfg.IPv6 = cfg.IPv6 || slices.Contains(dataplane.HostFamilies(kernel.Sysctl{}), xtables.IPv6)
	// NewProxier checks the kernel first: one that cannot run the
	// ruleset is an error before anything is written or removed.
	p, err := nftables.NewProxier(cfg)
	if err != nil {
		return runtime.Built{}, err
	}
	cleanOtherModes(otherModes, env.Config, env.Log)
	m, err := NewMetrics(env.Registry)
	if err != nil {
		p.Close()
		return runtime.Built{}, err
	}
	closeAll := func() { p.Close() }
	var ctr conntrack.Reconciler
	if ct, err := conntrack.Dial(nil); err != nil {
		env.Log.Warn("no conntrack: stale UDP flows will not be deleted", "error", err)
	} else {
		ctr = ct
		closeAll = func() { p.Close(); ct.Close() }
	}
	env.Log.Info("nftables proxier", "ipv6", cfg.IPv6, "masquerade-bit", cfg.Ruleset.Bit())
	ctl := &Controller{P: p, Metrics: m, Log: env.Log, OnSync: env.OnSync, Local: nodeLocal(env.Config), families: families(cfg)}
	return runtime.Built{Controller: ctl, Close: closeAll, Conntrack: ctr,
		Syscalls: func() uint64 { return uint64(p.Totals().Syscalls) }}, nil
}

// families are the ip_family values of the families cfg programs.
func families(cfg nftables.Config) []string {
	var out []string
	if cfg.IPv4 {
		out = append(out, "IPv4")
	}
	if cfg.IPv6 {
		out = append(out, "IPv6")
	}
	return out
}

// nodeLocal returns Controller.Local for the configuration: the
// detection by the Node's pod CIDRs with --detect-local-mode=NodeCIDR,
// else nil (the detection does not depend on the Node).
func nodeLocal(c runtime.Config) func(*client.Node) xtables.LocalTraffic {
	if c.DetectLocalMode != xtables.LocalNodeCIDR {
		return nil
	}
	return c.LocalTraffic
}

// Proxier is what a Controller drives: *nftables.Proxier (tests may fake
// it).
type Proxier interface {
	Snapshot(s *client.Snapshot) (nftables.SyncStats, error)
	Resync() (nftables.SyncStats, error)
	Retry() (nftables.SyncStats, error)
	Quarantined() []quarantine.Entry
	SetLocal(l xtables.LocalTraffic)
	SetNodePorts(cidrs []netip.Prefix, ips []netip.Addr)
}

var _ Proxier = (*nftables.Proxier)(nil)

// Controller adapts nftables.Proxier to runtime.Controller.
type Controller struct {
	P Proxier
	// Metrics, when not nil, are updated after every sync.
	Metrics *Metrics
	Log     *slog.Logger
	// OnSync, when not nil, is called after every sync.
	OnSync func(runtime.SyncStats)
	// Local, when not nil, is the local-traffic detection of a Node
	// (--detect-local-mode=NodeCIDR): every snapshot that carries the
	// Node sets it (Proxier.SetLocal).
	Local func(*client.Node) xtables.LocalTraffic

	families []string // the ip_family values of the Proxier's families
	noLocal  int      // of the last snapshot
}

// Snapshot programs a snapshot: the differences from what the kernel
// holds, one transaction per family.
func (c *Controller) Snapshot(s *client.Snapshot) {
	start := time.Now()
	if c.Local != nil && s.Node != nil {
		c.P.SetLocal(c.Local(s.Node))
	}
	st, err := c.P.Snapshot(s)
	c.noLocal = s.NoLocalEndpoints()
	c.report(start, s.Len(), st, err)
}

var _ runtime.NodePortsSetter = (*Controller)(nil)

// SetNodePorts takes the node addresses NodePorts are served on
// (runtime.NodePortsSetter): the next sync rewrites the nodeport-ips set.
func (c *Controller) SetNodePorts(n runtime.NodePorts) { c.P.SetNodePorts(n.CIDRs, n.Addrs) }

// Resync is the periodic full sync: it repairs another writer's changes
// (the kernel is read only when the nf_tables generation moved) and
// retries a refused transaction.
func (c *Controller) Resync() runtime.SyncStats {
	start := time.Now()
	st, err := c.P.Resync()
	return c.report(start, -1, st, err)
}

var _ runtime.Retrier = (*Controller)(nil)

// Retry writes the services whose objects the kernel refused and whose
// retry is due, the other quarantined ones held (runtime.Retrier).
func (c *Controller) Retry() runtime.SyncStats {
	start := time.Now()
	st, err := c.P.Retry()
	return c.report(start, -1, st, err)
}

// report logs a sync, updates the metrics and hands the runtime its
// statistics: the kernel objects written are the rules, chains, sets and
// elements added, flushed or deleted; the services quarantined.
func (c *Controller) report(start time.Time, services int, st nftables.SyncStats, err error) runtime.SyncStats {
	ds := runtime.SyncStats{Start: start, Duration: st.Duration, Services: services,
		Writes: st.Rules + st.Chains + st.Sets + st.FlushedChains + st.DeletedChains + st.DeletedSets + st.AddedElements + st.DeletedElements,
		Failed: st.Failures, NoLocalEndpoints: c.noLocal, Quarantined: c.P.Quarantined(), Err: err}
	c.Metrics.observe(c.families, st)
	attrs := []any{"full", st.Full, "transactions", st.Transactions, "rules", st.Rules, "chains", st.Chains, "sets", st.Sets,
		"flushed-chains", st.FlushedChains, "deleted-chains", st.DeletedChains, "deleted-sets", st.DeletedSets,
		"elements-added", st.AddedElements, "elements-deleted", st.DeletedElements, "reads", st.Reads,
		"messages", st.Messages, "bytes", st.Bytes, "duration", st.Duration}
	switch {
	case err != nil:
		c.Log.Error("sync failed", append(attrs, "error", err)...)
	case st.Transactions == 0:
		c.Log.Debug("sync: nothing to write", attrs...)
	default:
		c.Log.Info("sync", attrs...)
	}
	if c.OnSync != nil {
		c.OnSync(ds)
	}
	return ds
}
