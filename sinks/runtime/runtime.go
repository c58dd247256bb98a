// Package runtime is the process every sink binary shares: the flags (the
// seed's and kube-proxy's, each also settable by environment variable) and
// their validation, the source (--from-file or the Kubernetes API), the
// HTTP endpoints (/metrics, /proxyMode, /healthz), the hand-off of snapshots
// to the controller, the periodic resync, metrics, signal handling and the
// dry run. A sink supplies only its controller, through Sink.New; kernel
// connections and node setup are the controller's (sinks/ipvssink for the
// IPVS sinks).
package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/source/file"
	"github.com/proxysinks/proxysinks/client/source/kube"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/netlinkraw/link"
	"github.com/proxysinks/proxysinks/sinks/healthcheck"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/version"
	"github.com/urfave/cli/v2"
)

// Controller is what a sink plugs in: it consumes snapshots, and repairs
// drift on resync. Both are called from one goroutine.
type Controller interface {
	Snapshot(s *client.Snapshot)
	Resync() dataplane.SyncStats
}

// SplitResyncer is a Controller whose resync reads the kernel apart from
// its syncs, so that snapshots arriving during the read are applied at
// once (both IPVS sinks): the runtime calls StartResync where it
// would call Resync, runs the read on a goroutine of its own, and calls
// the finish read returned on the loop's goroutine, between snapshots.
type SplitResyncer interface {
	StartResync() (read func() (finish func() dataplane.SyncStats))
}

// Env is what a controller is built from.
type Env struct {
	Config Config
	// NodeAddresses are the node's addresses that serve NodePorts (the
	// flags', or the node's, filtered by --nodeport-addresses).
	NodeAddresses []netip.Addr
	Log           *slog.Logger
	// OnSync must be called after every sync (metrics, health).
	OnSync func(dataplane.SyncStats)
	// DryRun, when not nil, is where a dry run prints the kernel
	// operations; the controller then touches no kernel.
	DryRun io.Writer
	// Handler is the metrics address's handler (/metrics, /proxyMode,
	// /healthz); nil in a dry run.
	Handler http.Handler
	// Registry is where the controller registers metrics of its own
	// (served on /metrics with the runtime's); nil in a dry run.
	Registry prometheus.Registerer
}

// Built is a controller with what the runtime reads from it.
type Built struct {
	Controller Controller
	// Syscalls, when not nil, counts the controller's kernel syscalls so
	// far (metrics).
	Syscalls func() uint64
	// Close, when not nil, releases the controller's connections.
	Close func()
}

// Sink describes a sink binary.
type Sink struct {
	// Name is the binary's name (messages, --help).
	Name string
	// Usage is its one-line description.
	Usage string
	// Mode is what /proxyMode answers.
	Mode string
	// New builds the controller.
	New func(Env) (Built, error)
	// Cleanup, when not nil, removes every kernel object the sink owns
	// (--cleanup); without it --cleanup is refused.
	Cleanup func(Config, *slog.Logger) error
	// Unsupported names flags that do not apply to this sink: giving one
	// (on the command line or in the environment) is refused at start.
	Unsupported []string
}

// flagsFor returns the runtime's flags for sink: those in
// sink.Unsupported are hidden from --help, and still parsed so that giving
// one is refused by name.
func flagsFor(sink Sink) []cli.Flag {
	fs := Flags()
	for _, f := range fs {
		if slices.Contains(sink.Unsupported, f.Names()[0]) {
			hide(f)
		}
	}
	return fs
}

// hide hides a flag of the kinds Flags uses from --help; it reports false
// for another kind.
func hide(f cli.Flag) bool {
	switch f := f.(type) {
	case *cli.StringFlag:
		f.Hidden = true
	case *cli.BoolFlag:
		f.Hidden = true
	case *cli.DurationFlag:
		f.Hidden = true
	case *cli.IntFlag:
		f.Hidden = true
	case *cli.Int64Flag:
		f.Hidden = true
	case *cli.StringSliceFlag:
		f.Hidden = true
	default:
		return false
	}
	return true
}

