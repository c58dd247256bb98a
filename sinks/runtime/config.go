package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/urfave/cli/v2"
)

// Config is everything the flags set, validated.
type Config struct {
	Kubeconfig string
	FromFile   string
	DryRun     bool
	// Cleanup asks the sink to remove what it programs and exit.
	Cleanup bool

	NodeName          string
	NodeAddresses     []netip.Addr
	NodePortAddresses []netip.Prefix
	Scheduler         string
	Weight            uint32
	MasqueradeAll     bool
	MasqueradeBit     int
	ClusterCIDRs      []netip.Prefix
	StrictARP         bool
	TCPTimeout        time.Duration
	TCPFinTimeout     time.Duration
	UDPTimeout        time.Duration
	ExcludeCIDRs      []netip.Prefix
	SyncPeriod        time.Duration
	MinSyncPeriod     time.Duration
	MetricsAddress    string
	HealthzAddress    string
	LogFormat         string
	LogLevel          string
	// VIPBinding is how the IPVS sinks make virtual IPs local
	// (--ipvs-vip-binding).
	VIPBinding dataplane.Binding
}

// env returns the environment variable of a flag: PROXYSINKS_ and the
// flag's name in upper case with underscores.
func env(name string) []string {
	return []string{"PROXYSINKS_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
}

// Flags returns the command-line flags.
func Flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", EnvVars: env("config"), Usage: "kube-proxy configuration `file` (KubeProxyConfiguration, kubeproxy.config.k8s.io/v1alpha1); flags and environment variables win over it"},
		&cli.StringFlag{Name: "kubeconfig", EnvVars: env("kubeconfig"), Usage: "kubeconfig `file` of the cluster (in-cluster config when empty and running in a pod)"},
		&cli.StringFlag{Name: "from-file", EnvVars: env("from-file"), Usage: "read Services and EndpointSlices from a manifest `file or directory` instead of the API, and follow its edits"},
		&cli.BoolFlag{Name: "dry-run", EnvVars: env("dry-run"), Usage: "print the kernel operations for the current state and exit, without privileges or IPVS"},
		&cli.BoolFlag{Name: "cleanup", EnvVars: env("cleanup"), Usage: "remove every kernel object the sink owns and exit (sinks that support it)"},
		&cli.StringFlag{Name: "node-name", Aliases: []string{"hostname-override"}, EnvVars: env("node-name"), Usage: "this node's `name` (endpoints on it are local); default: the host name"},
		&cli.StringSliceFlag{Name: "node-address", EnvVars: env("node-address"), Usage: "`address` to serve NodePorts on (repeatable or comma-separated); default: the node's addresses"},
		&cli.StringSliceFlag{Name: "nodeport-addresses", EnvVars: env("nodeport-addresses"), Usage: "serve NodePorts only on node addresses in these `CIDRs`"},
		&cli.StringFlag{Name: "scheduling-method", Aliases: []string{"ipvs-scheduler"}, Value: "rr", EnvVars: env("scheduling-method"), Usage: "IPVS `scheduler`: " + strings.Join(render.Schedulers, ", ")},
		&cli.Int64Flag{Name: "weight", Value: 1, EnvVars: env("weight"), Usage: "`weight` of every destination, 1 to 65535"},
		&cli.BoolFlag{Name: "masquerade-all", EnvVars: env("masquerade-all"), Usage: "masquerade all traffic to cluster IPs"},
		&cli.IntFlag{Name: "masquerade-bit", Aliases: []string{"iptables-masquerade-bit"}, Value: 14, EnvVars: env("masquerade-bit"), Usage: "fwmark `bit` marking packets to masquerade, 0 to 31"},
		&cli.StringSliceFlag{Name: "cluster-cidr", EnvVars: env("cluster-cidr"), Usage: "pod network `CIDR`s; cluster-IP traffic from outside them is masqueraded"},
		&cli.BoolFlag{Name: "ipvs-strict-arp", EnvVars: env("ipvs-strict-arp"), Usage: "set arp_ignore=1 and arp_announce=2"},
		&cli.DurationFlag{Name: "ipvs-tcp-timeout", EnvVars: env("ipvs-tcp-timeout"), Usage: "IPVS timeout of idle TCP connections, whole seconds (0: leave)"},
		&cli.DurationFlag{Name: "ipvs-tcpfin-timeout", EnvVars: env("ipvs-tcpfin-timeout"), Usage: "IPVS timeout of TCP connections after FIN, whole seconds (0: leave)"},
		&cli.DurationFlag{Name: "ipvs-udp-timeout", EnvVars: env("ipvs-udp-timeout"), Usage: "IPVS timeout of UDP flows, whole seconds (0: leave)"},
		&cli.StringSliceFlag{Name: "ipvs-exclude-cidrs", EnvVars: env("ipvs-exclude-cidrs"), Usage: "never touch virtual servers or addresses in these `CIDRs`"},
		&cli.StringFlag{Name: "ipvs-vip-binding", Value: "addresses", EnvVars: env("ipvs-vip-binding"), Usage: "how virtual IPs are made local: addresses (each bound on kube-ipvs0, as kube-proxy does) or routes (IPv4: one local route each through lo, protocol 156, no address; much cheaper to program at scale)"},
		&cli.DurationFlag{Name: "sync-period", Value: 30 * time.Second, EnvVars: env("sync-period"), Usage: "re-read the kernel and repair drift this often"},
		&cli.DurationFlag{Name: "min-sync-period", Value: time.Second, EnvVars: env("min-sync-period"), Usage: "shortest time between two syncs, at most --sync-period; changes within it are coalesced"},
		&cli.StringFlag{Name: "metrics-bind-address", Value: "127.0.0.1:10249", EnvVars: env("metrics-bind-address"), Usage: "`IP:port` serving /metrics, /proxyMode and /healthz (empty: off)"},
		&cli.StringFlag{Name: "healthz-bind-address", Value: "0.0.0.0:10256", EnvVars: env("healthz-bind-address"), Usage: "`IP:port` serving /healthz and /livez (empty: off)"},
		&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: env("log-format"), Usage: "log format: text or json"},
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: env("log-level"), Usage: "log level: debug, info, warn, error"},
	}
}

