// Package httpserve serves a sink's HTTP endpoints the way kube-proxy does:
// /metrics (with kube-proxy's metric names), /proxyMode and /healthz on the
// metrics address, and /healthz and /livez on the health address.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/sinks/healthcheck"
	"github.com/proxysinks/proxysinks/sinks/version"
)

// Metrics are a sink's Prometheus metrics. Those named kubeproxy_ have
// kube-proxy v1.37's names, labels and meaning (pkg/proxy/metrics); a
// sink's one sync covers every IP family it programs, and is reported
// under the ip_family of each (Families), as kube-proxy's per-family
// proxiers report theirs.
type Metrics struct {
	Registry Registry
	// Families are the ip_family values the per-family metrics are
	// reported under: "IPv4", and "IPv6" on a node with IPv6.
	Families []string

	SyncDuration        *prometheus.HistogramVec // ip_family
	LastSync            *prometheus.GaugeVec     // ip_family
	LastQueued          *prometheus.GaugeVec     // ip_family
	ProgrammingDuration *prometheus.HistogramVec // ip_family
	SnapshotProgramming prometheus.Histogram
	NoLocalEndpoints    *prometheus.GaugeVec // traffic_policy (internal, external), ip_family
	// EndpointChanges and ServiceChanges count the services whose
	// endpoints, or whose Service, the source delivered changed; the
	// pending gauges count those not handed to the controller yet.
	EndpointChanges, ServiceChanges               prometheus.Counter
	EndpointChangesPending, ServiceChangesPending prometheus.Gauge
	// HealthzTotal and LivezTotal count the health address's /healthz
	// and /livez answers by HTTP status (code).
	HealthzTotal, LivezTotal *prometheus.CounterVec
	KernelOps                prometheus.Counter
	SyncKernelOps            prometheus.Gauge
	Syscalls                 prometheus.Counter
	SyncSyscalls             prometheus.Gauge
	FailedObjects            prometheus.Gauge
	SyncErrors               prometheus.Counter

	mu   sync.Mutex
	text []TextSource
}

// Registry is where Metrics registers its collectors and what /metrics
// serves (*prometheus.Registry is one).
type Registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// TextSource appends series to dst in the text exposition format
// (version 0.0.4), whole metric families with their HELP and TYPE lines:
// for metrics too many for client_golang's cost per series (ipvssink's
// --ipvs-stats). Its families must not be the registry's.
type TextSource func(dst []byte) []byte

// AddText makes /metrics serve what src appends after the registry's
// metrics, at every scrape; /metrics then always answers in the text
// format.
func (m *Metrics) AddText(src TextSource) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.text = append(m.text, src)
}

// textSources returns the sources added.
func (m *Metrics) textSources() []TextSource {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.text)
}

// metricsHandler serves the registry, then the text sources' series:
// with any, in the text format, uncompressed, whatever the scraper
// accepts (the formats cannot be mixed).
func metricsHandler(m *Metrics) http.Handler {
	reg := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srcs := m.textSources()
		if len(srcs) == 0 {
			reg.ServeHTTP(w, r)
			return
		}
		r = r.Clone(r.Context())
		r.Header.Set("Accept", "text/plain;version=0.0.4")
		r.Header.Del("Accept-Encoding")
		reg.ServeHTTP(w, r)
		var buf []byte
		for _, src := range srcs {
			buf = src(buf)
		}
		_, _ = w.Write(buf)
	})
}

// SyncDurations are kube-proxy's durations of full and partial syncs per
// family, of its iptables and nftables modes
// (kubeproxy_sync_full_proxy_rules_duration_seconds,
// kubeproxy_sync_partial_proxy_rules_duration_seconds), with its
// buckets: 1 ms to 16 s.
type SyncDurations struct {
	Full, Partial *prometheus.HistogramVec
}

// NewSyncDurations returns the two histograms, not registered.
func NewSyncDurations() SyncDurations {
	buckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	family := []string{"ip_family"}
	return SyncDurations{
		Full: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_full_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds for full resyncs", Buckets: buckets}, family),
		Partial: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_partial_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds for partial resyncs", Buckets: buckets}, family),
	}
}

