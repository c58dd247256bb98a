package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/proxysinks/proxysinks/host/conntrack"
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
	MasqueradeAll     bool
	MasqueradeBit     int
	ClusterCIDRs      []netip.Prefix
	SyncPeriod        time.Duration
	MinSyncPeriod     time.Duration
	MetricsAddress    string
	HealthzAddress    string
	LogFormat         string
	LogLevel          string
	// Conntrack are the --conntrack-* settings, applied at start.
	Conntrack conntrack.Settings
	// SinkConfig is what the sink's own flags set (Sink.Parse's result;
	// nil for a sink without any).
	SinkConfig any
}

// EnvVars returns the environment variable of a flag: PROXYSINKS_ and the
// flag's name in upper case with underscores.
func EnvVars(name string) []string {
	return []string{"PROXYSINKS_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
}

// sharedFlags returns the flags every sink has; a sink adds its own
// (Sink.Flags).
func sharedFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "config", EnvVars: EnvVars("config"), Usage: "kube-proxy configuration `file` (KubeProxyConfiguration, kubeproxy.config.k8s.io/v1alpha1); flags and environment variables win over it"},
		&cli.StringFlag{Name: "kubeconfig", EnvVars: EnvVars("kubeconfig"), Usage: "kubeconfig `file` of the cluster (in-cluster config when empty and running in a pod)"},
		&cli.StringFlag{Name: "from-file", EnvVars: EnvVars("from-file"), Usage: "read Services and EndpointSlices from a manifest `file or directory` instead of the API, and follow its edits"},
		&cli.BoolFlag{Name: "dry-run", EnvVars: EnvVars("dry-run"), Usage: "print the kernel operations for the current state and exit, without privileges or IPVS"},
		&cli.BoolFlag{Name: "cleanup", EnvVars: EnvVars("cleanup"), Usage: "remove every kernel object the sink owns and exit (sinks that support it)"},
		&cli.StringFlag{Name: "node-name", Aliases: []string{"hostname-override"}, EnvVars: EnvVars("node-name"), Usage: "this node's `name` (endpoints on it are local); default: the host name"},
		&cli.StringSliceFlag{Name: "node-address", EnvVars: EnvVars("node-address"), Usage: "`address` to serve NodePorts on (repeatable or comma-separated); default: the node's addresses"},
		&cli.StringSliceFlag{Name: "nodeport-addresses", EnvVars: EnvVars("nodeport-addresses"), Usage: "serve NodePorts only on node addresses in these `CIDRs`"},
		&cli.BoolFlag{Name: "masquerade-all", EnvVars: EnvVars("masquerade-all"), Usage: "masquerade all traffic to cluster IPs"},
		&cli.IntFlag{Name: "masquerade-bit", Aliases: []string{"iptables-masquerade-bit"}, Value: 14, EnvVars: EnvVars("masquerade-bit"), Usage: "fwmark `bit` marking packets to masquerade, 0 to 31"},
		&cli.StringSliceFlag{Name: "cluster-cidr", EnvVars: EnvVars("cluster-cidr"), Usage: "pod network `CIDR`s; cluster-IP traffic from outside them is masqueraded"},
		&cli.DurationFlag{Name: "sync-period", Value: 30 * time.Second, EnvVars: EnvVars("sync-period"), Usage: "re-read the kernel and repair drift this often"},
		&cli.DurationFlag{Name: "min-sync-period", Value: time.Second, EnvVars: EnvVars("min-sync-period"), Usage: "shortest time between two syncs, at most --sync-period; changes within it are coalesced"},
		&cli.StringFlag{Name: "metrics-bind-address", Value: "127.0.0.1:10249", EnvVars: EnvVars("metrics-bind-address"), Usage: "`IP:port` serving /metrics, /proxyMode and /healthz (empty: off)"},
		&cli.StringFlag{Name: "healthz-bind-address", Value: "0.0.0.0:10256", EnvVars: EnvVars("healthz-bind-address"), Usage: "`IP:port` serving /healthz and /livez (empty: off)"},
		&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: EnvVars("log-format"), Usage: "log format: text or json"},
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: EnvVars("log-level"), Usage: "log level: debug, info, warn, error"},
	}, conntrackFlags()...)
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

