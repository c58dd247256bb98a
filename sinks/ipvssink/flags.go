package ipvssink

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/runtime"
	"github.com/urfave/cli/v2"
)

// Config is what the IPVS sinks' own flags set, validated
// (runtime.Config.SinkConfig).
type Config struct {
	// Scheduler is every virtual server's scheduler (--scheduling-method).
	Scheduler string
	// Weight is every destination's weight (--weight).
	Weight uint32
	// StrictARP sets arp_ignore=1 and arp_announce=2 (--ipvs-strict-arp).
	StrictARP bool
	// TCPTimeout, TCPFinTimeout and UDPTimeout are IPVS's connection
	// timeouts (0: leave the kernel's).
	TCPTimeout, TCPFinTimeout, UDPTimeout time.Duration
	// ExcludeCIDRs are never touched (--ipvs-exclude-cidrs).
	ExcludeCIDRs []netip.Prefix
	// VIPBinding is how virtual IPs are made local (--ipvs-vip-binding).
	VIPBinding dataplane.Binding
	// Stats exports per-virtual-server counters (--ipvs-stats,
	// StatsCollector).
	Stats bool
}

// config returns the IPVS flags of c (the zero Config when c has none).
func config(c runtime.Config) Config {
	ic, _ := c.SinkConfig.(Config)
	return ic
}

// flags are the IPVS sinks' own flags; the runtime adds their environment
// variables.
func flags() []runtime.Flag {
	fs := []cli.Flag{
		&cli.StringFlag{Name: "scheduling-method", Aliases: []string{"ipvs-scheduler"}, Value: "rr", Usage: "IPVS `scheduler`: " + strings.Join(render.Schedulers, ", ")},
		&cli.Int64Flag{Name: "weight", Value: 1, Usage: "`weight` of every destination, 1 to 65535"},
		&cli.BoolFlag{Name: "ipvs-strict-arp", Usage: "set arp_ignore=1 and arp_announce=2"},
		&cli.DurationFlag{Name: "ipvs-tcp-timeout", Usage: "IPVS timeout of idle TCP connections, whole seconds (0: leave)"},
		&cli.DurationFlag{Name: "ipvs-tcpfin-timeout", Usage: "IPVS timeout of TCP connections after FIN, whole seconds (0: leave)"},
		&cli.DurationFlag{Name: "ipvs-udp-timeout", Usage: "IPVS timeout of UDP flows, whole seconds (0: leave)"},
		&cli.StringSliceFlag{Name: "ipvs-exclude-cidrs", Usage: "never touch virtual servers or addresses in these `CIDRs`"},
		&cli.BoolFlag{Name: "ipvs-stats", Usage: "export each virtual server's connections, packets and bytes on /metrics (one IPVS dump per scrape)"},
		&cli.StringFlag{Name: "ipvs-vip-binding", Value: "addresses", Usage: "how virtual IPs are made local: addresses (each bound on kube-ipvs0, as kube-proxy does) or routes (IPv4: one local route each through lo, protocol 156, no address; much cheaper to program at scale)"},
	}
	return append(runtime.Classed(kpconfig.Honoured, fs...),
		// The iptables sink's; kube-proxy's IPVS mode accepts it too.
		runtime.Flag{Flag: &cli.BoolFlag{Name: "iptables-localhost-nodeports", Value: true}, Class: kpconfig.Ignored,
			Why: "IPVS never serves node ports on loopback (kube-proxy: iptables mode only)", File: "iptables.localhostNodePorts"})
}

// fields class the KubeProxyConfiguration fields of the modes: the ipvs
// ones set the IPVS sinks' flags and the sync periods, the iptables sync
// periods and iptables.localhostNodePorts are ignored, the nftables
// settings are refused.
var fields = []kpconfig.Field{
	// kube-proxy's IPVS mode never serves node ports on loopback.
	{Name: "iptables.localhostNodePorts", Class: kpconfig.Ignored, Why: "IPVS never serves node ports on loopback (kube-proxy: iptables mode only)"},
	{Name: "ipvs.syncPeriod", Class: kpconfig.Honoured, Flag: "sync-period"},
	{Name: "ipvs.minSyncPeriod", Class: kpconfig.Honoured, Flag: "min-sync-period"},
	{Name: "iptables.syncPeriod", Class: kpconfig.Ignored, Why: "the IPVS sinks take ipvs.syncPeriod"},
	{Name: "iptables.minSyncPeriod", Class: kpconfig.Ignored, Why: "the IPVS sinks take ipvs.minSyncPeriod"},
	{Name: "ipvs.scheduler", Class: kpconfig.Honoured, Flag: "ipvs-scheduler"},
	{Name: "ipvs.excludeCIDRs", Class: kpconfig.Honoured, Flag: "ipvs-exclude-cidrs"},
	{Name: "ipvs.strictARP", Class: kpconfig.Honoured, Flag: "ipvs-strict-arp"},
	{Name: "ipvs.tcpTimeout", Class: kpconfig.Honoured, Flag: "ipvs-tcp-timeout"},
	{Name: "ipvs.tcpFinTimeout", Class: kpconfig.Honoured, Flag: "ipvs-tcpfin-timeout"},
	{Name: "ipvs.udpTimeout", Class: kpconfig.Honoured, Flag: "ipvs-udp-timeout"},
	kpconfig.NFTables,
}

