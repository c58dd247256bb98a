package benchmatrix

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// errTimeout marks a kernel that was not programmed in time.
var errTimeout = errors.New("kernel not programmed in time")

// driver holds one run's state.
type driver struct {
	Config
	wrapDir string
	node    *node
	pr      prober
	p       *proxy
	// probeTime and probes add up the kernel probes of the current cell.
	probeTime time.Duration
	probes    int
	// stall watches the machine during the change cells.
	stall *stallWatch
}

// Run measures every scenario for one proxy. A cell that fails is emitted
// with its error; the run goes on where it can.
func Run(ctx context.Context, cfg Config) error {
	d := &driver{Config: cfg}
	d.wrapDir = cfg.Work + "/wrap"
	if err := os.MkdirAll(d.wrapDir, 0o755); err != nil {
		return err
	}
	if err := writeWrappers(d.wrapDir); err != nil {
		return err
	}
	defer d.teardown()
	if d.needsProxy() {
		if err := d.cells(ctx); err != nil {
			return err
		}
	}
	// Last, so that a proxy slowed past the timeout by strace (kube-proxy
	// under TCG) costs only this cell: one more initial sync under strace.
	if d.Strace != "" && d.runs("strace") {
		d.teardown()
		if err := d.initial(ctx, 0, d.Strace); err != nil {
			d.Logf("%s: strace run: %v", d.Sink.Name, err)
		}
	}
	return nil
}

// cells runs the initial syncs and the selected cells that follow them.
func (d *driver) cells(ctx context.Context) error {
	// Initial syncs: each from an empty kernel in a fresh namespace; the
	// last one's proxy stays for the other scenarios. When they are not
	// selected, one prepares the kernel for the cells that are.
	reps := d.initialReps()
	for rep := range reps {
		if err := d.initial(ctx, rep, ""); err != nil {
			return err
		}
		if rep < reps-1 {
			d.teardown()
		}
	}
	// The steady window: the last initial sync's proxy, at its default
	// resync period, once its first sync completed.
	if _, err := d.wait(ctx, d.synced(ctx)); err != nil {
		return fmt.Errorf("benchmatrix: %s: first sync not completed: %w", d.Sink.Name, err)
	}
	d.probeTime, d.probes = 0, 0
	if d.runs("steady") {
		d.steady(ctx)
	}
	// Restarts and changes with ChangeArgs (the long resync period).
	d.Sink.Args = append(append([]string{}, d.Sink.Args...), d.ChangeArgs...)
	if d.runs("restart") {
		for rep := range d.Reps {
			if err := d.restart(ctx, rep); err != nil {
				return err
			}
		}
	} else if d.relaunchForChanges() {
		if _, err := d.relaunch(ctx); err != nil {
			return fmt.Errorf("benchmatrix: %s: started again for the change cells: %w", d.Sink.Name, err)
		}
		d.probeTime, d.probes = 0, 0
	}
	cells := []struct {
		name string
		reps int
		f    func(context.Context, int)
	}{{"endpoint", d.EndpointReps, d.endpoint}, {"service", d.Reps, d.service}, {"percent", d.Reps, d.onePercent}}
	for _, c := range cells {
		if !d.runs(c.name) {
			continue
		}
		for rep := range c.reps {
			c.f(ctx, rep)
		}
	}
	return nil
}

func (d *driver) teardown() {
	if d.stall != nil {
		d.stall.close()
		d.stall = nil
	}
	if d.p != nil {
		d.p.stop()
		d.p = nil
	}
	if d.pr != nil {
		d.pr.close()
		d.pr = nil
	}
	if d.node != nil {
		d.node.close()
		d.node = nil
	}
}

func (d *driver) sample(sc string, rep int) Sample {
	return Sample{Sink: d.Sink.Name, Kind: d.Sink.Kind, KubeProxy: d.Sink.KubeProxy, Scenario: sc,
		Services: d.Services, Endpoints: d.Endpoints, Rep: rep, KernelOps: -1, NetlinkSyscalls: -1, GCs: -1}
}

