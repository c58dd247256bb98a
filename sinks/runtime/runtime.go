// Package runtime is the process every sink binary shares: the flags every
// sink has (the seed's and kube-proxy's, each also settable by environment
// variable) and their validation, --config, the source (--from-file or the
// Kubernetes API), the HTTP endpoints (/metrics, /proxyMode, /healthz), the
// hand-off of snapshots to the controller, the periodic resync, metrics,
// signal handling, the dry run and --cleanup. It knows no kernel: a sink
// supplies its controller (Sink.New), its own flags and its classes of
// kube-proxy's flags and configuration fields (Sink.Flags, Sink.Fields,
// applied as one Table), what it needs of the source (Sink.Needs) and the
// links whose addresses are not the node's (Sink.ExcludeLinks). Kernel
// connections and node setup are the controller's (sinks/ipvssink,
// sinks/iptablessink).
package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/source/file"
	"github.com/proxysinks/proxysinks/client/source/kube"
	"github.com/proxysinks/proxysinks/host/conntrack"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/version"
	"github.com/urfave/cli/v2"
	"k8s.io/client-go/rest"
)

// Controller is what a sink plugs in: it consumes snapshots, and repairs
// drift on resync. Both are called from one goroutine.
type Controller interface {
	Snapshot(s *client.Snapshot)
	Resync() SyncStats
}

// SplitResyncer is a Controller whose resync reads the kernel apart from
// its syncs, so that snapshots arriving during the read are applied at
// once (both IPVS sinks): the runtime calls StartResync where it
// would call Resync, runs the read on a goroutine of its own, and calls
// the finish read returned on the loop's goroutine, between snapshots.
type SplitResyncer interface {
	StartResync() (read func() (finish func() SyncStats))
}

// Env is what a controller is built from.
type Env struct {
	Config Config
	// NodePorts is where NodePorts are served at start (the flags', or
	// the node's, addresses selected by --nodeport-addresses); a
	// NodePortsSetter controller gets the later ones.
	NodePorts NodePorts
	Log       *slog.Logger
	// OnSync must be called after every sync (metrics, health).
	OnSync func(SyncStats)
	// DryRun, when not nil, is where a dry run prints the kernel
	// operations; the controller then touches no kernel.
	DryRun io.Writer
	// Registry is where the controller registers metrics of its own
	// (served on /metrics with the runtime's); nil in a dry run.
	Registry prometheus.Registerer
	// MetricsText, when not nil, adds series /metrics serves in the text
	// format (httpserve.Metrics.AddText); nil in a dry run.
	MetricsText func(httpserve.TextSource)
}

// Built is a controller with what the runtime reads from it.
type Built struct {
	Controller Controller
	// Syscalls, when not nil, counts the controller's kernel syscalls so
	// far (metrics).
	Syscalls func() uint64
	// Close, when not nil, releases the controller's connections.
	Close func()
	// Conntrack, when not nil, is the node's conntrack: after the syncs
	// that need it, the runtime deletes stale UDP flows through it, as
	// kube-proxy does (sinks/udpflows).
	Conntrack conntrack.Reconciler
}

// Sink describes a sink binary.
type Sink struct {
	// Name is the binary's name (messages, --help).
	Name string
	// Usage is its one-line description.
	Usage string
	// Mode is what /proxyMode answers, and the KubeProxyConfiguration mode
	// the sink takes.
	Mode string
	// New builds the controller.
	New func(Env) (Built, error)
	// Cleanup, when not nil, removes every kernel object the sink owns
	// (--cleanup); without it --cleanup is refused.
	Cleanup func(Config, *slog.Logger) error
	// Flags, when not nil, returns the sink's flags beside the runtime's:
	// its own (Honoured; Parse reads them) and every other sink's flag
	// (Ignored or Refused), so that no flag of a sink binary is accepted
	// silently by another. Each call returns new flags (a parse sets them).
	Flags func() []Flag
	// Parse, when not nil, reads and validates the sink's own flags (after
	// the runtime's); its result is Config.SinkConfig.
	Parse func(*cli.Context) (any, error)
	// Fields class the KubeProxyConfiguration fields of the sink's mode and
	// of the other modes (kpconfig.Table adds those every sink shares).
	Fields []kpconfig.Field
	// ExcludeLinks names the links whose addresses are not node addresses
	// (the IPVS sinks' kube-ipvs0, which holds the services' addresses).
	ExcludeLinks []string
	// Needs are the optional kinds and fields the sink asks its source
	// for.
	Needs client.Needs
	// Metrics, when not nil, registers in reg, and adds through text, the
	// metrics the sink's controller exports, through the constructors New
	// uses but with readers that touch no kernel (each series's value is
	// meaningless): the reference lists them (Sink.MetricFamilies).
	Metrics func(reg prometheus.Registerer, text func(httpserve.TextSource)) error
}

