package runtime

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/urfave/cli/v2"
)

// KubeProxyFlag is a flag of kube-proxy v1.37.2 (cmd/kube-proxy/app
// options.go AddFlags, and component-base's logging flags; the same set as
// its --help, plus the deprecated --healthz-port and --metrics-port).
type KubeProxyFlag struct {
	Name string
	// WithConfig: kube-proxy still applies the flag when --config is given
	// (Complete: the file replaces the configuration; --hostname-override,
	// --master, --cleanup, --init-only, --write-config-to and the logging
	// flags stay).
	WithConfig bool
}

// KubeProxyFlags are every flag of kube-proxy v1.37.2; every sink's table
// classes each of them (the tests check it).
var KubeProxyFlags = []KubeProxyFlag{
	{"bind-address", false}, {"bind-address-hard-fail", false}, {"cleanup", true}, {"cluster-cidr", false},
	{"config", true}, {"config-sync-period", false},
	{"conntrack-max-per-core", false}, {"conntrack-min", false}, {"conntrack-tcp-be-liberal", false},
	{"conntrack-tcp-timeout-close-wait", false}, {"conntrack-tcp-timeout-established", false},
	{"conntrack-udp-timeout", false}, {"conntrack-udp-timeout-stream", false},
	{"detect-local-mode", false}, {"feature-gates", false}, {"healthz-bind-address", false}, {"healthz-port", false},
	{"hostname-override", true}, {"init-only", true}, {"iptables-localhost-nodeports", false},
	{"iptables-masquerade-bit", false}, {"iptables-min-sync-period", false}, {"iptables-sync-period", false},
	{"ipvs-exclude-cidrs", false}, {"ipvs-min-sync-period", false}, {"ipvs-scheduler", false},
	{"ipvs-strict-arp", false}, {"ipvs-sync-period", false}, {"ipvs-tcp-timeout", false},
	{"ipvs-tcpfin-timeout", false}, {"ipvs-udp-timeout", false},
	{"kube-api-burst", false}, {"kube-api-content-type", false}, {"kube-api-qps", false}, {"kubeconfig", false},
	{"log-flush-frequency", true}, {"log-json-info-buffer-size", true}, {"log-json-split-stream", true},
	{"log-text-info-buffer-size", true}, {"log-text-split-stream", true}, {"logging-format", true},
	{"masquerade-all", false}, {"master", true}, {"metrics-bind-address", false}, {"metrics-port", false},
	{"nodeport-addresses", false}, {"oom-score-adj", false}, {"pod-bridge-interface", false},
	{"pod-interface-name-prefix", false}, {"profiling", false}, {"proxy-mode", false},
	{"show-hidden-metrics-for-version", false}, {"v", true}, {"vmodule", true}, {"write-config-to", true},
}

// The categories --help groups a sink's flags in (cli's Category).
const (
	// CategoryKubeProxy holds the flags one of whose names is kube-proxy's
	// (KubeProxyFlags).
	CategoryKubeProxy = "kube-proxy-compatible flags (kube-proxy v1.37's names)"
	// CategoryOwn holds the others: every sink's (the runtime's) and the
	// sink's own.
	CategoryOwn = "the sink's own flags"
)

// KubeProxyName returns the name of f's that is a kube-proxy flag (""
// when none is).
func KubeProxyName(f cli.Flag) string {
	for _, n := range f.Names() {
		for _, k := range KubeProxyFlags {
			if k.Name == n {
				return n
			}
		}
	}
	return ""
}

// Category returns the --help category of f: CategoryKubeProxy or
// CategoryOwn.
func Category(f cli.Flag) string {
	if KubeProxyName(f) != "" {
		return CategoryKubeProxy
	}
	return CategoryOwn
}