// ParsePrefixes parses the CIDRs of a list flag (each value repeatable or
// comma-separated); a bad one is an error naming the flag.
func ParsePrefixes(flag string, vals []string) ([]netip.Prefix, error) {
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

// FromContext reads and validates the flags of sink: the runtime's, then
// the sink's own (Sink.Parse, into Config.SinkConfig). Every bad value is
// an error naming the flag, and so is a flag the sink refuses; the
// warnings name the flags given that the sink ignores.
func FromContext(c *cli.Context, sink Sink) (Config, []string, error) {
	cfg, err := sharedConfig(c)
	if err != nil {
		return cfg, nil, err
	}
	if sink.Parse != nil {
		if cfg.SinkConfig, err = sink.Parse(c); err != nil {
			return cfg, nil, err
		}
	}
	warnings, err := sink.Table().check(c, sink.Mode)
	return cfg, warnings, err
}

// sharedConfig reads and validates the runtime's flags.
func sharedConfig(c *cli.Context) (Config, error) {
	cfg := Config{
		Kubeconfig: c.String("kubeconfig"), FromFile: c.String("from-file"), DryRun: c.Bool("dry-run"), Cleanup: c.Bool("cleanup"),
		NodeName:      c.String("node-name"),
		MasqueradeAll: c.Bool("masquerade-all"), MasqueradeBit: c.Int("masquerade-bit"),
		SyncPeriod: c.Duration("sync-period"), MinSyncPeriod: c.Duration("min-sync-period"),
		MetricsAddress: c.String("metrics-bind-address"), HealthzAddress: c.String("healthz-bind-address"),
		LogFormat: c.String("log-format"), LogLevel: c.String("log-level"),
	}
	var err error
	if cfg.NodeAddresses, err = parseAddrs("node-address", c.StringSlice("node-address")); err != nil {
		return cfg, err
	}
	if cfg.NodePortAddresses, err = ParsePrefixes("nodeport-addresses", c.StringSlice("nodeport-addresses")); err != nil {
		return cfg, err
	}
	if cfg.ClusterCIDRs, err = ParsePrefixes("cluster-cidr", c.StringSlice("cluster-cidr")); err != nil {
		return cfg, err
	}
	if cfg.Conntrack, err = conntrackSettings(c); err != nil {
		return cfg, err
	}
	if n := c.Args().Len(); n > 0 {
		return cfg, fmt.Errorf("unexpected argument %q: every setting is a flag (see --help)", c.Args().First())
	}
	for _, a := range cfg.NodeAddresses {
		if err := nodeAddressOK(a); err != nil {
			return cfg, fmt.Errorf("--node-address: %s %w", a, err)
		}
	}
	if cfg.MasqueradeBit < 0 || cfg.MasqueradeBit > 31 {
		return cfg, fmt.Errorf("--masquerade-bit: %d is not in [0, 31]", cfg.MasqueradeBit)
	}
	return cfg, periodsAndAddressesOK(cfg)
}

// periodsAndAddressesOK checks the sync periods, the sources, the HTTP
// addresses and the logging flags.
func periodsAndAddressesOK(cfg Config) error {
	if cfg.SyncPeriod <= 0 {
		return fmt.Errorf("--sync-period: %s must be positive", cfg.SyncPeriod)
	}
	if cfg.MinSyncPeriod < 0 {
		return fmt.Errorf("--min-sync-period: %s is negative", cfg.MinSyncPeriod)
	}
	if cfg.MinSyncPeriod > cfg.SyncPeriod {
		return fmt.Errorf("--min-sync-period: %s is longer than --sync-period %s", cfg.MinSyncPeriod, cfg.SyncPeriod)
	}
	if cfg.FromFile != "" && cfg.Kubeconfig != "" {
		return fmt.Errorf("--from-file and --kubeconfig: give one source, not both")
	}
	if cfg.Cleanup && cfg.DryRun {
		return fmt.Errorf("--cleanup and --dry-run: give one, not both")
	}
	for _, b := range []struct{ name, addr string }{{"metrics-bind-address", cfg.MetricsAddress}, {"healthz-bind-address", cfg.HealthzAddress}} {
		if err := bindAddressOK(b.addr); err != nil {
			return fmt.Errorf("--%s: %q %w", b.name, b.addr, err)
		}
	}
	if cfg.MetricsAddress != "" && cfg.MetricsAddress == cfg.HealthzAddress {
		return fmt.Errorf("--healthz-bind-address: %q is also --metrics-bind-address (the metrics address serves /healthz too: leave this one empty)", cfg.HealthzAddress)
	}
	if cfg.LogFormat != "text" && cfg.LogFormat != "json" {
		return fmt.Errorf("--log-format: %q is not text or json", cfg.LogFormat)
	}
	if _, ok := logLevels[cfg.LogLevel]; !ok {
		return fmt.Errorf("--log-level: %q is not debug, info, warn or error", cfg.LogLevel)
	}
	return nil
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