// wait polls cond until it holds, the proxy exits or the timeout passes;
// it returns when cond held.
func (d *driver) wait(ctx context.Context, cond func() (bool, error)) (time.Time, error) {
	timeout := d.Timeout
	if d.p.straceOut != "" {
		timeout *= 2 // strace slows a proxy several times (far more under TCG)
	}
	deadline := time.Now().Add(timeout)
	var last error
	for {
		t0 := time.Now()
		ok, err := cond()
		now := time.Now()
		d.probeTime += now.Sub(t0)
		d.probes++
		if ok && err == nil {
			return now, nil
		}
		if err != nil {
			last = err
		}
		if err := d.p.done(); err != nil {
			return now, err
		}
		if now.After(deadline) {
			return now, fmt.Errorf("%w after %s (last probe error: %v)", errTimeout, timeout, last)
		}
		if ctx.Err() != nil {
			return now, ctx.Err()
		}
		// As long as the probe took: the probes take at most half a core.
		time.Sleep(max(2*time.Millisecond, d.ProbeGap, now.Sub(t0)))
	}
}

// proxyCounters is what the proxy's metrics say at one instant; -1 where a
// metric is absent.
type proxyCounters struct {
	ops, calls          float64 // the sinks' kernel operations and netlink calls
	syncs, syncSum      float64 // kubeproxy_sync_proxy_rules_duration_seconds
	programmed, progSum float64 // proxysinks_snapshot_programming_duration_seconds
	started, lastSync   float64 // process_start_time_seconds, kubeproxy_sync_proxy_rules_last_timestamp_seconds
	gcs                 float64 // go_gc_duration_seconds_count
}

// noCounters is a proxy's state at its start: nothing counted yet.
var noCounters = proxyCounters{}

// counters reads the proxy's counters (-1 when absent or unreadable).
func (d *driver) counters(ctx context.Context) proxyCounters {
	c := proxyCounters{-1, -1, -1, -1, -1, -1, -1, -1, -1}
	m, err := d.p.metrics(ctx)
	if err != nil {
		return c
	}
	for name, v := range map[string]*float64{
		"proxysinks_kernel_operations_total":                     &c.ops,
		"proxysinks_netlink_syscalls_total":                      &c.calls,
		"kubeproxy_sync_proxy_rules_duration_seconds_count":      &c.syncs,
		"kubeproxy_sync_proxy_rules_duration_seconds_sum":        &c.syncSum,
		"proxysinks_snapshot_programming_duration_seconds_count": &c.programmed,
		"proxysinks_snapshot_programming_duration_seconds_sum":   &c.progSum,
		"go_gc_duration_seconds_count":                           &c.gcs,
		"process_start_time_seconds":                             &c.started,
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds":      &c.lastSync,
	} {
		if x, ok := m[name]; ok {
			*v = x
		}
	}
	return c
}

// measured is the state of the proxy at one instant.
type measured struct {
	at           time.Time
	u            usage
	restoreBytes int64
	nftBytes     int64
	proxyCounters
}

// measure reads the proxy's state at the instant at (just after it). The
// kernel is programmed before a proxy records the sync that programmed
// it, so when since is given the metrics are read again (up to 3 s) until
// a sync after since's shows.
func (d *driver) measure(ctx context.Context, at time.Time, since *measured) measured {
	u, _ := d.p.usage()
	m := measured{at: at, u: u, proxyCounters: d.counters(ctx)}
	for i := 0; since != nil && m.syncs >= 0 && m.syncs <= since.syncs && i < 30; i++ {
		time.Sleep(100 * time.Millisecond)
		m.proxyCounters = d.counters(ctx)
	}
	// After the metrics: the sink logs a sync before the metrics show it.
	m.restoreBytes, m.nftBytes = d.p.restoreBytes()
	return m
}