// kubeProxyFlags returns the flags of kube-proxy v1.37.2 that neither the
// runtime's own flags (sharedFlags, which hold kube-proxy's --config,
// --kubeconfig, --hostname-override, --cluster-cidr, --nodeport-addresses,
// --masquerade-all, --iptables-masquerade-bit, the bind addresses,
// --logging-format and --cleanup) nor the sinks' (Sink.Flags: the ipvs-*
// settings) define, classed for a sink of mode. Each has File, the field
// of the configuration file kube-proxy maps it onto, where it has one.
//
// Not here yet: --conntrack-*, --detect-local-mode, --pod-bridge-interface,
// --pod-interface-name-prefix and --iptables-localhost-nodeports, which
// their own changes add.
func kubeProxyFlags(mode string) []Flag {
	own := syncFlagsMode(mode)
	sync := func(m, name, file string) Flag {
		ours := strings.TrimPrefix(name, m+"-")
		f := Flag{Flag: &cli.DurationFlag{Name: name, Usage: fmt.Sprintf("kube-proxy's name of --%s (give one of them; unset: --%s's)", ours, ours)},
			Class: kpconfig.Honoured, File: m + "." + file}
		switch {
		case m != own:
			f.Class, f.Why = kpconfig.Ignored, fmt.Sprintf("another proxy mode's (this sink takes --%s-%s)", own, name[len(m)+1:])
		case mode == "nftables":
			// kube-proxy's nftables mode takes the iptables flags, and
			// the nftables section of the file in their place.
			f.File = "nftables." + file
		}
		return f
	}
	ignored := func(f cli.Flag, file, why string) Flag {
		return Flag{Flag: f, Class: kpconfig.Ignored, File: file, Why: why}
	}
	logging := func(f cli.Flag, file, why string) Flag {
		return Flag{Flag: f, Class: kpconfig.Ignored, File: file, OverFile: true, Why: why}
	}
	return []Flag{
		{Flag: &cli.StringFlag{Name: "proxy-mode", Usage: "kube-proxy's proxy `mode`: accepted when it is this sink's (empty: kube-proxy's default, iptables)"},
			Class: kpconfig.Honoured, File: "mode"},
		sync("iptables", "iptables-sync-period", "syncPeriod"),
		sync("iptables", "iptables-min-sync-period", "minSyncPeriod"),
		sync("ipvs", "ipvs-sync-period", "syncPeriod"),
		sync("ipvs", "ipvs-min-sync-period", "minSyncPeriod"),
		{Flag: &cli.StringSliceFlag{Name: "feature-gates", Usage: "kube-proxy's feature gates, `Name=bool` pairs: those that change what kube-proxy programs are honoured or refused, the others logged"},
			Class: kpconfig.Honoured, File: "featureGates"},
		{Flag: &cli.StringFlag{Name: "master", Usage: "API server `URL`, over the kubeconfig's (kube-proxy's --master)"}, Class: kpconfig.Honoured},
		{Flag: &cli.IntFlag{Name: "oom-score-adj", Usage: "set this process's oom_score_adj (-1000 to 1000; a failure is logged, as kube-proxy does)"},
			Class: kpconfig.Honoured, File: "oomScoreAdj"},
		{Flag: &cli.BoolFlag{Name: "init-only", Usage: "check the flags and the configuration, then exit (the sinks need no privileged step before they start)"},
			Class: kpconfig.Honoured},
		{Flag: &cli.IntFlag{Name: "v", Usage: "kube-proxy's log verbosity: 4 and more is --log-level debug, less is info; wins over --log-level"},
			Class: kpconfig.Honoured, File: "logging.verbosity", OverFile: true},
		{Flag: &cli.IntFlag{Name: "healthz-port", Value: 10256, Usage: "deprecated kube-proxy flag: the port of --healthz-bind-address when it has none; 0 turns the server off"},
			Class: kpconfig.Honoured, File: "healthzBindAddress"},
		{Flag: &cli.IntFlag{Name: "metrics-port", Value: 10249, Usage: "deprecated kube-proxy flag: the port of --metrics-bind-address when it has none; 0 turns the server off"},
			Class: kpconfig.Honoured, File: "metricsBindAddress"},
		{Flag: &cli.StringFlag{Name: "write-config-to"}, Class: kpconfig.Refused,
			Why: "the sinks do not write kube-proxy's configuration (kube-proxy --write-config-to does); remove it"},
		ignored(&cli.BoolFlag{Name: "bind-address-hard-fail"}, "bindAddressHardFail", "a bind failure is always fatal"),
		ignored(&cli.BoolFlag{Name: "profiling"}, "enableProfiling", "no profiling endpoint"),
		ignored(&cli.StringFlag{Name: "show-hidden-metrics-for-version"}, "showHiddenMetricsForVersion", "no hidden metrics"),
		ignored(&cli.DurationFlag{Name: "config-sync-period"}, "configSyncPeriod", "informers do not resync"),
		ignored(&cli.IntFlag{Name: "kube-api-burst"}, "clientConnection.burst", "client-go defaults are used"),
		ignored(&cli.Float64Flag{Name: "kube-api-qps"}, "clientConnection.qps", "client-go defaults are used"),
		ignored(&cli.StringFlag{Name: "kube-api-content-type"}, "clientConnection.contentType", "the sinks ask for protobuf"),
		logging(&cli.StringFlag{Name: "vmodule"}, "logging.vmodule", "no per-file log levels"),
		logging(&cli.DurationFlag{Name: "log-flush-frequency"}, "logging.flushFrequency", "the sinks do not buffer their logs"),
		logging(&cli.StringFlag{Name: "log-json-info-buffer-size"}, "logging.options.json.infoBufferSize", "the sinks do not buffer their logs"),
		logging(&cli.StringFlag{Name: "log-text-info-buffer-size"}, "logging.options.text.infoBufferSize", "the sinks do not buffer their logs"),
		logging(&cli.BoolFlag{Name: "log-json-split-stream"}, "logging.options.json.splitStream", "every log line goes to stderr"),
		logging(&cli.BoolFlag{Name: "log-text-split-stream"}, "logging.options.text.splitStream", "every log line goes to stderr"),
	}
}