// Main runs the command line args of sink, printing to stdout (dry-run
// output) and stderr (logs), until SIGINT or SIGTERM, and returns the exit
// status: 2 for a bad flag, 1 for a failure.
//
// With --config, the flags the file replaces (Flag.File) are dropped, as
// kube-proxy ignores them then: the arguments are parsed again without them
// (and without their environment variables), and each is logged once.
func Main(sink Sink, args []string, stdout, stderr io.Writer) int {
	return runMain(sink, args, stdout, stderr, nil)
}

// runMain is Main once the flags dropped for --config are known (nil: not
// yet looked for).
func runMain(sink Sink, args []string, stdout, stderr io.Writer, dropped []Flag) int {
	table := sink.Table()
	for _, d := range dropped {
		if f, ok := table.lookup(d.Name()); ok {
			unbindEnv(f.Flag)
		}
	}
	var again []Flag
	app := &cli.App{
		Name:           sink.Name,
		Usage:          sink.Usage,
		Flags:          table.cliFlags(),
		Version:        version.Get().String(),
		Writer:         stdout,
		ErrWriter:      stderr,
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return cli.Exit(sink.Name+": "+err.Error(), 2)
		},
		Action: func(c *cli.Context) error {
			if dropped == nil {
				if again = table.droppedByConfig(c); len(again) > 0 {
					return nil
				}
			}
			return action(c, sink, table, dropped, stdout, stderr)
		},
	}
	if err := app.RunContext(context.Background(), args); err != nil {
		fmt.Fprintln(stderr, err)
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			return ec.ExitCode()
		}
		// Errors before the action are the flags' (a value that does not
		// parse, an unknown flag).
		return 2
	}
	if len(again) > 0 {
		return runMain(sink, table.withoutFlags(args, again), stdout, stderr, again)
	}
	return 0
}

func init() {
	// kube-proxy's -v is its verbosity: --version has no short name.
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version"}
}

// action is Main's once the flags parsed: --config, the flags' validation
// and classes, then --cleanup, --init-only or Run. dropped are the flags
// --config replaced.
func action(c *cli.Context, sink Sink, table Table, dropped []Flag, stdout, stderr io.Writer) error {
	var warnings []string
	for _, d := range dropped {
		warnings = append(warnings, fmt.Sprintf("--%s ignored: --config is given, and kube-proxy then takes %s from the file", d.Name(), d.File))
	}
	applied, more, err := kpconfig.Apply(c, table.Fields, table.notHonoured())
	warnings = append(warnings, more...)
	if err != nil {
		return cli.Exit(sink.Name+": "+err.Error(), 2)
	}
	fromFile := map[string]string{}
	for _, s := range applied {
		fromFile[s.Flag] = s.Field
	}
	cfg, more, err := FromContext(c, sink, fromFile)
	if err != nil {
		return cli.Exit(sink.Name+": "+err.Error(), 2)
	}
	log := cfg.Logger(stderr)
	for _, w := range append(warnings, more...) {
		log.Warn(w)
	}
	if cfg.OOMScoreAdj != nil && !cfg.DryRun {
		// As kube-proxy: a failure (no CAP_SYS_RESOURCE to lower it) is
		// logged, not fatal.
		if err := setOOMScoreAdj(OOMScoreAdjFile, *cfg.OOMScoreAdj); err != nil {
			log.Warn("--oom-score-adj not applied", "error", err)
		}
	}
	switch {
	case cfg.Cleanup:
		if sink.Cleanup == nil {
			return cli.Exit(sink.Name+": --cleanup: this sink has no cleanup", 2)
		}
		if err := sink.Cleanup(cfg, log); err != nil {
			return cli.Exit(sink.Name+": cleanup: "+err.Error(), 1)
		}
		log.Info("cleanup done")
		return nil
	case cfg.InitOnly:
		log.Info("--init-only: the configuration is valid; the sink sets up the node when it starts")
		return nil
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, cfg, sink, stdout, log); err != nil {
		return cli.Exit(sink.Name+": "+err.Error(), 1)
	}
	return nil
}