// fill sets the sample's interval fields from two measurements.
func fill(s *Sample, a, b measured) {
	s.Seconds = b.at.Sub(a.at).Seconds()
	s.CPUSeconds = (b.u.CPU - a.u.CPU).Seconds()
	s.PeakRSSMB = float64(b.u.HWMKB) / 1024
	s.RestoreBytes = b.restoreBytes - a.restoreBytes
	s.NFTBytes = b.nftBytes - a.nftBytes
	if a.ops >= 0 && b.ops >= 0 {
		s.KernelOps = b.ops - a.ops
	}
	if a.calls >= 0 && b.calls >= 0 {
		s.NetlinkSyscalls = b.calls - a.calls
	}
	if a.syncs >= 0 && b.syncs >= 0 {
		s.Syncs, s.SyncSeconds = b.syncs-a.syncs, b.syncSum-a.syncSum
	}
	if a.programmed >= 0 && b.programmed >= 0 {
		s.Programmed, s.ProgrammedSeconds = b.programmed-a.programmed, b.progSum-a.progSum
	}
	if a.gcs >= 0 && b.gcs >= 0 {
		s.GCs = b.gcs - a.gcs
	}
}

func (d *driver) emit(s Sample, err error) {
	if d.probes > 0 {
		s.ProbeSeconds = d.probeTime.Seconds() / float64(d.probes)
	}
	d.probeTime, d.probes = 0, 0
	if err != nil {
		s.Error = err.Error()
		d.Logf("%s %s rep %d: %v", s.Sink, s.Scenario, s.Rep, err)
	} else {
		d.Logf("%s %dx%d %s rep %d: %.3f s, %.2f CPU-s, %.0f MB, %d restore bytes, %d nf_tables bytes, %d syscalls (%d socket messages), %.0f kernel ops, own sync %.3f s (%.0f)",
			s.Sink, s.Services, s.Endpoints, s.Scenario, s.Rep, s.Seconds, s.CPUSeconds, s.PeakRSSMB, s.RestoreBytes, s.NFTBytes, s.Syscalls, s.MessageSyscalls, s.KernelOps, s.SyncSeconds, s.Syncs)
		if s.StallSeconds > 0 {
			d.Logf("%s %s rep %d: own sync %.2f ms, programmed %.2f ms, longest stall %.2f ms, %.0f GCs",
				s.Sink, s.Scenario, s.Rep, s.SyncSeconds*1e3, s.ProgrammedSeconds*1e3, s.StallSeconds*1e3, s.GCs)
		}
	}
	d.Emit(s)
}

func (d *driver) startProxy(strace string) error {
	p, err := startProxy(d.node, d.Work, d.wrapDir, strace, d.StraceAll, d.Sink.Bin, append([]string{"--kubeconfig=" + d.Sink.Kubeconfig}, d.Sink.Args...)...)
	if err != nil {
		return err
	}
	p.familyCopies = !d.Sink.KubeProxy
	d.p = p
	return nil
}

// initial measures one initial sync from an empty kernel.
func (d *driver) initial(ctx context.Context, rep int, strace string) error {
	sc := ScInitial
	if strace != "" {
		sc = ScInitialStrace
	}
	s := d.sample(sc, rep)
	n, err := newNode(d.APITarget)
	if err != nil {
		return err
	}
	d.node = n
	if d.pr, err = newProber(d.Sink.Kind, n); err != nil {
		return err
	}
	if err := d.startProxy(strace); err != nil {
		return err
	}
	start := measured{at: d.p.start, proxyCounters: noCounters}
	poll := 0
	end, err := d.wait(ctx, func() (bool, error) {
		// The full check reads the whole state: at most every 500 ms.
		if poll++; poll > 1 {
			time.Sleep(500 * time.Millisecond)
		}
		return d.pr.full(d.Services, d.Endpoints)
	})
	timedOut := errors.Is(err, errTimeout)
	if err == nil {
		m := d.measure(ctx, end, &start)
		fill(&s, start, m)
		if m.started > 0 && m.lastSync > m.started {
			s.SelfSeconds = m.lastSync - m.started
		}
	}
	if err == nil && strace == "" && rep == 0 {
		// Where the time went, in the proxy's words (the run's log only).
		d.Logf("%s %dx%d: proxy log at the first initial sync's end:\n%s", d.Sink.Name, d.Services, d.Endpoints, tail(d.p.log.String(), 15))
	}
	if timedOut {
		s.Seconds = end.Sub(d.p.start).Seconds() // a lower bound
		d.Logf("%s: kernel state at the timeout:\n%s\nproxy log tail:\n%s", d.Sink.Name, d.pr.dump(), tail(d.p.log.String(), 30))
	}
	if strace != "" && (err == nil || timedOut) {
		// At a timeout, what strace counted until then: lower bounds.
		c, serr := d.p.stop()
		d.p = nil
		s.Syscalls, s.MessageSyscalls = c.total, c.messages
		if err == nil {
			err = serr
		} else if serr != nil {
			d.Logf("%s: strace counts at the timeout: %v", d.Sink.Name, serr)
		}
	}
	if strace == "" && !d.runs("initial") {
		// The cells selected need it, but it is not one of them: no
		// sample (it would replace the initial syncs measured with
		// the other proxies of the group in an earlier run).
		d.probeTime, d.probes = 0, 0
		if err == nil {
			d.Logf("%s %dx%d: initial sync (not measured in this run) took %.3f s", s.Sink, s.Services, s.Endpoints, s.Seconds)
		}
		return err
	}
	d.emit(s, err)
	if strace != "" {
		return nil // the last cell: its failure is in its sample
	}
	return err // nothing else can be measured on an unprogrammed node
}

