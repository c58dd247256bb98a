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
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/source/file"
	"github.com/proxysinks/proxysinks/client/source/kube"
	"github.com/proxysinks/proxysinks/host/conntrack"
	"github.com/proxysinks/proxysinks/netlinkraw/link"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/version"
	"github.com/urfave/cli/v2"
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
	// NodeAddresses are the node's addresses that serve NodePorts (the
	// flags', or the node's, filtered by --nodeport-addresses).
	NodeAddresses []netip.Addr
	Log           *slog.Logger
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
}

// Main runs the command line args of sink, printing to stdout (dry-run
// output) and stderr (logs), until SIGINT or SIGTERM, and returns the exit
// status: 2 for a bad flag, 1 for a failure.
func Main(sink Sink, args []string, stdout, stderr io.Writer) int {
	table := sink.Table()
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
		Action: func(c *cli.Context) error { return action(c, sink, table, stdout, stderr) },
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
	return 0
}

// action is Main's once the flags parsed: --config, the flags' validation
// and classes, then --cleanup or Run.
func action(c *cli.Context, sink Sink, table Table, stdout, stderr io.Writer) error {
	warnings, err := kpconfig.Apply(c, table.Fields, table.notHonoured())
	if err != nil {
		return cli.Exit(sink.Name+": "+err.Error(), 2)
	}
	cfg, more, err := FromContext(c, sink)
	if err != nil {
		return cli.Exit(sink.Name+": "+err.Error(), 2)
	}
	log := cfg.Logger(stderr)
	for _, w := range append(warnings, more...) {
		log.Warn(w)
	}
	if cfg.Cleanup {
		if sink.Cleanup == nil {
			return cli.Exit(sink.Name+": --cleanup: this sink has no cleanup", 2)
		}
		if err := sink.Cleanup(cfg, log); err != nil {
			return cli.Exit(sink.Name+": cleanup: "+err.Error(), 1)
		}
		log.Info("cleanup done")
		return nil
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, cfg, sink, stdout, log); err != nil {
		return cli.Exit(sink.Name+": "+err.Error(), 1)
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
		s, err := kube.NewForConfig(c.Kubeconfig, kube.Config{NodeName: c.NodeName, MinInterval: c.MinSyncPeriod, Logger: log, Needs: needs})
		if err != nil {
			return nil, fmt.Errorf("kubernetes source: %w (give --kubeconfig, run in a pod, or use --from-file)", err)
		}
		return s, nil
	}
}

// nodeAddresses returns the flags' node addresses, or the node's (all but
// those of the links exclude names); in a dry run a failure to list them
// is not one.
func (c Config) nodeAddresses(exclude []string) ([]netip.Addr, error) {
	addrs := c.NodeAddresses
	if len(addrs) == 0 {
		l, err := link.Dial(nil)
		if err != nil {
			if c.DryRun {
				return nil, nil
			}
			return nil, fmt.Errorf("list node addresses: %w", err)
		}
		addrs, err = l.NodeAddresses(exclude...)
		l.Close()
		if err != nil {
			if c.DryRun {
				return nil, nil
			}
			return nil, fmt.Errorf("list node addresses: %w", err)
		}
	}
	return c.NodePortFilter(addrs), nil
}

// Run runs a sink until ctx ends.
func Run(ctx context.Context, c Config, sink Sink, stdout io.Writer, log *slog.Logger) error {
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-name not given and no host name: %w", err)
		}
		c.NodeName = h
	}
	src, err := c.source(sink.Needs, log)
	if err != nil {
		return err
	}
	addrs, err := c.nodeAddresses(sink.ExcludeLinks)
	if err != nil {
		return err
	}
	if c.DryRun {
		return dryRun(ctx, c, addrs, src, sink, stdout, log)
	}
	if err := applyConntrack(c.Conntrack, log); err != nil {
		return fmt.Errorf("could not set conntrack parameters: %w", err)
	}
	r, err := start(ctx, c, sink, src, addrs, log)
	if err != nil {
		return err
	}
	defer r.close()
	return r.loop(ctx)
}

// healthCheckAddresses returns where health-check node ports listen: on
// the node addresses serving NodePorts when --nodeport-addresses narrows
// them, else on every address (kube-proxy's rule).
func (c Config) healthCheckAddresses(nodePortAddrs []netip.Addr) []netip.Addr {
	if len(c.NodePortAddresses) == 0 {
		return nil
	}
	return nodePortAddrs
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