// Main runs the command line args of sink, printing to stdout (dry-run
// output) and stderr (logs), until SIGINT or SIGTERM, and returns the exit
// status: 2 for a bad flag, 1 for a failure.
func Main(sink Sink, args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:           sink.Name,
		Usage:          sink.Usage,
		Flags:          flagsFor(sink),
		Version:        version.Get().String(),
		Writer:         stdout,
		ErrWriter:      stderr,
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return cli.Exit(sink.Name+": "+err.Error(), 2)
		},
		Action: func(c *cli.Context) error {
			warnings, err := kpconfig.Apply(c, sink.Mode, sink.Unsupported)
			if err != nil {
				return cli.Exit(sink.Name+": "+err.Error(), 2)
			}
			cfg, err := FromContext(c)
			if err != nil {
				return cli.Exit(sink.Name+": "+err.Error(), 2)
			}
			for _, name := range sink.Unsupported {
				if c.IsSet(name) {
					return cli.Exit(fmt.Sprintf("%s: --%s: does not apply to proxy mode %q; remove it", sink.Name, name, sink.Mode), 2)
				}
			}
			log := cfg.Logger(stderr)
			for _, w := range warnings {
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
	return 0
}

// Logger returns the logger the flags ask for, writing to w.
func (c Config) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: logLevels[c.LogLevel]}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func (c Config) source(log *slog.Logger) (client.Source, error) {
	switch {
	case c.FromFile != "":
		if _, err := os.Stat(c.FromFile); err != nil {
			return nil, fmt.Errorf("--from-file: %w", err)
		}
		return file.New(file.Config{Path: c.FromFile, NodeName: c.NodeName, MinInterval: c.MinSyncPeriod, Logger: log}), nil
	default:
		s, err := kube.NewForConfig(c.Kubeconfig, kube.Config{NodeName: c.NodeName, MinInterval: c.MinSyncPeriod, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("kubernetes source: %w (give --kubeconfig, run in a pod, or use --from-file)", err)
		}
		return s, nil
	}
}

// nodeAddresses returns the flags' node addresses, or the node's (all but
// those of the dummy link); in a dry run a failure to list them is not one.
func (c Config) nodeAddresses() ([]netip.Addr, error) {
	addrs := c.NodeAddresses
	if len(addrs) == 0 {
		l, err := link.Dial(nil)
		if err != nil {
			if c.DryRun {
				return nil, nil
			}
			return nil, fmt.Errorf("list node addresses: %w", err)
		}
		addrs, err = l.NodeAddresses(link.DefaultDummy)
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
	src, err := c.source(log)
	if err != nil {
		return err
	}
	addrs, err := c.nodeAddresses()
	if err != nil {
		return err
	}
	if c.DryRun {
		return dryRun(ctx, c, addrs, src, sink, stdout, log)
	}

	metrics := httpserve.NewMetrics()
	metrics.WatchSource(src.Stats)
	// kube-proxy's health: unhealthy when a change has waited twice the
	// sync period without a successful sync; /healthz also fails on a Node
	// being deleted or tainted for deletion (kube source only).
	var nodeState func() healthcheck.NodeState
	if ks, ok := src.(*kube.Source); ok {
		nodeState = func() healthcheck.NodeState {
			st := ks.NodeStatus()
			return healthcheck.NodeState{Known: st.Known, Deleting: st.Deleting, ToBeDeleted: st.ToBeDeleted}
		}
	}
	health := healthcheck.NewProxyHealth(2*c.SyncPeriod, nodeState)
	health.SetSource(func() (bool, string) { st := src.Stats(); return st.Stale, st.StaleReason })
	handler := httpserve.Handler(metrics, health, sink.Mode)
	services := healthcheck.NewServiceServer(healthcheck.ServiceConfig{
		IPv4: true, IPv6: ipv6Supported(), Addresses: c.healthCheckAddresses(addrs), Health: health, Log: log})
	defer services.Close()
	var syscalls func() uint64
	var lastCalls uint64
	var delivered time.Time
	var triggers []time.Time // of the changes handed to the controller, not yet programmed
	onSync := func(st dataplane.SyncStats) {
		if syscalls != nil {
			now := syscalls()
			metrics.SyncSyscalls.Set(float64(now - lastCalls))
			metrics.Syscalls.Add(float64(now - lastCalls))
			lastCalls = now
		}
		metrics.SyncDuration.Observe(st.Duration.Seconds())
		metrics.KernelOps.Add(float64(st.Writes))
		metrics.SyncKernelOps.Set(float64(st.Writes))
		metrics.FailedObjects.Set(float64(st.Failed))
		metrics.NoLocalEndpoints.WithLabelValues("local").Set(float64(st.NoLocalEndpoints))
		if st.Err == nil {
			// Programmed: kube-proxy's latency from each change's trigger
			// time, and ours from the snapshot's delivery. After a failed
			// sync they wait for the sync that programs them. They end
			// where the sync ended, not at this call: what the controller
			// did since (its log line) is not programming.
			programmed := programmedAt(st, time.Now())
			for _, t := range triggers {
				metrics.ProgrammingDuration.Observe(programmed.Sub(t).Seconds())
			}
			triggers = triggers[:0]
			if !delivered.IsZero() {
				metrics.SnapshotProgramming.Observe(programmed.Sub(delivered).Seconds())
				delivered = time.Time{}
			}
		}
		if st.Err != nil {
			metrics.SyncErrors.Inc()
			// Not programmed: the state waits for a sync that succeeds.
			health.Queued()
		} else {
			metrics.LastSync.SetToCurrentTime()
			health.Updated()
		}
	}
	b, err := sink.New(Env{Config: c, NodeAddresses: addrs, Log: log, OnSync: onSync, Handler: handler, Registry: metrics.Registry})
	if err != nil {
		return err
	}
	if b.Close != nil {
		defer b.Close()
	}
	if b.Syscalls != nil {
		syscalls = b.Syscalls
		lastCalls = syscalls()
	}
	log.Info("node ready", "node", c.NodeName, "nodeport-addresses", addrs, "mode", sink.Mode)
	if err := httpserve.Serve(ctx, c.MetricsAddress, handler, log); err != nil {
		return err
	}
	if err := httpserve.Serve(ctx, c.HealthzAddress, httpserve.HealthHandler(health), log); err != nil {
		return err
	}

	h := newHandoff()
	srcErr := make(chan error, 1)
	go func() {
		srcErr <- src.Run(ctx, func(s *client.Snapshot) {
			health.Queued()
			h.put(s)
		})
	}()
	resync := newResyncSchedule(c.SyncPeriod)
	defer resync.stop()
	watch := newStaleWatch(src.Stats, log)
	watchTick := time.NewTicker(StaleCheckInterval)
	defer watchTick.Stop()
	// resyncRead delivers the finish of a split resync whose read runs;
	// nil when none does.
	var resyncRead chan func() dataplane.SyncStats
	for {
		select {
		case <-watchTick.C:
			watch.check()
		case <-ctx.Done():
			return nil
		case err := <-srcErr:
			if err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("source stopped: %w", err)
			}
			return nil
		case p := <-h.ch:
			delivered = time.Now()
			triggers = append(triggers, p.triggers...)
			if n := len(triggers) - maxPendingTriggers; n > 0 {
				// Syncs keep failing: keep the newest, bounded.
				triggers = append(triggers[:0], triggers[n:]...)
			}
			b.Controller.Snapshot(p.s)
			resync.synced()
			// Errors are logged by the server, and retried at every
			// snapshot.
			_ = services.Sync(p.s)
		case <-resync.C():
			sr, split := b.Controller.(SplitResyncer)
			switch {
			case !split:
				b.Controller.Resync()
				resync.resynced()
			case resyncRead == nil:
				read := sr.StartResync()
				ch := make(chan func() dataplane.SyncStats, 1)
				go func() { ch <- read() }()
				resyncRead = ch
			}
		case finish := <-resyncRead:
			resyncRead = nil
			finish()
			resync.resynced()
		}
	}
}

// dryRun renders the first snapshot and prints the kernel operations it
// would make on an empty node.
//
// A file source is read once (no waiting): the operations of everything
// that could be read are printed, every error of the source is printed to
// stderr, and the dry run fails (naming the first problem) when there is
// any: a file or document that cannot be read (the real sink would not
// take this state as the whole cluster) or an invalid object (skipped).
// The API source is waited for at most DryRunWait. The error lists the
// source's errors, one per line, then the verdict.
func dryRun(ctx context.Context, c Config, addrs []netip.Addr, src client.Source, sink Sink, stdout io.Writer, log *slog.Logger) error {
	var last error
	b, err := sink.New(Env{Config: c, NodeAddresses: addrs, Log: log, DryRun: stdout,
		OnSync: func(st dataplane.SyncStats) { last = st.Err }})
	if err != nil {
		return err
	}
	if b.Close != nil {
		defer b.Close()
	}
	snap, err := firstSnapshot(ctx, src)
	if err != nil {
		return err
	}
	if snap != nil {
		b.Controller.Snapshot(snap)
	}
	st, objErrs := src.Stats(), src.Errors()
	errs := make([]error, 0, len(objErrs)+1)
	for _, e := range objErrs {
		errs = append(errs, e)
	}
	switch {
	case last != nil:
		errs = append(errs, fmt.Errorf("dry run: %w", last))
	case snap == nil:
		errs = append(errs, fmt.Errorf("dry run: the source gave no state within %s: %s", DryRunWait, st.StaleReason))
	case st.Stale:
		errs = append(errs, fmt.Errorf("dry run: the source cannot give a trustworthy state (%s); the sink would keep the kernel as it is: %w", st.StaleReason, ErrStale))
	case len(objErrs) > 0:
		errs = append(errs, fmt.Errorf("dry run: %d invalid objects skipped (listed above; the sink programs the rest)", len(objErrs)))
	default:
		return nil
	}
	// One per line: the source's errors, then the verdict.
	return errors.Join(errs...)
}

// ErrStale is the dry run's error when its source cannot give a state it
// trusts.
var ErrStale = errors.New("source stale")

// DryRunWait bounds the dry run's wait for the API source's first
// snapshot.
var DryRunWait = 30 * time.Second

// firstSnapshot returns the source's state: a file source's Load (what it
// could read, at once), or the first snapshot another source delivers
// within DryRunWait (nil if none).
func firstSnapshot(ctx context.Context, src client.Source) (*client.Snapshot, error) {
	if l, ok := src.(interface {
		Load() (*client.Snapshot, error)
	}); ok {
		// Its errors are the source's Errors(), printed by the caller.
		snap, _ := l.Load()
		return snap, nil
	}
	ctx, cancel := context.WithTimeout(ctx, DryRunWait)
	defer cancel()
	var first *client.Snapshot
	var once sync.Once
	err := src.Run(ctx, func(s *client.Snapshot) {
		once.Do(func() { first = s; cancel() })
	})
	if first == nil && err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	return first, nil
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

// maxPendingTriggers bounds the trigger times kept while syncs fail.
const maxPendingTriggers = 10000

// StaleCheckInterval is how often the running sink reads the source's
// Stats to log when it turns stale or trustworthy again.
var StaleCheckInterval = time.Second

// staleWatch logs the source's staleness when it changes: while the source
// cannot give a state it trusts, the sink keeps the kernel as it is (the
// last good state, or nothing before the first snapshot).
type staleWatch struct {
	stats func() client.Stats
	log   *slog.Logger
	last  string
}

func newStaleWatch(stats func() client.Stats, log *slog.Logger) *staleWatch {
	return &staleWatch{stats: stats, log: log}
}

func (w *staleWatch) check() {
	st := w.stats()
	reason := ""
	if st.Stale {
		reason = st.StaleReason
	}
	if reason == w.last {
		return
	}
	if reason != "" {
		w.log.Warn("source stale: keeping the kernel as it is (the last good state) until the source can be trusted", "reason", reason)
	} else {
		w.log.Info("source trustworthy again", "was", w.last)
	}
	w.last = reason
}

// programmedAt is when a sync programmed the kernel: where it ended
// (Start+Duration), or now for stats without a start.
func programmedAt(st dataplane.SyncStats, now time.Time) time.Time {
	if st.Start.IsZero() {
		return now
	}
	return st.Start.Add(st.Duration)
}
