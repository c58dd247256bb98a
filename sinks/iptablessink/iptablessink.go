// Package iptablessink is what the iptables sink binary adds to the sink
// runtime: iptables.Proxier as the runtime's controller (kube-proxy's
// iptables mode), kube-proxy's iptables-mode metrics, its classes of the
// flags and configuration fields (kube-proxy's IPVS settings ignored, as in
// its iptables mode; the IPVS sinks' own flags refused), and
// --cleanup through iptables.CleanupLeftovers.
package iptablessink

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/conntrack"
	"github.com/proxysinks/proxysinks/host/kernel"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/iptables"
	"github.com/proxysinks/proxysinks/nftables"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/runtime"
	"github.com/urfave/cli/v2"
)

// IPVSOnly returns the IPVS sinks' flags (sinks/ipvssink), which configure
// IPVS only. Each has the IPVS sinks' kind and names, so that it parses as
// it does there. kube-proxy's among them (--ipvs-scheduler, --ipvs-*) are
// ignored and logged, as kube-proxy's iptables mode ignores them, and carry
// the file's field they map onto (with --config they are dropped, as in
// kube-proxy); the IPVS sinks' own (--weight, --ipvs-vip-binding) are
// refused (exit status 2).
func IPVSOnly() []runtime.Flag {
	const why = "another proxy mode's setting (kube-proxy's iptables mode ignores it too)"
	kubeProxy := func(f cli.Flag, file string) runtime.Flag {
		return runtime.Flag{Flag: f, Class: kpconfig.Ignored, Why: why, File: file}
	}
	return []runtime.Flag{
		kubeProxy(&cli.StringFlag{Name: "scheduling-method", Aliases: []string{"ipvs-scheduler"}}, "ipvs.scheduler"),
		kubeProxy(&cli.BoolFlag{Name: "ipvs-strict-arp"}, "ipvs.strictARP"),
		kubeProxy(&cli.DurationFlag{Name: "ipvs-tcp-timeout"}, "ipvs.tcpTimeout"),
		kubeProxy(&cli.DurationFlag{Name: "ipvs-tcpfin-timeout"}, "ipvs.tcpFinTimeout"),
		kubeProxy(&cli.DurationFlag{Name: "ipvs-udp-timeout"}, "ipvs.udpTimeout"),
		kubeProxy(&cli.StringSliceFlag{Name: "ipvs-exclude-cidrs"}, "ipvs.excludeCIDRs"),
		{Flag: &cli.Int64Flag{Name: "weight"}, Class: kpconfig.Refused},
		{Flag: &cli.StringFlag{Name: "ipvs-vip-binding"}, Class: kpconfig.Refused},
		{Flag: &cli.BoolFlag{Name: "ipvs-stats"}, Class: kpconfig.Refused},
	}
}

// Config is what the iptables sink's own flags set
// (runtime.Config.SinkConfig).
type Config struct {
	// LocalhostNodePorts serves IPv4 node ports on 127.0.0.0/8
	// (--iptables-localhost-nodeports, default true) when
	// --nodeport-addresses allows loopback.
	LocalhostNodePorts bool
}

// flags are the iptables sink's own flags, then the IPVS sinks' it
// refuses.
func flags() []runtime.Flag {
	own := runtime.Classed(kpconfig.Honoured,
		&cli.BoolFlag{Name: "iptables-localhost-nodeports", Value: true, Usage: "serve IPv4 node ports on 127.0.0.0/8 too, when --nodeport-addresses allows loopback (sets route_localnet=1, guarded by KUBE-FIREWALL)"})
	return append(own, IPVSOnly()...)
}

// parse reads the iptables sink's own flags (runtime.Sink.Parse).
func parse(c *cli.Context) (any, error) {
	return Config{LocalhostNodePorts: c.Bool("iptables-localhost-nodeports")}, nil
}