func parseAddrs(flag string, vals []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, v := range splitAll(vals) {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("--%s: %q is not an IP address", flag, v)
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

func parsePrefixes(flag string, vals []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range splitAll(vals) {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return nil, fmt.Errorf("--%s: %q is not a CIDR", flag, v)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func splitAll(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
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

// nodeAddressOK refuses addresses that are never a node's: unspecified,
// multicast, the limited broadcast, loopback, link-local with a zone.
func nodeAddressOK(a netip.Addr) error {
	switch {
	case a.IsUnspecified():
		return errors.New("is the unspecified address")
	case a.IsMulticast():
		return errors.New("is a multicast address")
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return errors.New("is the broadcast address")
	case a.IsLoopback():
		return errors.New("is a loopback address (IPVS does not serve NodePorts on loopback)")
	case a.Zone() != "":
		return errors.New("has a zone")
	}
	return nil
}

// bindAddressOK checks an HTTP bind address: empty (off) or IP:port, the
// IP possibly empty (every address), the port 1 to 65535.
func bindAddressOK(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("is not IP:port")
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("is not IP:port (%q is not an IP address)", host)
		}
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("is not IP:port (port %q is not in [1, 65535])", port)
	}
	return nil
}

// logLevels are the --log-level values and their slog levels.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// FromContext reads and validates the flags. Every bad value is an error
// naming the flag.
func FromContext(c *cli.Context) (Config, error) {
	cfg := Config{
		Kubeconfig: c.String("kubeconfig"), FromFile: c.String("from-file"), DryRun: c.Bool("dry-run"), Cleanup: c.Bool("cleanup"),
		NodeName: c.String("node-name"), Scheduler: c.String("scheduling-method"),
		MasqueradeAll: c.Bool("masquerade-all"), MasqueradeBit: c.Int("masquerade-bit"),
		StrictARP: c.Bool("ipvs-strict-arp"), TCPTimeout: c.Duration("ipvs-tcp-timeout"),
		TCPFinTimeout: c.Duration("ipvs-tcpfin-timeout"), UDPTimeout: c.Duration("ipvs-udp-timeout"),
		SyncPeriod: c.Duration("sync-period"), MinSyncPeriod: c.Duration("min-sync-period"),
		MetricsAddress: c.String("metrics-bind-address"), HealthzAddress: c.String("healthz-bind-address"),
		LogFormat: c.String("log-format"), LogLevel: c.String("log-level"),
	}
	var err error
	if cfg.NodeAddresses, err = parseAddrs("node-address", c.StringSlice("node-address")); err != nil {
		return cfg, err
	}
	if cfg.NodePortAddresses, err = parsePrefixes("nodeport-addresses", c.StringSlice("nodeport-addresses")); err != nil {
		return cfg, err
	}
	if cfg.ClusterCIDRs, err = parsePrefixes("cluster-cidr", c.StringSlice("cluster-cidr")); err != nil {
		return cfg, err
	}
	if cfg.ExcludeCIDRs, err = parsePrefixes("ipvs-exclude-cidrs", c.StringSlice("ipvs-exclude-cidrs")); err != nil {
		return cfg, err
	}
	if b, ok := dataplane.Bindings[c.String("ipvs-vip-binding")]; ok {
		cfg.VIPBinding = b
	} else {
		return cfg, fmt.Errorf("--ipvs-vip-binding: %q is neither addresses nor routes", c.String("ipvs-vip-binding"))
	}
	if n := c.Args().Len(); n > 0 {
		return cfg, fmt.Errorf("unexpected argument %q: every setting is a flag (see --help)", c.Args().First())
	}
	for _, a := range cfg.NodeAddresses {
		if err := nodeAddressOK(a); err != nil {
			return cfg, fmt.Errorf("--node-address: %s %w", a, err)
		}
	}
	switch w := c.Int64("weight"); {
	case w < MinWeight || w > MaxWeight:
		return cfg, fmt.Errorf("--weight: %d is not in [%d, %d] (weight 0 would stop new connections to every endpoint)", w, MinWeight, MaxWeight)
	default:
		cfg.Weight = uint32(w)
	}
	if !slices.Contains(render.Schedulers, cfg.Scheduler) {
		return cfg, fmt.Errorf("--scheduling-method: unknown scheduler %q (want one of %s)", cfg.Scheduler, strings.Join(render.Schedulers, ", "))
	}
	if cfg.MasqueradeBit < 0 || cfg.MasqueradeBit > 31 {
		return cfg, fmt.Errorf("--masquerade-bit: %d is not in [0, 31]", cfg.MasqueradeBit)
	}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"ipvs-tcp-timeout", cfg.TCPTimeout}, {"ipvs-tcpfin-timeout", cfg.TCPFinTimeout}, {"ipvs-udp-timeout", cfg.UDPTimeout}} {
		if err := ipvsTimeoutOK(t.d); err != nil {
			return cfg, fmt.Errorf("--%s: %s %w", t.name, t.d, err)
		}
	}
	if cfg.SyncPeriod <= 0 {
		return cfg, fmt.Errorf("--sync-period: %s must be positive", cfg.SyncPeriod)
	}
	if cfg.MinSyncPeriod < 0 {
		return cfg, fmt.Errorf("--min-sync-period: %s is negative", cfg.MinSyncPeriod)
	}
	if cfg.MinSyncPeriod > cfg.SyncPeriod {
		return cfg, fmt.Errorf("--min-sync-period: %s is longer than --sync-period %s", cfg.MinSyncPeriod, cfg.SyncPeriod)
	}
	if cfg.FromFile != "" && cfg.Kubeconfig != "" {
		return cfg, fmt.Errorf("--from-file and --kubeconfig: give one source, not both")
	}
	if cfg.Cleanup && cfg.DryRun {
		return cfg, fmt.Errorf("--cleanup and --dry-run: give one, not both")
	}
	for _, b := range []struct{ name, addr string }{{"metrics-bind-address", cfg.MetricsAddress}, {"healthz-bind-address", cfg.HealthzAddress}} {
		if err := bindAddressOK(b.addr); err != nil {
			return cfg, fmt.Errorf("--%s: %q %w", b.name, b.addr, err)
		}
	}
	if cfg.MetricsAddress != "" && cfg.MetricsAddress == cfg.HealthzAddress {
		return cfg, fmt.Errorf("--healthz-bind-address: %q is also --metrics-bind-address (the metrics address serves /healthz too: leave this one empty)", cfg.HealthzAddress)
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		return cfg, fmt.Errorf("--log-format: %q is not text or json", cfg.LogFormat)
	}
	if _, ok := logLevels[cfg.LogLevel]; !ok {
		return cfg, fmt.Errorf("--log-level: %q is not debug, info, warn or error", cfg.LogLevel)
	}
	return cfg, nil
}

// NodePortFilter returns the addresses of addrs in --nodeport-addresses
// (all when the flag is not given).
func (c Config) NodePortFilter(addrs []netip.Addr) []netip.Addr {
	if len(c.NodePortAddresses) == 0 {
		return addrs
	}
	var out []netip.Addr
	for _, a := range addrs {
		for _, p := range c.NodePortAddresses {
			if p.Contains(a) {
				out = append(out, a)
				break
			}
		}
	}
	return out
}