// restart stops the proxy and starts it again on the programmed kernel;
// it is done at its first completed sync
// (kubeproxy_sync_proxy_rules_last_timestamp_seconds set), and the kernel
// must be unchanged.
func (d *driver) restart(ctx context.Context, rep int) error {
	s := d.sample(ScRestart, rep)
	before, err := d.pr.fingerprint()
	if err != nil {
		return err
	}
	end, err := d.relaunch(ctx)
	if err == nil {
		start := measured{at: d.p.start, proxyCounters: noCounters}
		fill(&s, start, d.measure(ctx, end, &start))
		// Let a late write show before comparing.
		time.Sleep(2 * time.Second)
		after, ferr := d.pr.fingerprint()
		if ferr != nil {
			err = ferr
		}
		s.KernelChanged = after != before
	}
	d.emit(s, err)
	return err
}

// relaunch stops the proxy and starts it again with the sink's current
// arguments; it returns when the new process completed its first sync.
func (d *driver) relaunch(ctx context.Context) (time.Time, error) {
	d.p.stop()
	if err := d.startProxy(""); err != nil {
		return time.Time{}, err
	}
	return d.wait(ctx, d.synced(ctx))
}

// synced returns a condition that holds once the proxy completed a sync
// (kubeproxy_sync_proxy_rules_last_timestamp_seconds set).
func (d *driver) synced(ctx context.Context) func() (bool, error) {
	return func() (bool, error) {
		m, err := d.p.metrics(ctx)
		if err != nil {
			return false, nil
		}
		return m["kubeproxy_sync_proxy_rules_last_timestamp_seconds"] > 0, nil
	}
}

// steady measures the proxy's cost over a window with nothing changed,
// normalised to one minute.
func (d *driver) steady(ctx context.Context) {
	s := d.sample(ScSteady, 0)
	a := d.measure(ctx, time.Now(), nil)
	select {
	case <-time.After(d.Steady):
	case <-ctx.Done():
	}
	b := d.measure(ctx, time.Now(), nil)
	fill(&s, a, b)
	k := 60 / s.Seconds
	s.CPUSeconds *= k
	s.RestoreBytes = int64(float64(s.RestoreBytes) * k)
	s.NFTBytes = int64(float64(s.NFTBytes) * k)
	if s.KernelOps >= 0 {
		s.KernelOps *= k
	}
	if s.NetlinkSyscalls >= 0 {
		s.NetlinkSyscalls *= k
	}
	d.emit(s, d.p.done())
}

// change writes with write, then waits for cond and emits the sample.
func (d *driver) change(ctx context.Context, sc string, rep int, write func() error, cond func() (bool, error)) {
	s := d.sample(sc, rep)
	if d.stall == nil {
		d.stall = startStallWatch()
		d.Logf("%s: stall watch started (realtime: %v)", d.Sink.Name, d.stall.realtime.Load())
	}
	// Outside the proxies' minimum sync period (1 s) since the last change.
	time.Sleep(1200 * time.Millisecond)
	a := d.measure(ctx, time.Now(), nil)
	d.stall.take()
	a.at = time.Now()
	err := write()
	var end time.Time
	if err == nil {
		end, err = d.wait(ctx, cond)
	}
	stall := d.stall.take()
	if err == nil {
		fill(&s, a, d.measure(ctx, end, &a))
		s.StallSeconds = stall.Seconds()
	}
	d.emit(s, err)
}