// MinWeight and MaxWeight bound --weight: IPVS reads a destination's
// weight as a signed 32-bit number and rejects negative ones, weight 0
// quiesces a destination (no new connections), and ipvsadm accepts at most
// 65535.
const (
	MinWeight = 1
	MaxWeight = 65535
)

// MaxIPVSTimeout is the longest IPVS connection timeout: the kernel keeps
// it in jiffies in an int and refuses more than INT_MAX/HZ seconds, which
// is 2147483 s (about 596 h) at the largest HZ (1000).
const MaxIPVSTimeout = 2147483 * time.Second

// parse reads and validates the IPVS sinks' flags (runtime.Sink.Parse).
// Every bad value is an error naming the flag.
func parse(c *cli.Context) (any, error) {
	cfg := Config{
		Scheduler: c.String("scheduling-method"), StrictARP: c.Bool("ipvs-strict-arp"), TCPTimeout: c.Duration("ipvs-tcp-timeout"),
		TCPFinTimeout: c.Duration("ipvs-tcpfin-timeout"), UDPTimeout: c.Duration("ipvs-udp-timeout"), Stats: c.Bool("ipvs-stats"),
	}
	var err error
	if cfg.ExcludeCIDRs, err = runtime.ParsePrefixes("ipvs-exclude-cidrs", c.StringSlice("ipvs-exclude-cidrs")); err != nil {
		return nil, err
	}
	if b, ok := dataplane.Bindings[c.String("ipvs-vip-binding")]; ok {
		cfg.VIPBinding = b
	} else {
		return nil, fmt.Errorf("--ipvs-vip-binding: %q is neither addresses nor routes", c.String("ipvs-vip-binding"))
	}
	switch w := c.Int64("weight"); {
	case w < MinWeight || w > MaxWeight:
		return nil, fmt.Errorf("--weight: %d is not in [%d, %d] (weight 0 would stop new connections to every endpoint)", w, MinWeight, MaxWeight)
	default:
		cfg.Weight = uint32(w)
	}
	if !slices.Contains(render.Schedulers, cfg.Scheduler) {
		return nil, fmt.Errorf("--scheduling-method: unknown scheduler %q (want one of %s)", cfg.Scheduler, strings.Join(render.Schedulers, ", "))
	}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"ipvs-tcp-timeout", cfg.TCPTimeout}, {"ipvs-tcpfin-timeout", cfg.TCPFinTimeout}, {"ipvs-udp-timeout", cfg.UDPTimeout}} {
		if err := ipvsTimeoutOK(t.d); err != nil {
			return nil, fmt.Errorf("--%s: %s %w", t.name, t.d, err)
		}
	}
	return cfg, nil
}

// ipvsTimeoutOK checks an IPVS timeout flag: 0 (leave the kernel's) or
// whole seconds up to MaxIPVSTimeout (the kernel takes seconds: 500ms
// would silently become 0, "leave").
func ipvsTimeoutOK(d time.Duration) error {
	switch {
	case d < 0:
		return errors.New("is negative")
	case d%time.Second != 0:
		return errors.New("is not a whole number of seconds (IPVS timeouts are in seconds)")
	case d > MaxIPVSTimeout:
		return fmt.Errorf("is longer than the kernel's limit %s", MaxIPVSTimeout)
	}
	return nil
}

// syncStats is the runtime's view of an IPVS controller's sync.
func syncStats(st dataplane.SyncStats) runtime.SyncStats {
	return runtime.SyncStats{Start: st.Start, Duration: st.Duration, Services: st.Services, Writes: st.Writes,
		Failed: st.Failed, NoLocalEndpoints: st.NoLocalEndpoints, Quarantined: st.Quarantined, Err: st.Err}
}