// fields class the KubeProxyConfiguration fields of the modes: the
// iptables sync periods and iptables.localhostNodePorts are honoured; the
// ipvs and nftables settings are ignored (logged), as in kube-proxy's
// iptables mode.
var fields = []kpconfig.Field{
	{Name: "iptables.localhostNodePorts", Class: kpconfig.Honoured, Flag: "iptables-localhost-nodeports"},
	{Name: "iptables.syncPeriod", Class: kpconfig.Honoured, Flag: "sync-period"},
	{Name: "iptables.minSyncPeriod", Class: kpconfig.Honoured, Flag: "min-sync-period"},
	{Name: "ipvs.syncPeriod", Class: kpconfig.Ignored, Why: "the iptables sink takes iptables.syncPeriod"},
	{Name: "ipvs.minSyncPeriod", Class: kpconfig.Ignored, Why: "the iptables sink takes iptables.minSyncPeriod"},
	{Name: "ipvs", Class: kpconfig.Ignored, Why: "another proxy mode's settings (kube-proxy's iptables mode ignores them too)",
		Paths: []string{"ipvs.scheduler", "ipvs.excludeCIDRs", "ipvs.strictARP", "ipvs.tcpTimeout", "ipvs.tcpFinTimeout", "ipvs.udpTimeout"}},
	kpconfig.NFTables,
}

// Sink returns the runtime.Sink of the iptables sink binary; /proxyMode
// answers "iptables".
func Sink(name, usage string) runtime.Sink {
	return runtime.Sink{Name: name, Usage: usage, Mode: "iptables", New: build, Flags: flags, Parse: parse, Fields: fields,
		Cleanup: func(runtime.Config, *slog.Logger) error { return iptables.CleanupLeftovers(nil) }, Metrics: referenceMetrics}
}

// Metrics are kube-proxy v1.37.2's iptables-mode metrics (pkg/proxy/metrics:
// their names, help and labels, ip_family among them).
type Metrics struct {
	// RulesTotal is kubeproxy_sync_proxy_rules_iptables_total{table,
	// ip_family}: the rules of a family's ruleset after the last sync,
	// filter and nat.
	RulesTotal *prometheus.GaugeVec
	// RestoreFailures counts failed iptables-restore runs per family;
	// PartialRestoreFailures those of partial syncs.
	RestoreFailures, PartialRestoreFailures *prometheus.CounterVec
	// FullDuration and PartialDuration are the durations of full and
	// partial syncs, observed under each family the Proxier programs.
	FullDuration, PartialDuration *prometheus.HistogramVec
	// ReadsSkipped is proxysinks_iptables_resync_reads_skipped_total: the
	// address families whose full sync skipped reading and comparing the
	// kernel's tables, as the nf_tables generation had not moved.
	ReadsSkipped prometheus.Counter
}

// NewMetrics registers the metrics in reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	family := []string{"ip_family"}
	d := httpserve.NewSyncDurations()
	m := &Metrics{
		FullDuration: d.Full, PartialDuration: d.Partial,
		RulesTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_iptables_total", Help: "Total number of iptables rules owned by kube-proxy"}, []string{"table", "ip_family"}),
		RestoreFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_iptables_restore_failures_total", Help: "Cumulative proxy iptables restore failures"}, family),
		PartialRestoreFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", Help: "Cumulative proxy iptables partial restore failures"}, family),
		ReadsSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "proxysinks_iptables_resync_reads_skipped_total", Help: "Address families whose full sync skipped reading the tables back (nf_tables generation unchanged since the last write or compare)."}),
	}
	for _, c := range []prometheus.Collector{m.RulesTotal, m.RestoreFailures, m.PartialRestoreFailures, m.FullDuration, m.PartialDuration, m.ReadsSkipped} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register iptables metrics: %w", err)
		}
	}
	return m, nil
}