// OOMScoreAdjFile is where --oom-score-adj is written.
var OOMScoreAdjFile = "/proc/self/oom_score_adj"

// setOOMScoreAdj writes v to path (a process's oom_score_adj).
func setOOMScoreAdj(path string, v int) error {
	if err := os.WriteFile(path, []byte(strconv.Itoa(v)), 0); err != nil {
		return fmt.Errorf("write %d to %s: %w", v, path, err)
	}
	return nil
}

// Logger returns the logger the flags ask for, writing to w.
func (c Config) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevels[c.LogLevel]}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// source returns the source the flags name, asked for needs.
func (c Config) source(needs client.Needs, log *slog.Logger) (client.Source, error) {
	switch {
	case c.FromFile != "":
		if _, err := os.Stat(c.FromFile); err != nil {
			return nil, fmt.Errorf("--from-file: %w", err)
		}
		return file.New(file.Config{Path: c.FromFile, NodeName: c.NodeName, MinInterval: c.MinSyncPeriod, Logger: log, Needs: needs}), nil
	default:
		rc, err := apiConfig(c.Kubeconfig, c.Master)
		if err != nil {
			return nil, fmt.Errorf("kubernetes source: %w (give --kubeconfig, run in a pod, or use --from-file)", err)
		}
		api, err := kube.NewAPI(rc)
		if err != nil {
			return nil, fmt.Errorf("kubernetes source: %w", err)
		}
		return kube.New(api, kube.Config{NodeName: c.NodeName, MinInterval: c.MinSyncPeriod, Logger: log, Needs: needs}), nil
	}
}

// apiConfig returns the API client configuration of the kubeconfig file
// (in-cluster when empty) with master, when set, as the API server's URL
// (kube-proxy's --master).
func apiConfig(kubeconfig, master string) (*rest.Config, error) {
	rc, err := kube.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	if master != "" {
		rc.Host = master
	}
	return rc, nil
}

// Run runs a sink until ctx ends.
func Run(ctx context.Context, c Config, sink Sink, stdout io.Writer, log *slog.Logger) error {
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-name not given and no host name: %w", err)
		}
		c.NodeName = strings.ToLower(strings.TrimSpace(h))
	}
	needs := sink.Needs
	// primary follows the Node's addresses; NodeCIDR reads the Node's pod
	// CIDRs (--detect-local-mode).
	needs.Node = needs.Node || c.NodePortPrimary || c.DetectLocalMode == xtables.LocalNodeCIDR
	src, err := c.source(needs, log)
	if err != nil {
		return err
	}
	nodes, err := startNodeAddrs(c, sink.ExcludeLinks, !c.DryRun)
	if err != nil {
		return err
	}
	defer nodes.close()
	if c.DryRun {
		return dryRun(ctx, c, nodes, src, sink, stdout, log)
	}
	if err := applyConntrack(c.Conntrack, log); err != nil {
		return fmt.Errorf("could not set conntrack parameters: %w", err)
	}
	r, err := start(ctx, c, sink, src, nodes, log)
	if err != nil {
		return err
	}
	defer r.close()
	return r.loop(ctx)
}

// ipv6Supported reports whether this host can open IPv6 sockets.
func ipv6Supported() bool {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