// endpoint adds an endpoint to one service and removes it again.
func (d *driver) endpoint(ctx context.Context, rep int) {
	i := (rep * 7919) % d.Services
	name := ServiceName(i)
	base := make([]netip.Addr, d.Endpoints)
	for j := range base {
		base[j] = EndpointIP(i, j, d.Endpoints)
	}
	ref := []endpointRef{{name: name, vip: VIP(i), ep: nth(extraEPBase, rep)}}
	d.change(ctx, ScEndpointAdd, rep,
		func() error {
			return setEndpoints(ctx, d.Client, name, append(append([]netip.Addr{}, base...), ref[0].ep))
		},
		func() (bool, error) { return d.pr.endpoints(ref, true) })
	d.change(ctx, ScEndpointRemove, rep,
		func() error { return setEndpoints(ctx, d.Client, name, base) },
		func() (bool, error) { return d.pr.endpoints(ref, false) })
}

// service adds a service with its endpoints and deletes it again.
func (d *driver) service(ctx context.Context, rep int) {
	name := fmt.Sprintf("extra-%03d", rep)
	vip := nth(extraVIP, rep)
	eps := make([]netip.Addr, d.Endpoints)
	for j := range eps {
		eps[j] = nth(extraEPBase, 10000+rep*d.Endpoints+j)
	}
	d.change(ctx, ScServiceAdd, rep, func() error {
		if _, err := d.Client.CoreV1().Services(Namespace).Create(ctx, service(name, vip), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("benchmatrix: create service %s: %w", name, err)
		}
		if _, err := d.Client.DiscoveryV1().EndpointSlices(Namespace).Create(ctx, slice(name, eps), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("benchmatrix: create EndpointSlice of %s: %w", name, err)
		}
		return nil
	}, func() (bool, error) { return d.pr.service(name, vip, eps) })
	d.change(ctx, ScServiceRemove, rep, func() error {
		if err := d.Client.CoreV1().Services(Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("benchmatrix: delete service %s: %w", name, err)
		}
		if err := d.Client.DiscoveryV1().EndpointSlices(Namespace).Delete(ctx, name+"-1", metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("benchmatrix: delete EndpointSlice of %s: %w", name, err)
		}
		return nil
	}, func() (bool, error) { return d.pr.service(name, vip, nil) })
}

// onePercent replaces one endpoint in each of 1% of the services, then
// puts them back (two samples).
func (d *driver) onePercent(ctx context.Context, rep int) {
	k := max(d.Services/100, 1)
	var changed, orig []endpointRef
	for x := range k {
		i := (rep*k + x) % d.Services
		changed = append(changed, endpointRef{name: ServiceName(i), vip: VIP(i), ep: nth(changedBase, rep*k+x)})
		orig = append(orig, endpointRef{name: ServiceName(i), vip: VIP(i), ep: EndpointIP(i, 0, d.Endpoints)})
	}
	set := func(first func(x int) netip.Addr) func() error {
		return func() error {
			return parallel(k, 8, func(x int) error {
				i := (rep*k + x) % d.Services
				ips := []netip.Addr{first(x)}
				for j := 1; j < d.Endpoints; j++ {
					ips = append(ips, EndpointIP(i, j, d.Endpoints))
				}
				return setEndpoints(ctx, d.Client, ServiceName(i), ips)
			})
		}
	}
	d.change(ctx, ScOnePercent, 2*rep, set(func(x int) netip.Addr { return changed[x].ep }),
		func() (bool, error) {
			ok, err := d.pr.endpoints(changed, true)
			if ok && err == nil {
				return d.pr.endpoints(orig, false)
			}
			return ok, err
		})
	d.change(ctx, ScOnePercent, 2*rep+1, set(func(x int) netip.Addr { return orig[x].ep }),
		func() (bool, error) {
			ok, err := d.pr.endpoints(orig, true)
			if ok && err == nil {
				return d.pr.endpoints(changed, false)
			}
			return ok, err
		})
}
