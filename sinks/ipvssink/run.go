package ipvssink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/source/file"
	"github.com/proxysinks/proxysinks/client/source/kube"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/conntrack"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/link"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
)

// Controller is what a sink binary plugs in: it consumes snapshots and
// repairs drift on resync.
type Controller interface {
	Snapshot(s *client.Snapshot)
	Resync() dataplane.SyncStats
}

// Deps is what a controller is built from.
type Deps struct {
	Render  render.Config
	Applier *dataplane.Applier
	// Reader reads the kernel's state (nil in a dry run).
	Reader interface {
		Read() (*dataplane.State, error)
	}
	Log    *slog.Logger
	OnSync func(dataplane.SyncStats)
}

// NewController builds a sink's controller.
type NewController func(Deps) Controller

// Logger returns the logger the flags ask for, writing to w.
func (c Config) Logger(w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(c.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// source is a file or kube source.
type source interface {
	Run(ctx context.Context, deliver func(*client.Snapshot)) error
}

func (c Config) source(log *slog.Logger) (source, error) {
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

func (c Config) families(addrs []netip.Addr) []rules.Family {
	fams := []rules.Family{rules.IPv4}
	for _, a := range addrs {
		if a.Is6() {
			return append(fams, rules.IPv6)
		}
	}
	return fams
}

func (c Config) nodeConfig(addrs []netip.Addr) dataplane.NodeConfig {
	fams := c.families(addrs)
	return dataplane.NodeConfig{
		Families: fams, Dummy: link.DefaultDummy, Scheduler: c.Scheduler,
		Rules:     rules.Config{MasqueradeBit: c.MasqueradeBit, MasqueradeAll: c.MasqueradeAll, ClusterCIDRs: c.ClusterCIDRs, RandomFully: true},
		StrictARP: c.StrictARP, TCPTimeout: c.TCPTimeout, TCPFinTimeout: c.TCPFinTimeout, UDPTimeout: c.UDPTimeout,
		NodeAddresses: addrs, ExcludeCIDRs: c.ExcludeCIDRs,
	}
}

// Run runs a sink until ctx ends: mode is what /proxyMode answers.
func Run(ctx context.Context, c Config, mode string, newCtl NewController, stdout io.Writer, log *slog.Logger) error {
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
	if c.DryRun {
		return dryRun(ctx, c, src, newCtl, stdout, log)
	}

	ipvsConn, err := ipvs.Dial(nil)
	if err != nil {
		return err
	}
	defer ipvsConn.Close()
	ipsetConn, err := ipset.Dial(nil)
	if err != nil {
		return err
	}
	defer ipsetConn.Close()
	links, err := link.Dial(nil)
	if err != nil {
		return err
	}
	defer links.Close()

	addrs := c.NodeAddresses
	if len(addrs) == 0 {
		if addrs, err = links.NodeAddresses(link.DefaultDummy); err != nil {
			return fmt.Errorf("list node addresses: %w", err)
		}
	}
	addrs = c.nodePortFilter(addrs)
	k := &dataplane.Kernel{IPVSConn: ipvsConn, IPSet: ipsetConn, Link: links, Dummy: link.DefaultDummy}
	node := &dataplane.Node{Cfg: c.nodeConfig(addrs), Kernel: k, Log: log}
	if err := node.Setup(); err != nil {
		return err
	}
	if w := bridgeWarning("/proc/sys"); w != "" {
		log.Warn(w)
	}
	log.Info("node ready", "node", c.NodeName, "nodeport-addresses", addrs, "scheduler", c.Scheduler)

	metrics := httpserve.NewMetrics()
	health := httpserve.NewHealth(2*c.SyncPeriod + 30*time.Second)
	if err := httpserve.Serve(ctx, c.MetricsAddress, httpserve.Handler(metrics, health, mode), log); err != nil {
		return err
	}
	if err := httpserve.Serve(ctx, c.HealthzAddress, httpserve.HealthHandler(health), log); err != nil {
		return err
	}
	syscalls := func() uint64 {
		a, b := ipvsConn.Counters(), ipsetConn.Stats()
		return a.Sendmsg + a.Recvmsg + b.Sendmsg + b.Recvmsg
	}
	lastCalls := syscalls()
	var delivered time.Time
	var triggers []time.Time // of the changes handed to the controller, not yet programmed
	onSync := func(st dataplane.SyncStats) {
		now := syscalls()
		metrics.SyncSyscalls.Set(float64(now - lastCalls))
		metrics.Syscalls.Add(float64(now - lastCalls))
		lastCalls = now
		metrics.SyncDuration.Observe(st.Duration.Seconds())
		metrics.KernelOps.Add(float64(st.Writes))
		metrics.SyncKernelOps.Set(float64(st.Writes))
		metrics.FailedObjects.Set(float64(st.Failed))
		metrics.NoLocalEndpoints.WithLabelValues("local").Set(float64(st.NoLocalEndpoints))
		if st.Err == nil {
			// Programmed: kube-proxy's latency from each change's trigger
			// time, and ours from the snapshot's delivery. After a failed
			// sync they wait for the sync that programs them.
			for _, t := range triggers {
				metrics.ProgrammingDuration.Observe(time.Since(t).Seconds())
			}
			triggers = triggers[:0]
			if !delivered.IsZero() {
				metrics.SnapshotProgramming.Observe(time.Since(delivered).Seconds())
				delivered = time.Time{}
			}
		}
		if st.Err != nil {
			metrics.SyncErrors.Inc()
		} else {
			metrics.LastSync.SetToCurrentTime()
		}
		health.Record(st.Err)
	}
	applier := dataplane.NewApplier(k)
	if ct, err := conntrack.Dial(nil); err != nil {
		log.Warn("no conntrack: stale UDP flows of removed endpoints will not be flushed", "error", err)
	} else {
		defer ct.Close()
		applier.Conntrack = ct
	}
	ctl := newCtl(Deps{
		Render:  render.Config{Scheduler: c.Scheduler, Weight: c.Weight, NodeAddresses: addrs},
		Applier: applier, Reader: node, Log: log, OnSync: onSync,
	})

	snapshots := make(chan pending, 1)
	srcErr := make(chan error, 1)
	go func() {
		srcErr <- src.Run(ctx, func(s *client.Snapshot) {
			p := pending{s: s, triggers: triggerTimes(nil, s)}
			// Keep only the newest snapshot: a slow sync skips stale ones,
			// but the trigger times of their changes still count.
			select {
			case old := <-snapshots:
				p.triggers = append(old.triggers, p.triggers...)
			default:
			}
			snapshots <- p
		})
	}()
	tick := time.NewTicker(c.SyncPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-srcErr:
			if err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("source stopped: %w", err)
			}
			return nil
		case p := <-snapshots:
			delivered = time.Now()
			triggers = append(triggers, p.triggers...)
			if n := len(triggers) - maxPendingTriggers; n > 0 {
				// Syncs keep failing: keep the newest, bounded.
				triggers = append(triggers[:0], triggers[n:]...)
			}
			ctl.Snapshot(p.s)
		case <-tick.C:
			ctl.Resync()
		}
	}
}

// dryRun renders the first snapshot and prints the kernel operations it
// would make on an empty node.
func dryRun(ctx context.Context, c Config, src source, newCtl NewController, stdout io.Writer, log *slog.Logger) error {
	addrs := c.NodeAddresses
	if len(addrs) == 0 {
		if l, err := link.Dial(nil); err == nil {
			addrs, _ = l.NodeAddresses(link.DefaultDummy)
			l.Close()
		}
	}
	addrs = c.nodePortFilter(addrs)
	var last error
	ctl := newCtl(Deps{
		Render:  render.Config{Scheduler: c.Scheduler, Weight: c.Weight, NodeAddresses: addrs},
		Applier: dryRunApplier(stdout), Log: log,
		OnSync: func(st dataplane.SyncStats) { last = st.Err },
	})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	err := src.Run(ctx, func(s *client.Snapshot) {
		select {
		case <-done:
			return
		default:
		}
		ctl.Snapshot(s)
		close(done)
		cancel()
	})
	select {
	case <-done:
		return last
	default:
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return errors.New("dry run: the source delivered no snapshot")
}

func dryRunApplier(out io.Writer) *dataplane.Applier {
	a := dataplane.NewApplier(dataplane.DryRun{Out: out})
	a.Ordered = true
	return a
}

// maxPendingTriggers bounds the trigger times kept while syncs fail.
const maxPendingTriggers = 10000

// pending is a snapshot on its way to the controller, with the trigger
// times of its changes and of the changes of the snapshots it replaced.
type pending struct {
	s        *client.Snapshot
	triggers []time.Time
}

// triggerTimes appends the known trigger times of s's changes to ts.
func triggerTimes(ts []time.Time, s *client.Snapshot) []time.Time {
	for _, c := range s.Changes {
		if !c.TriggerTime.IsZero() {
			ts = append(ts, c.TriggerTime)
		}
	}
	return ts
}