// syncFlagsMode returns the mode whose --<mode>-sync-period flags a sink
// of mode takes: kube-proxy applies the ipvs ones in ipvs mode and the
// iptables ones in every other mode.
func syncFlagsMode(mode string) string {
	if mode == "ipvs" {
		return "ipvs"
	}
	return "iptables"
}

// kubeProxyConfig reads the kube-proxy flags of kubeProxyFlags into cfg
// for a sink of mode; it returns the warnings of the feature gates it
// ignores. fromFile names the flags --config set (their messages name the
// file's field).
func kubeProxyConfig(c *cli.Context, mode string, cfg *Config, fromFile map[string]string) ([]string, error) {
	if c.IsSet("proxy-mode") {
		if err := kpconfig.CheckMode(c.String("proxy-mode"), mode); err != nil {
			return nil, fmt.Errorf("--proxy-mode: %w", err)
		}
	}
	own := syncFlagsMode(mode)
	for _, p := range []struct {
		flag, theirs string
		d            *time.Duration
	}{{"sync-period", own + "-sync-period", &cfg.SyncPeriod}, {"min-sync-period", own + "-min-sync-period", &cfg.MinSyncPeriod}} {
		if !c.IsSet(p.theirs) {
			continue
		}
		if c.IsSet(p.flag) {
			return nil, fmt.Errorf("--%s and --%s: give one, not both", p.flag, p.theirs)
		}
		*p.d = c.Duration(p.theirs)
	}
	cfg.Master, cfg.InitOnly = c.String("master"), c.Bool("init-only")
	if c.IsSet("oom-score-adj") {
		v := c.Int("oom-score-adj")
		if v < -1000 || v > 1000 {
			return nil, fmt.Errorf("--oom-score-adj: %d is not in [-1000, 1000]", v)
		}
		cfg.OOMScoreAdj = &v
	}
	if c.IsSet("v") {
		cfg.LogLevel = "info"
		if c.Int("v") >= 4 {
			cfg.LogLevel = "debug"
		}
	}
	for _, a := range []struct {
		addr *string
		port string
	}{{&cfg.HealthzAddress, "healthz-port"}, {&cfg.MetricsAddress, "metrics-port"}} {
		*a.addr = withPort(*a.addr, c.Int(a.port))
	}
	name := "--feature-gates"
	if f, ok := fromFile["feature-gates"]; ok {
		name = "--config: " + f
	}
	gates, err := kpconfig.ParseGates(c.StringSlice("feature-gates"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	warnings, err := kpconfig.CheckGates(mode, gates)
	for i, w := range warnings {
		warnings[i] = name + ": " + w
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cfg.FeatureGates = gates
	return warnings, nil
}

// withPort is kube-proxy's address from its deprecated port flags: none
// when port is 0, else addr with port appended when addr is a bare IP.
func withPort(addr string, port int) string {
	if port == 0 {
		return ""
	}
	if a, err := netip.ParseAddr(addr); err == nil {
		return net.JoinHostPort(a.String(), strconv.Itoa(port))
	}
	return addr
}