// observe records a sync of the families (ip_family values) the Proxier
// programs: its duration under each (one sync covers them all, as the
// runtime's kubeproxy_sync_proxy_rules_duration_seconds), each family's
// rules, and the failures under the family they happened in.
func (m *Metrics) observe(families []string, rules map[string]map[string]int, st iptables.SyncStats) {
	if m == nil {
		return
	}
	httpserve.SyncDurations{Full: m.FullDuration, Partial: m.PartialDuration}.Observe(families, st.Full, st.Duration)
	for _, f := range families {
		// The failure counters exist at 0 from the first sync on.
		m.RestoreFailures.WithLabelValues(f)
		m.PartialRestoreFailures.WithLabelValues(f)
	}
	for i, f := range st.FailedFamilies {
		m.RestoreFailures.WithLabelValues(f.String()).Inc()
		if st.PartialFailed[i] {
			m.PartialRestoreFailures.WithLabelValues(f.String()).Inc()
		}
	}
	m.ReadsSkipped.Add(float64(st.ReadsSkipped))
	for f, tables := range rules {
		for table, n := range tables {
			m.RulesTotal.WithLabelValues(table, f).Set(float64(n))
		}
	}
}

// ProxierConfig is the Proxier's configuration from the runtime's: IPv6
// too when the node has an IPv6 address (build also enables it when the
// node can run ip6tables, see ipv6Usable); node ports on the selected node
// addresses (Env.NodePorts) in the families --nodeport-addresses
// restricts, else on every local address. The node's IP of a family (load
// balancer source ranges) is --bind-address's, else --node-address's, else
// the first selected.
func ProxierConfig(env runtime.Env) iptables.Config {
	c := env.Config
	nodeIPs := c.NodeAddresses
	if len(nodeIPs) == 0 {
		nodeIPs = env.NodePorts.Addrs
	}
	nodeIPs = append(runtime.PrimaryIPs(nil, c.BindAddress), nodeIPs...)
	cfg := iptables.Config{
		IPv4: true, IPv6: slices.ContainsFunc(env.NodePorts.Addrs, netip.Addr.Is6) || slices.ContainsFunc(nodeIPs, netip.Addr.Is6),
		MasqueradeBit: c.MasqueradeBit, MasqueradeAll: c.MasqueradeAll, Local: c.LocalTraffic(nil),
		NodeIPs: nodeIPs, SyncPeriod: c.SyncPeriod, DryRun: env.DryRun,
		NodePortCIDRs: env.NodePorts.CIDRs, NodePortIPs: env.NodePorts.Addrs,
	}
	cfg.LocalhostNodePorts = localhostNodePorts(c)
	if lo := netip.AddrFrom4([4]byte{127, 0, 0, 1}); cfg.LocalhostNodePorts && !slices.Contains(cfg.NodePortIPs, lo) &&
		slices.ContainsFunc(c.NodePortAddresses, func(p netip.Prefix) bool { return p.Contains(lo) }) {
		// The address loopback holds, as kube-proxy finds it among the
		// node's interface addresses.
		cfg.NodePortIPs = append(slices.Clip(cfg.NodePortIPs), lo)
	}
	return cfg
}

// localhostNodePorts reports whether IPv4 node ports are served on
// 127.0.0.0/8, as kube-proxy decides: --iptables-localhost-nodeports
// (default true), and --nodeport-addresses unset for IPv4 or with an IPv4
// CIDR that holds 127.0.0.0 or is a loopback one. primary restricts IPv4
// to the node's primary IPv4 address, never loopback (kube-proxy turns it
// into that address's /32; the Node's, read later, is taken to have one).
func localhostNodePorts(c runtime.Config) bool {
	sc, _ := c.SinkConfig.(Config)
	if !sc.LocalhostNodePorts {
		return false
	}
	v4 := c.NodePortPrimary
	for _, p := range c.NodePortAddresses {
		if p.Addr().Is4() {
			v4 = true
			if p.Addr().IsLoopback() || p.Contains(netip.AddrFrom4([4]byte{127, 0, 0, 0})) {
				return true
			}
		}
	}
	return !v4
}

