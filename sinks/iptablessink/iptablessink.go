// Package iptablessink is what the iptables sink binary adds to the sink
// runtime: iptables.Proxier as the runtime's controller (kube-proxy's
// iptables mode), kube-proxy's iptables-mode metrics, its classes of the
// flags and configuration fields (the IPVS-only ones refused), and
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
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/iptables"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/runtime"
	"github.com/urfave/cli/v2"
)

// IPVSOnly returns the IPVS sinks' flags (sinks/ipvssink), which configure
// IPVS only: the iptables sink refuses them (exit status 2) rather than
// ignore them. Each has the IPVS sinks' kind and names, so that it parses
// as it does there.
func IPVSOnly() []runtime.Flag {
	fs := []cli.Flag{
		&cli.StringFlag{Name: "scheduling-method", Aliases: []string{"ipvs-scheduler"}},
		&cli.Int64Flag{Name: "weight"},
		&cli.BoolFlag{Name: "ipvs-strict-arp"},
		&cli.DurationFlag{Name: "ipvs-tcp-timeout"},
		&cli.DurationFlag{Name: "ipvs-tcpfin-timeout"},
		&cli.DurationFlag{Name: "ipvs-udp-timeout"},
		&cli.StringSliceFlag{Name: "ipvs-exclude-cidrs"},
		&cli.StringFlag{Name: "ipvs-vip-binding"},
		&cli.BoolFlag{Name: "ipvs-stats"},
	}
	return runtime.Classed(kpconfig.Refused, fs...)
}

// fields class the KubeProxyConfiguration fields of the modes: the
// iptables sync periods are honoured, the ipvs ones ignored, the other
// ipvs settings, iptables.localhostNodePorts and the nftables settings
// refused.
var fields = []kpconfig.Field{
	kpconfig.NoFlag("iptables.localhostNodePorts", "iptables-localhost-nodeports"),
	{Name: "iptables.syncPeriod", Class: kpconfig.Honoured, Flag: "sync-period"},
	{Name: "iptables.minSyncPeriod", Class: kpconfig.Honoured, Flag: "min-sync-period"},
	{Name: "ipvs.syncPeriod", Class: kpconfig.Ignored, Why: "the iptables sink takes iptables.syncPeriod"},
	{Name: "ipvs.minSyncPeriod", Class: kpconfig.Ignored, Why: "the iptables sink takes iptables.minSyncPeriod"},
	kpconfig.NoFlag("ipvs.scheduler", "ipvs-scheduler"),
	kpconfig.NoFlag("ipvs.excludeCIDRs", "ipvs-exclude-cidrs"),
	kpconfig.NoFlag("ipvs.strictARP", "ipvs-strict-arp"),
	kpconfig.NoFlag("ipvs.tcpTimeout", "ipvs-tcp-timeout"),
	kpconfig.NoFlag("ipvs.tcpFinTimeout", "ipvs-tcpfin-timeout"),
	kpconfig.NoFlag("ipvs.udpTimeout", "ipvs-udp-timeout"),
	kpconfig.NFTables,
}

// Sink returns the runtime.Sink of the iptables sink binary; /proxyMode
// answers "iptables".
func Sink(name, usage string) runtime.Sink {
	return runtime.Sink{Name: name, Usage: usage, Mode: "iptables", New: build, Flags: IPVSOnly, Fields: fields,
		Cleanup: func(runtime.Config, *slog.Logger) error { return iptables.CleanupLeftovers(nil) }}
}

// Metrics are kube-proxy's iptables-mode metrics.
type Metrics struct {
	// RulesTotal is kubeproxy_sync_proxy_rules_iptables_total{table}: the
	// rules of the ruleset after the last sync, filter and nat.
	RulesTotal *prometheus.GaugeVec
	// RestoreFailures counts failed iptables-restore runs;
	// PartialRestoreFailures those of partial syncs.
	RestoreFailures, PartialRestoreFailures prometheus.Counter
	// FullDuration and PartialDuration are the durations of full and
	// partial syncs.
	FullDuration, PartialDuration prometheus.Histogram
	// ReadsSkipped is proxysinks_iptables_resync_reads_skipped_total: the
	// address families whose full sync skipped reading and comparing the
	// kernel's tables, as the nf_tables generation had not moved.
	ReadsSkipped prometheus.Counter
}

