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

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/conntrack"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/urfave/cli/v2"
)

// Config is everything the flags set, validated.
type Config struct {
	Kubeconfig string
	FromFile   string
	DryRun     bool
	// Cleanup asks the sink to remove what it programs and exit.
	Cleanup bool

	NodeName      string
	NodeAddresses []netip.Addr
	// NodePortAddresses are the CIDRs of --nodeport-addresses, its
	// localhost and all keywords expanded; NodePortPrimary is set when it
	// holds primary (SelectNodePorts).
	NodePortAddresses []netip.Prefix
	NodePortPrimary   bool
	// BindAddress is --bind-address (kube-proxy's bindAddress): the
	// node's primary IP of its family, when valid and not unspecified
	// (PrimaryIPs).
	BindAddress    netip.Addr
	MasqueradeAll  bool
	MasqueradeBit  int
	ClusterCIDRs   []netip.Prefix
	SyncPeriod     time.Duration
	MinSyncPeriod  time.Duration
	MetricsAddress string
	HealthzAddress string
	LogFormat      string
	LogLevel       string
	// Master, when set, replaces the kubeconfig's API server URL
	// (kube-proxy's --master).
	Master string
	// InitOnly asks the sink to check its configuration and exit
	// (kube-proxy's --init-only).
	InitOnly bool
	// OOMScoreAdj, when set, is written to the process's oom_score_adj
	// at start (kube-proxy's --oom-score-adj, oomScoreAdj).
	OOMScoreAdj *int
	// FeatureGates are kube-proxy's feature gates given (--feature-gates,
	// featureGates), checked against kpconfig.Gates.
	FeatureGates map[string]bool
	// DetectLocalMode is how rules tell traffic from this node's pods
	// (--detect-local-mode); PodBridgeInterface and PodInterfacePrefix
	// are its interface modes' names.
	DetectLocalMode                        xtables.LocalMode
	PodBridgeInterface, PodInterfacePrefix string
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
		&cli.StringFlag{Name: "config", EnvVars: EnvVars("config"), Usage: "kube-proxy configuration `file` (KubeProxyConfiguration, kubeproxy.config.k8s.io/v1alpha1); as in kube-proxy, it replaces the flags that map onto it, except --hostname-override and the logging flags"},
		&cli.StringFlag{Name: "kubeconfig", EnvVars: EnvVars("kubeconfig"), Usage: "kubeconfig `file` of the cluster (in-cluster config when empty and running in a pod)"},
		&cli.StringFlag{Name: "from-file", EnvVars: EnvVars("from-file"), Usage: "read Services and EndpointSlices from a manifest `file or directory` instead of the API, and follow its edits"},
		&cli.BoolFlag{Name: "dry-run", EnvVars: EnvVars("dry-run"), Usage: "print the kernel operations for the current state and exit, without privileges or IPVS"},
		&cli.BoolFlag{Name: "cleanup", EnvVars: EnvVars("cleanup"), Usage: "remove every kernel object the sink owns and exit (sinks that support it)"},
		&cli.StringFlag{Name: "node-name", Aliases: []string{"hostname-override"}, EnvVars: EnvVars("node-name"), Usage: "this node's `name` (endpoints on it are local); default: the host name"},
		&cli.StringSliceFlag{Name: "node-address", EnvVars: EnvVars("node-address"), Usage: "`address` to serve NodePorts on (repeatable or comma-separated); default: the node's addresses"},
		&cli.StringSliceFlag{Name: "nodeport-addresses", EnvVars: EnvVars("nodeport-addresses"), Usage: "serve NodePorts only on node addresses in these `CIDRs` (per IP family: a family none is of is served on all its addresses), or the keywords primary (the node's primary IPs: --bind-address, else the Node's first InternalIP, else ExternalIP, per family), localhost, all; followed live as addresses come and go; unset: all (nftables mode: primary, as kube-proxy's)"},
		&cli.StringFlag{Name: "bind-address", Value: "0.0.0.0", EnvVars: EnvVars("bind-address"), Usage: "the node's primary `IP` of its family, for --nodeport-addresses=primary (kube-proxy's --bind-address; binds nothing); 0.0.0.0 or :: means the Node's addresses"},
		&cli.BoolFlag{Name: "masquerade-all", EnvVars: EnvVars("masquerade-all"), Usage: "masquerade all traffic to cluster IPs"},
		&cli.IntFlag{Name: "masquerade-bit", Aliases: []string{"iptables-masquerade-bit"}, Value: 14, EnvVars: EnvVars("masquerade-bit"), Usage: "fwmark `bit` marking packets to masquerade, 0 to 31"},
		&cli.StringSliceFlag{Name: "cluster-cidr", EnvVars: EnvVars("cluster-cidr"), Usage: "pod network `CIDR`s; cluster-IP traffic from outside them is masqueraded"},
		&cli.StringFlag{Name: "detect-local-mode", EnvVars: EnvVars("detect-local-mode"), Usage: "how rules tell traffic from this node's pods: ClusterCIDR (from --cluster-cidr), NodeCIDR (the Node's podCIDRs), BridgeInterface (in through --pod-bridge-interface) or InterfaceNamePrefix (in through an interface named --pod-interface-name-prefix...)"},
		&cli.StringFlag{Name: "pod-bridge-interface", EnvVars: EnvVars("pod-bridge-interface"), Usage: "the pods' bridge `interface` (--detect-local-mode=BridgeInterface)"},
		&cli.StringFlag{Name: "pod-interface-name-prefix", EnvVars: EnvVars("pod-interface-name-prefix"), Usage: "the `prefix` of the pods' interface names (--detect-local-mode=InterfaceNamePrefix)"},
		&cli.DurationFlag{Name: "sync-period", Value: 30 * time.Second, EnvVars: EnvVars("sync-period"), Usage: "re-read the kernel and repair drift this often"},
		&cli.DurationFlag{Name: "min-sync-period", Value: time.Second, EnvVars: EnvVars("min-sync-period"), Usage: "shortest time between two syncs, at most --sync-period; changes within it are coalesced"},
		&cli.StringFlag{Name: "metrics-bind-address", Value: "127.0.0.1:10249", EnvVars: EnvVars("metrics-bind-address"), Usage: "`IP:port` serving /metrics, /proxyMode and /healthz (empty: off)"},
		&cli.StringFlag{Name: "healthz-bind-address", Value: "0.0.0.0:10256", EnvVars: EnvVars("healthz-bind-address"), Usage: "`IP:port` serving /healthz and /livez (empty: off)"},
		&cli.StringFlag{Name: "log-format", Aliases: []string{"logging-format"}, Value: "text", EnvVars: EnvVars("log-format"), Usage: "log format: text or json"},
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
// warnings name the flags given that the sink ignores. fromFile maps the
// flags --config set to the file's fields (kpconfig.Apply's settings).
func FromContext(c *cli.Context, sink Sink, fromFile map[string]string) (Config, []string, error) {
	cfg, warnings, err := sharedConfig(c, sink.Mode, fromFile)
	if err != nil {
		return cfg, nil, err
	}
	if sink.Parse != nil {
		if cfg.SinkConfig, err = sink.Parse(c); err != nil {
			return cfg, nil, err
		}
	}
	more, err := sink.Table().check(c, sink.Mode)
	return cfg, append(warnings, more...), err
}

// sharedConfig reads and validates the runtime's flags, kube-proxy's
// among them, for a sink of mode.
func sharedConfig(c *cli.Context, mode string, fromFile map[string]string) (Config, []string, error) {
	cfg := Config{
		Kubeconfig: c.String("kubeconfig"), FromFile: c.String("from-file"), DryRun: c.Bool("dry-run"), Cleanup: c.Bool("cleanup"),
		// As kube-proxy (nodeutil.GetHostname): trimmed, in lower case.
		NodeName:      strings.ToLower(strings.TrimSpace(c.String("node-name"))),
		MasqueradeAll: c.Bool("masquerade-all"), MasqueradeBit: c.Int("masquerade-bit"),
		PodBridgeInterface: c.String("pod-bridge-interface"), PodInterfacePrefix: c.String("pod-interface-name-prefix"),
		SyncPeriod: c.Duration("sync-period"), MinSyncPeriod: c.Duration("min-sync-period"),
		MetricsAddress: c.String("metrics-bind-address"), HealthzAddress: c.String("healthz-bind-address"),
		LogFormat: c.String("log-format"), LogLevel: c.String("log-level"),
	}
	if c.IsSet("node-name") && cfg.NodeName == "" {
		return cfg, nil, fmt.Errorf("--node-name: %q is empty", c.String("node-name"))
	}
	warnings, err := kubeProxyConfig(c, mode, &cfg, fromFile)
	if err != nil {
		return cfg, nil, err
	}
	if cfg.FromFile != "" && cfg.Kubeconfig != "" {
		if _, ok := fromFile["kubeconfig"]; ok {
			// The file's API client settings do not compete with an
			// explicit source.
			warnings = append(warnings, "--config: clientConnection.kubeconfig unused: --from-file is the source")
			cfg.Kubeconfig = ""
		}
	}
	if cfg.NodeAddresses, err = parseAddrs("node-address", c.StringSlice("node-address")); err != nil {
		return cfg, nil, err
	}
	npa := c.StringSlice("nodeport-addresses")
	if len(splitAll(npa)) == 0 {
		npa = defaultNodePortAddresses(mode)
	}
	if cfg.NodePortAddresses, cfg.NodePortPrimary, err = parseNodePortAddresses(npa); err != nil {
		return cfg, nil, err
	}
	if b := c.String("bind-address"); b != "" {
		if cfg.BindAddress, err = netip.ParseAddr(b); err != nil {
			return cfg, nil, fmt.Errorf("--bind-address: %q is not an IP address", b)
		}
	}
	if cfg.ClusterCIDRs, err = ParsePrefixes("cluster-cidr", c.StringSlice("cluster-cidr")); err != nil {
		return cfg, nil, err
	}
	if err := cfg.localModeOK(c.String("detect-local-mode")); err != nil {
		return cfg, nil, err
	}
	if cfg.Conntrack, err = conntrackSettings(c); err != nil {
		return cfg, nil, err
	}
	if n := c.Args().Len(); n > 0 {
		return cfg, nil, fmt.Errorf("unexpected argument %q: every setting is a flag (see --help)", c.Args().First())
	}
	for _, a := range cfg.NodeAddresses {
		if err := nodeAddressOK(a); err != nil {
			return cfg, nil, fmt.Errorf("--node-address: %s %w", a, err)
		}
	}
	if cfg.MasqueradeBit < 0 || cfg.MasqueradeBit > 31 {
		return cfg, nil, fmt.Errorf("--masquerade-bit: %d is not in [0, 31]", cfg.MasqueradeBit)
	}
	return cfg, warnings, periodsAndAddressesOK(cfg)
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
	if cfg.FromFile != "" && cfg.Master != "" {
		return fmt.Errorf("--from-file and --master: give one source, not both")
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

// localModeOK reads --detect-local-mode (mode) and checks its companions:
// an interface mode needs its interface's name, as in kube-proxy's
// validation.
func (c *Config) localModeOK(mode string) error {
	m, err := xtables.ParseLocalMode(mode)
	if err != nil {
		return fmt.Errorf("--detect-local-mode: %w", err)
	}
	c.DetectLocalMode = m
	switch {
	case m == xtables.LocalBridgeInterface && c.PodBridgeInterface == "":
		return errors.New("--detect-local-mode: BridgeInterface needs --pod-bridge-interface")
	case m == xtables.LocalInterfaceNamePrefix && c.PodInterfacePrefix == "":
		return errors.New("--detect-local-mode: InterfaceNamePrefix needs --pod-interface-name-prefix")
	}
	return nil
}

// LocalTraffic resolves --detect-local-mode: NodeCIDR takes node's pod
// CIDRs (none while the Node is not known: nothing is detected, and the
// rules that need detection fall back as kube-proxy's no-op detector's
// do).
func (c Config) LocalTraffic(node *client.Node) xtables.LocalTraffic {
	var cidrs []netip.Prefix
	iface := ""
	switch c.DetectLocalMode {
	case xtables.LocalNodeCIDR:
		if node != nil {
			cidrs = node.PodCIDRs
		}
	case xtables.LocalBridgeInterface:
		iface = c.PodBridgeInterface
	case xtables.LocalInterfaceNamePrefix:
		iface = c.PodInterfacePrefix
	default:
		cidrs = c.ClusterCIDRs
	}
	l, err := xtables.NewLocalTraffic(c.DetectLocalMode, cidrs, iface)
	if err != nil {
		// localModeOK refused what cannot be resolved.
		return xtables.LocalTraffic{}
	}
	return l
}