// Observe records one sync of the families (ip_family values), full or
// partial: one sync covers them all, so its duration is observed under
// each, as kubeproxy_sync_proxy_rules_duration_seconds is.
func (d SyncDurations) Observe(families []string, full bool, took time.Duration) {
	h := d.Partial
	if full {
		h = d.Full
	}
	for _, f := range families {
		h.WithLabelValues(f).Observe(took.Seconds())
	}
}

// NewMetrics registers the metrics in a new registry (with the Go and
// process collectors); the per-family ones are reported under families
// ("IPv4" when none is given).
func NewMetrics(families ...string) *Metrics {
	return NewMetricsIn(prometheus.NewRegistry(), families...)
}

// NewMetricsIn is NewMetrics registering in reg.
func NewMetricsIn(reg Registry, families ...string) *Metrics {
	if len(families) == 0 {
		families = []string{"IPv4"}
	}
	buckets := prometheus.ExponentialBuckets(0.0001, 2, 18) // 100µs .. 13s
	family := []string{"ip_family"}
	m := &Metrics{
		Registry: reg,
		Families: families,
		SyncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds: one sync of the kernel state.", Buckets: buckets}, family),
		LastSync: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_last_timestamp_seconds", Help: "The last time proxy rules were successfully synced"}, family),
		LastQueued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", Help: "The last time a sync of proxy rules was queued"}, family),
		ProgrammingDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubeproxy_network_programming_duration_seconds", Help: "In Cluster Network Programming Latency in seconds: from a change's trigger (the EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time) to the kernel being programmed.", Buckets: buckets}, family),
		SnapshotProgramming: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "proxysinks_snapshot_programming_duration_seconds", Help: "Time from a snapshot reaching the sink to the kernel being programmed.", Buckets: buckets}),
		NoLocalEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_no_local_endpoints_total", Help: "Number of services with a Local traffic policy and no endpoints"}, []string{"traffic_policy", "ip_family"}),
		EndpointChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_endpoint_changes_total", Help: "Cumulative proxy rules Endpoint changes"}),
		EndpointChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_endpoint_changes_pending", Help: "Pending proxy rules Endpoint changes"}),
		ServiceChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_service_changes_total", Help: "Cumulative proxy rules Service changes"}),
		ServiceChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_service_changes_pending", Help: "Pending proxy rules Service changes"}),
		HealthzTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_proxy_healthz_total", Help: "Cumulative proxy healthz HTTP status"}, []string{"code"}),
		LivezTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_proxy_livez_total", Help: "Cumulative proxy livez HTTP status"}, []string{"code"}),
		KernelOps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "proxysinks_kernel_operations_total", Help: "Kernel objects written (virtual servers, destinations, addresses, set entries)."}),
		SyncKernelOps: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "proxysinks_sync_kernel_operations", Help: "Kernel objects written by the last sync."}),
		Syscalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "proxysinks_netlink_syscalls_total", Help: "sendmsg and recvmsg calls on the sink's IPVS and ipset sockets and its address batches."}),
		SyncSyscalls: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "proxysinks_sync_netlink_syscalls", Help: "sendmsg and recvmsg calls made by the last sync."}),
		FailedObjects: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "proxysinks_sync_failed_objects", Help: "Kernel objects that failed in the last sync (retried at the next)."}),
		SyncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "proxysinks_sync_errors_total", Help: "Syncs that failed in whole or in part."}),
	}
	v := version.Get()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "proxysinks_build_info", Help: "The running build: always 1, with its version, commit and Go version as labels.",
		ConstLabels: prometheus.Labels{"version": v.Version, "commit": v.Commit, "go_version": v.GoVersion}})
	build.Set(1)
	m.Registry.MustRegister(m.SyncDuration, m.LastSync, m.LastQueued, m.ProgrammingDuration, m.SnapshotProgramming, m.NoLocalEndpoints,
		m.EndpointChanges, m.EndpointChangesPending, m.ServiceChanges, m.ServiceChangesPending, m.HealthzTotal, m.LivezTotal,
		m.KernelOps, m.SyncKernelOps, m.Syscalls, m.SyncSyscalls, m.FailedObjects, m.SyncErrors, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The histograms are served, empty, from the start; like
	// kube-proxy's, the last-queued time is set at start (the informers'
	// first sync is a change queued).
	for _, f := range families {
		m.SyncDuration.WithLabelValues(f)
		m.ProgrammingDuration.WithLabelValues(f)
	}
	m.Queued()
	return m
}