// NewMetrics registers the metrics in reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	buckets := prometheus.ExponentialBuckets(0.0001, 2, 18)
	m := &Metrics{
		RulesTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_iptables_total", Help: "Rules of the proxy's iptables ruleset after the last sync, per table (both families)."}, []string{"table"}),
		RestoreFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_iptables_restore_failures_total", Help: "iptables-restore runs that failed."}),
		PartialRestoreFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", Help: "iptables-restore runs of partial syncs that failed (the next sync is a full one)."}),
		FullDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_full_proxy_rules_duration_seconds", Help: "Duration of full syncs.", Buckets: buckets}),
		PartialDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_partial_proxy_rules_duration_seconds", Help: "Duration of partial syncs.", Buckets: buckets}),
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

// ProxierConfig is the Proxier's configuration from the runtime's: IPv6
// too when the node has an IPv6 address (build also enables it when the
// node can run ip6tables, see ipv6Usable); node ports on the node addresses
// in --nodeport-addresses for the families it names, else on every local
// address.
func ProxierConfig(env runtime.Env) iptables.Config {
	c := env.Config
	nodeIPs := c.NodeAddresses
	if len(nodeIPs) == 0 {
		nodeIPs = env.NodeAddresses
	}
	cfg := iptables.Config{
		IPv4: true, IPv6: slices.ContainsFunc(env.NodeAddresses, netip.Addr.Is6) || slices.ContainsFunc(nodeIPs, netip.Addr.Is6),
		MasqueradeBit: c.MasqueradeBit, MasqueradeAll: c.MasqueradeAll, ClusterCIDRs: c.ClusterCIDRs,
		NodeIPs: nodeIPs, SyncPeriod: c.SyncPeriod, DryRun: env.DryRun,
	}
	if len(c.NodePortAddresses) > 0 {
		cfg.NodePortCIDRs, cfg.NodePortIPs = c.NodePortAddresses, env.NodeAddresses
	}
	return cfg
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
		return runtime.Built{Controller: &Controller{P: p, Log: env.Log, OnSync: env.OnSync}}, nil
	}
	if len(env.Config.NodePortAddresses) > 0 && len(env.NodeAddresses) == 0 {
		return runtime.Built{}, errors.New("--nodeport-addresses: no node address is in these CIDRs")
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
	// The tools run in this process's namespace: the Proxier reads its
	// nf_tables generation (Config.Generation's default).
	cfg.Log = env.Log
	var closeCT func()
	var ctr conntrack.Reconciler
	if ct, err := conntrack.Dial(nil); err != nil {
		env.Log.Warn("no conntrack: stale UDP flows will not be deleted", "error", err)
	} else {
		ctr, closeCT = ct, func() { ct.Close() }
	}
	p, err := iptables.NewProxier(cfg)
	if err != nil {
		if closeCT != nil {
			closeCT()
		}
		return runtime.Built{}, err
	}
	m, err := NewMetrics(env.Registry)
	if err != nil {
		if closeCT != nil {
			closeCT()
		}
		return runtime.Built{}, err
	}
	env.Log.Info("iptables proxier", "ipv6", cfg.IPv6, "backends", p.Backends(), "tcp-be-liberal", cfg.TCPBeLiberal)
	return runtime.Built{Controller: &Controller{P: p, Metrics: m, Log: env.Log, OnSync: env.OnSync}, Close: closeCT, Conntrack: ctr}, nil
}

// Controller adapts iptables.Proxier to runtime.Controller.
type Controller struct {
	P *iptables.Proxier
	// Metrics, when not nil, are updated after every sync.
	Metrics *Metrics
	Log     *slog.Logger
	// OnSync, when not nil, is called after every sync.
	OnSync func(runtime.SyncStats)

	noLocal int // of the last snapshot
}

// noLocalEndpoints counts the services of s with a Local traffic policy
// and no ready or serving endpoint on this node (kube-proxy's
// kubeproxy_sync_proxy_rules_no_local_endpoints_total), as the IPVS
// controllers count them.
func noLocalEndpoints(s *client.Snapshot) int {
	n := 0
	for se := range s.All() {
		if se.NoLocalEndpoints() {
			n++
		}
	}
	return n
}

// Snapshot programs a snapshot (a partial sync of its changes when it
// lists them).
func (c *Controller) Snapshot(s *client.Snapshot) {
	start := time.Now()
	st, err := c.P.Snapshot(s)
	c.noLocal = noLocalEndpoints(s)
	c.report(start, s.Len(), st, err)
}

// Resync is the periodic full sync: it repairs drift.
func (c *Controller) Resync() runtime.SyncStats {
	start := time.Now()
	st, err := c.P.Resync()
	return c.report(start, -1, st, err)
}

// report logs a sync, updates the metrics and hands the runtime its
// statistics: the kernel objects written are the rules, chains declared and
// chains deleted.
func (c *Controller) report(start time.Time, services int, st iptables.SyncStats, err error) runtime.SyncStats {
	ds := runtime.SyncStats{Start: start, Duration: st.Duration, Services: services,
		Writes: st.Rules + st.Chains + st.DeletedChains, Failed: st.Failures, NoLocalEndpoints: c.noLocal, Err: err}
	if m := c.Metrics; m != nil {
		m.RestoreFailures.Add(float64(st.Failures))
		m.PartialRestoreFailures.Add(float64(st.PartialFailures))
		m.ReadsSkipped.Add(float64(st.ReadsSkipped))
		for table, n := range c.P.RulesTotal() {
			m.RulesTotal.WithLabelValues(table).Set(float64(n))
		}
		if st.Full {
			m.FullDuration.Observe(st.Duration.Seconds())
		} else {
			m.PartialDuration.Observe(st.Duration.Seconds())
		}
	}
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