// ipv6Usable reports whether ip6tables works on this node (either
// backend). Like kube-proxy, which runs its IPv6 proxier whenever
// ip6tables does, the sink then programs IPv6 even when the node has no
// IPv6 address: pods with IPv6 addresses reach IPv6 cluster IPs through
// it (kube-proxy differential test, e2e/hostnode).
func ipv6Usable(run xtables.Runner) bool {
	_, err := xtables.Detect(xtables.IPv6, run)
	return err == nil
}

// sysctlRouteLocalnet lets the node route packets to 127.0.0.0/8 that
// node ports DNAT elsewhere.
const sysctlRouteLocalnet = "net/ipv4/conf/all/route_localnet"

// ensureRouteLocalnet sets route_localnet=1 (in the calling thread's
// network namespace): the node's packets to 127.0.0.0/8 that a node port
// DNATs to an endpoint leave with their loopback source, which only
// route_localnet routes (KUBE-FIREWALL drops what it would let in).
func ensureRouteLocalnet(s kernel.Sysctl) error {
	if _, err := kernel.EnsureSysctl(s, sysctlRouteLocalnet, 1); err != nil {
		return fmt.Errorf("localhost node ports (--iptables-localhost-nodeports): %w", err)
	}
	return nil
}

// tcpBeLiberal reports whether the kernel accepts out-of-window TCP
// packets (nf_conntrack_tcp_be_liberal), in which case kube-proxy leaves
// out its INVALID-state drop.
func tcpBeLiberal(procSys string) bool {
	b, err := os.ReadFile(procSys + "/net/netfilter/nf_conntrack_tcp_be_liberal")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// build builds the Proxier (over the dry-run writer in a dry run) and its
// controller.
func build(env runtime.Env) (runtime.Built, error) {
	cfg := ProxierConfig(env)
	if env.DryRun != nil {
		p, err := iptables.NewProxier(cfg)
		if err != nil {
			return runtime.Built{}, err
		}
		return runtime.Built{Controller: &Controller{P: p, Log: env.Log, OnSync: env.OnSync, Local: nodeLocal(env.Config)}}, nil
	}
	if len(env.NodePorts.CIDRs) > 0 && !slices.ContainsFunc(env.NodePorts.Addrs, env.NodePorts.Restricted) {
		env.Log.Warn("no node address is in --nodeport-addresses yet: NodePorts are served once one is added", "cidrs", env.NodePorts.CIDRs)
	}
	if ok, err := iptables.CanUseIPTablesProxier(iptables.ExecVersioner{Backend: xtables.NFT}, iptables.LinuxKernelCompatTester{}); !ok {
		if ok, err2 := iptables.CanUseIPTablesProxier(iptables.ExecVersioner{Backend: xtables.Legacy}, iptables.LinuxKernelCompatTester{}); !ok {
			return runtime.Built{}, fmt.Errorf("this node cannot run the iptables proxier: %w", errors.Join(err, err2))
		}
	}
	if !cfg.IPv6 && ipv6Usable(xtables.Exec) {
		cfg.IPv6 = true
	}
	cfg.TCPBeLiberal = tcpBeLiberal("/proc/sys")
	if cfg.LocalhostNodePorts {
		if err := ensureRouteLocalnet(kernel.Sysctl{}); err != nil {
			return runtime.Built{}, err
		}
		env.Log.Info("route_localnet=1 for node ports on localhost; to change this, give --iptables-localhost-nodeports=false or --nodeport-addresses without loopback")
	}
	// The tools run in this process's namespace: the Proxier reads its
	// nf_tables generation (Config.Generation's default).
	cfg.Log = env.Log
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	var ctr conntrack.Reconciler
	if ct, err := conntrack.Dial(nil); err != nil {
		env.Log.Warn("no conntrack: stale UDP flows will not be deleted", "error", err)
	} else {
		ctr = ct
		closers = append(closers, func() { ct.Close() })
	}
	if acct, closeAcct, err := dialAccounting(env.Registry, env.Log); err != nil {
		env.Log.Warn("no nfacct: kube-proxy's INVALID-drop and localhost node-port counters are not kept", "error", err)
	} else {
		cfg.Accounting = acct
		closers = append(closers, closeAcct)
	}
	p, err := iptables.NewProxier(cfg)
	if err != nil {
		closeAll()
		return runtime.Built{}, err
	}
	// As kube-proxy's iptables mode at start: the nftables mode's tables
	// would go on answering for the services.
	nftables.CleanupForOtherMode(env.Log)
	m, err := NewMetrics(env.Registry)
	if err != nil {
		closeAll()
		return runtime.Built{}, err
	}
	env.Log.Info("iptables proxier", "ipv6", cfg.IPv6, "backends", p.Backends(), "tcp-be-liberal", cfg.TCPBeLiberal)
	return runtime.Built{Controller: &Controller{P: p, Metrics: m, Log: env.Log, OnSync: env.OnSync, Local: nodeLocal(env.Config)}, Close: closeAll, Conntrack: ctr}, nil
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

// Controller adapts iptables.Proxier to runtime.Controller.
type Controller struct {
	P *iptables.Proxier
	// Metrics, when not nil, are updated after every sync.
	Metrics *Metrics
	Log     *slog.Logger
	// OnSync, when not nil, is called after every sync.
	OnSync func(runtime.SyncStats)
	// Local, when not nil, is the local-traffic detection of a Node
	// (--detect-local-mode=NodeCIDR): every snapshot that carries the
	// Node sets it (Proxier.SetLocal).
	Local func(*client.Node) xtables.LocalTraffic

	noLocal int // of the last snapshot
}

// Snapshot programs a snapshot (a partial sync of its changes when it
// lists them).
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
// (runtime.NodePortsSetter): the next sync rewrites the node-port rules.
func (c *Controller) SetNodePorts(n runtime.NodePorts) { c.P.SetNodePorts(n.CIDRs, n.Addrs) }

// Resync is the periodic full sync: it repairs drift.
func (c *Controller) Resync() runtime.SyncStats {
	start := time.Now()
	st, err := c.P.Resync()
	return c.report(start, -1, st, err)
}

// Retry writes, each alone, the services whose rules iptables-restore
// refused and whose retry is due (runtime.Retrier).
func (c *Controller) Retry() runtime.SyncStats {
	start := time.Now()
	st, err := c.P.Retry()
	return c.report(start, -1, st, err)
}

// report logs a sync, updates the metrics and hands the runtime its
// statistics: the kernel objects written are the rules, chains declared and
// chains deleted.
func (c *Controller) report(start time.Time, services int, st iptables.SyncStats, err error) runtime.SyncStats {
	ds := runtime.SyncStats{Start: start, Duration: st.Duration, Services: services,
		Writes: st.Rules + st.Chains + st.DeletedChains, Failed: st.Failures, NoLocalEndpoints: c.noLocal,
		Quarantined: c.P.Quarantined(), Err: err}
	c.Metrics.observe(c.P.Families(), c.P.FamilyRulesTotal(), st)
	attrs := []any{"full", st.Full, "restores", st.Restores, "rules", st.Rules, "chains", st.Chains,
		"deleted-chains", st.DeletedChains, "bytes", st.Bytes, "reads-skipped", st.ReadsSkipped, "duration", st.Duration}
	switch {
	case err != nil:
		c.Log.Error("sync failed", append(attrs, "error", err)...)
	case st.Restores == 0:
		c.Log.Debug("sync: nothing to write", attrs...)
	default:
		c.Log.Info("sync", attrs...)
	}
	if c.OnSync != nil {
		c.OnSync(ds)
	}
	return ds
}
