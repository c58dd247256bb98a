package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/source/kube"
	"github.com/proxysinks/proxysinks/sinks/healthcheck"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
	"github.com/proxysinks/proxysinks/sinks/udpflows"
)

// running is a sink past its start: its controller, source and servers.
type running struct {
	c        Config
	log      *slog.Logger
	src      client.Source
	ctl      Controller
	health   *healthcheck.ProxyHealth
	services *healthcheck.ServiceServer
	syncs    *syncRecorder
	closers  []func()
	// nodes selects where NodePorts are served; last is the snapshot
	// last handed to the controller (handed again when it changes).
	nodes *nodeAddrs
	last  *client.Snapshot
}

// component is the source of the runtime's Events.
const component = "proxysinks"

// start builds what a running sink serves and its controller, and starts
// the HTTP servers.
func start(ctx context.Context, c Config, sink Sink, src client.Source, nodes *nodeAddrs, log *slog.Logger) (*running, error) {
	metrics, quarantined := newMetrics(prometheus.NewRegistry(), src.Stats, log)
	health := newHealth(c, src)
	handler := httpserve.Handler(metrics, health, sink.Mode)
	r := &running{c: c, log: log, src: src, health: health, syncs: &syncRecorder{metrics: metrics, health: health, quarantine: quarantined, changes: &changeCounter{m: metrics}}, nodes: nodes}
	if ks, ok := src.(*kube.Source); ok {
		// Events on the Services whose objects the kernel refuses.
		ev := newKubeEvents(ks.API(), component, c.NodeName)
		quarantined.events = ev
		r.closers = append(r.closers, ev.close)
	}
	r.services = healthcheck.NewServiceServer(healthcheck.ServiceConfig{
		IPv4: true, IPv6: ipv6Supported(), Addresses: nodes.healthCheckAddresses(), Health: health, Log: log})
	r.closers = append(r.closers, r.services.Close)
	b, err := sink.New(Env{Config: c, NodePorts: nodes.cur, Log: log, OnSync: r.syncs.synced, Registry: metrics.Registry, MetricsText: metrics.AddText})
	if err != nil {
		r.close()
		return nil, err
	}
	r.ctl = b.Controller
	if b.Close != nil {
		r.closers = append(r.closers, b.Close)
	}
	if b.Conntrack != nil {
		if r.syncs.flows, err = udpflows.New(b.Conntrack, metrics.Registry, log); err != nil {
			r.close()
			return nil, err
		}
	}
	r.syncs.countSyscalls(b.Syscalls)
	log.Info("node ready", "node", c.NodeName, "nodeport-addresses", nodes.cur.Addrs, "mode", sink.Mode)
	if err := httpserve.Serve(ctx, c.MetricsAddress, handler, log); err != nil {
		r.close()
		return nil, err
	}
	if err := httpserve.Serve(ctx, c.HealthzAddress, httpserve.HealthHandler(metrics, health), log); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// newHealth returns kube-proxy's health: unhealthy when a change has
// waited twice the sync period without a successful sync; /healthz also
// fails on a Node being deleted or tainted for deletion (kube source
// only), and reports the source's staleness.
func newHealth(c Config, src client.Source) *healthcheck.ProxyHealth {
	var nodeState func() healthcheck.NodeState
	if ks, ok := src.(*kube.Source); ok {
		nodeState = func() healthcheck.NodeState {
			st := ks.NodeStatus()
			return healthcheck.NodeState{Known: st.Known, Deleting: st.Deleting, ToBeDeleted: st.ToBeDeleted}
		}
	}
	health := healthcheck.NewProxyHealth(2*c.SyncPeriod, nodeState)
	health.SetSource(func() (bool, string) { st := src.Stats(); return st.Stale, st.StaleReason })
	return health
}

// close releases what start opened, the last first.
func (r *running) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// loop hands the source's snapshots to the controller and runs the
// periodic resync until ctx ends or the source stops.
func (r *running) loop(ctx context.Context) error {
	h := newHandoff()
	srcErr := make(chan error, 1)
	go func() {
		srcErr <- r.src.Run(ctx, func(s *client.Snapshot) {
			r.health.Queued()
			r.syncs.changes.queued(s)
			h.put(s)
		})
	}()
	resync := newResyncSchedule(r.c.SyncPeriod)
	defer resync.stop()
	// retry retries the objects the kernel refused, alone, when the
	// first is due (a Retrier).
	retry := newRetryTimer()
	defer retry.stop()
	retrier, _ := r.ctl.(Retrier)
	watch := newStaleWatch(r.src.Stats, r.log)
	watchTick := time.NewTicker(StaleCheckInterval)
	defer watchTick.Stop()
	// resyncRead delivers the finish of a split resync whose read runs;
	// nil when none does.
	var resyncRead chan func() SyncStats
	addrs := make(chan []netip.Addr, 1)
	go r.nodes.follow(ctx, addrs, r.log)
	for {
		if retrier != nil {
			retry.arm(r.syncs.quarantine.nextRetry())
		}
		select {
		case <-retry.C():
			retry.fired()
			retrier.Retry()
		case a := <-addrs:
			r.nodes.setLocal(a)
			r.nodePortsChanged(resyncRead != nil, true)
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
			r.syncs.handedOver(p)
			r.syncs.quarantine.snapshot(p.s)
			r.nodes.setNode(p.s.Node)
			r.nodePortsChanged(resyncRead != nil, false)
			r.last = p.s
			r.ctl.Snapshot(p.s)
			resync.synced()
			// Errors are logged by the server, and retried at every
			// snapshot.
			_ = r.services.Sync(p.s)
		case <-resync.C():
			if resyncRead == nil {
				resyncRead = r.resync(resync)
			}
		case finish := <-resyncRead:
			resyncRead = nil
			finish()
			resync.resynced()
			r.nodePortsChanged(false, true)
		}
	}
}

// resync runs the controller's resync. For a SplitResyncer it starts the
// read on a goroutine and returns where its finish will be delivered;
// else it resyncs at once and returns nil.
func (r *running) resync(schedule *resyncSchedule) chan func() SyncStats {
	sr, split := r.ctl.(SplitResyncer)
	if !split {
		r.ctl.Resync()
		schedule.resynced()
		return nil
	}
	read := sr.StartResync()
	ch := make(chan func() SyncStats, 1)
	go func() { ch <- read() }()
	return ch
}

// maxPendingTriggers bounds the trigger times kept while syncs fail.
const maxPendingTriggers = 10000

// syncRecorder turns the controller's syncs into metrics and health.
type syncRecorder struct {
	metrics   *httpserve.Metrics
	health    *healthcheck.ProxyHealth
	flows     *udpflows.Reconciler // nil: no conntrack reconcile
	changes   *changeCounter
	noLocal   noLocalCounter
	syscalls  func() uint64
	lastCalls uint64
	// delivered is when the snapshot not programmed yet was handed over.
	delivered time.Time
	// triggers are the trigger times of the changes handed to the
	// controller, not yet programmed.
	triggers []time.Time
	// quarantine reports the objects the kernel refused alone.
	quarantine *quarantineReport
}

// countSyscalls makes every sync report the syscalls syscalls counted
// since the last (none when nil).
func (s *syncRecorder) countSyscalls(syscalls func() uint64) {
	if syscalls != nil {
		s.syscalls = syscalls
		s.lastCalls = syscalls()
	}
}

// handedOver records a snapshot handed to the controller.
func (s *syncRecorder) handedOver(p pending) {
	if s.flows != nil {
		s.flows.HandedOver(p.s)
	}
	s.changes.handedOver()
	s.noLocal.handedOver(p.s)
	s.delivered = time.Now()
	s.triggers = append(s.triggers, p.triggers...)
	if n := len(s.triggers) - maxPendingTriggers; n > 0 {
		// Syncs keep failing: keep the newest, bounded.
		s.triggers = append(s.triggers[:0], s.triggers[n:]...)
	}
}

// synced records a sync (Env.OnSync).
func (s *syncRecorder) synced(st SyncStats) {
	m := s.metrics
	if s.syscalls != nil {
		now := s.syscalls()
		m.SyncSyscalls.Set(float64(now - s.lastCalls))
		m.Syscalls.Add(float64(now - s.lastCalls))
		s.lastCalls = now
	}
	m.ObserveSync(st.Duration)
	m.KernelOps.Add(float64(st.Writes))
	m.SyncKernelOps.Set(float64(st.Writes))
	m.FailedObjects.Set(float64(st.Failed))
	m.SetNoLocalEndpoints(s.noLocal.internal, s.noLocal.external)
	if s.quarantine != nil {
		s.quarantine.report(st)
	}
	if s.flows != nil {
		s.flows.Synced(st.Err == nil)
	}
	if st.Err != nil {
		m.SyncErrors.Inc()
		// Not programmed: the state waits for a sync that succeeds.
		s.health.Queued()
		return
	}
	// Programmed: kube-proxy's latency from each change's trigger time,
	// and ours from the snapshot's delivery. After a failed sync they wait
	// for the sync that programs them. They end where the sync ended, not
	// at this call: what the controller did since (its log line) is not
	// programming.
	programmed := programmedAt(st, time.Now())
	for _, t := range s.triggers {
		m.ObserveProgramming(programmed.Sub(t))
	}
	s.triggers = s.triggers[:0]
	if !s.delivered.IsZero() {
		m.SnapshotProgramming.Observe(programmed.Sub(s.delivered).Seconds())
		s.delivered = time.Time{}
	}
	m.Synced()
	s.health.Updated()
}