// ObserveSync records one sync's duration under every family.
func (m *Metrics) ObserveSync(d time.Duration) {
	for _, f := range m.Families {
		m.SyncDuration.WithLabelValues(f).Observe(d.Seconds())
	}
}

// Synced sets the last successful sync's time, now, for every family.
func (m *Metrics) Synced() {
	for _, f := range m.Families {
		m.LastSync.WithLabelValues(f).SetToCurrentTime()
	}
}

// Queued sets the time a sync was last queued, now, for every family.
func (m *Metrics) Queued() {
	for _, f := range m.Families {
		m.LastQueued.WithLabelValues(f).SetToCurrentTime()
	}
}

// ObserveProgramming records one change's network programming latency
// under every family.
func (m *Metrics) ObserveProgramming(d time.Duration) {
	for _, f := range m.Families {
		m.ProgrammingDuration.WithLabelValues(f).Observe(d.Seconds())
	}
}

// SetNoLocalEndpoints sets the services with a Local internal, and
// external, traffic policy and no local endpoint, for every family.
func (m *Metrics) SetNoLocalEndpoints(internal, external int) {
	for _, f := range m.Families {
		m.NoLocalEndpoints.WithLabelValues("internal", f).Set(float64(internal))
		m.NoLocalEndpoints.WithLabelValues("external", f).Set(float64(external))
	}
}

// WatchSource exports the source's Stats (read at each scrape):
// proxysinks_source_stale (1 while the source cannot give a state it
// trusts), proxysinks_source_invalid_objects,
// proxysinks_source_invalid_objects_total,
// proxysinks_source_repaired_values_total and
// proxysinks_source_skipped_values_total.
func (m *Metrics) WatchSource(stats func() client.Stats) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "proxysinks_source_stale", Help: "1 while the source cannot give a state it trusts (before its first snapshot, or while some input cannot be read): the kernel keeps the last good state."},
			func() float64 {
				if stats().Stale {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "proxysinks_source_invalid_objects", Help: "Objects of the source that are invalid right now (not served)."},
			func() float64 { return float64(stats().Invalid) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "proxysinks_source_invalid_objects_total", Help: "Invalid object versions the source has seen."},
			func() float64 { return float64(stats().InvalidTotal) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "proxysinks_source_repaired_values_total", Help: "Values of served objects read as kube-proxy reads them rather than as written (legacy leading zeros, IPv4-mapped IPv6, host bits), each counted once."},
			func() float64 { return float64(stats().RepairedValuesTotal) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "proxysinks_source_skipped_values_total", Help: "Values skipped while the rest of their object is served (a bad external IP, source range or endpoint address, an address of a family the service lacks, an unknown ipMode), each counted once."},
			func() float64 { return float64(stats().SkippedValuesTotal) }),
	)
}

// Handler returns the metrics address's handler: /metrics, /proxyMode
// (answering mode) and /healthz.
func Handler(m *Metrics, h *healthcheck.ProxyHealth, mode string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(m))
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, mode)
	})
	mux.Handle("/healthz", h.HealthzHandler())
	return mux
}

// HealthHandler returns the health address's handler: /healthz and /livez
// with kube-proxy's semantics (package healthcheck), their answers counted
// in kubeproxy_proxy_healthz_total and kubeproxy_proxy_livez_total (the
// metrics address's /healthz is not counted, as kube-proxy's is not).
func HealthHandler(m *Metrics, h *healthcheck.ProxyHealth) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", counted(h.HealthzHandler(), m.HealthzTotal))
	mux.Handle("/livez", counted(h.LivezHandler(), m.LivezTotal))
	return mux
}

// counted counts h's answers in c by HTTP status code.
func counted(h http.Handler, c *prometheus.CounterVec) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		c.WithLabelValues(strconv.Itoa(sw.code)).Inc()
	})
}

// statusWriter records the status code written through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

// WriteHeader records code and writes it.
func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Serve listens on addr (nothing when empty) and serves handler until ctx
// ends. A listen error is returned at once, so a bad address fails start-up.
func Serve(ctx context.Context, addr string, handler http.Handler, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("httpserve: listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "address", addr, "error", err)
		}
	}()
	return nil
}
