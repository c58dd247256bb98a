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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/sinks/healthcheck"
	"github.com/proxysinks/proxysinks/sinks/version"
)

// Metrics are a sink's Prometheus metrics.
type Metrics struct {
	Registry *prometheus.Registry

	SyncDuration        prometheus.Histogram
	LastSync            prometheus.Gauge
	ProgrammingDuration prometheus.Histogram
	SnapshotProgramming prometheus.Histogram
	NoLocalEndpoints    *prometheus.GaugeVec
	KernelOps           prometheus.Counter
	SyncKernelOps       prometheus.Gauge
	Syscalls            prometheus.Counter
	SyncSyscalls        prometheus.Gauge
	FailedObjects       prometheus.Gauge
	SyncErrors          prometheus.Counter
}

// NewMetrics registers the metrics in a new registry (with the Go and
// process collectors).
func NewMetrics() *Metrics {
	buckets := prometheus.ExponentialBuckets(0.0001, 2, 18) // 100µs .. 13s
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		SyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubeproxy_sync_proxy_rules_duration_seconds", Help: "Duration of one sync of the kernel state.", Buckets: buckets}),
		LastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_last_timestamp_seconds", Help: "Time of the last successful sync."}),
		ProgrammingDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubeproxy_network_programming_duration_seconds", Help: "Time from a change's trigger (the EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time) to the kernel being programmed.", Buckets: buckets}),
		SnapshotProgramming: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "proxysinks_snapshot_programming_duration_seconds", Help: "Time from a snapshot reaching the sink to the kernel being programmed.", Buckets: buckets}),
		NoLocalEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_no_local_endpoints_total", Help: "Services with a Local traffic policy and no local endpoint."}, []string{"traffic_policy"}),
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
	m.Registry.MustRegister(m.SyncDuration, m.LastSync, m.ProgrammingDuration, m.SnapshotProgramming, m.NoLocalEndpoints, m.KernelOps,
		m.SyncKernelOps, m.Syscalls, m.SyncSyscalls, m.FailedObjects, m.SyncErrors, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
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
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, mode)
	})
	mux.Handle("/healthz", h.HealthzHandler())
	return mux
}

// HealthHandler returns the health address's handler: /healthz and /livez
// with kube-proxy's semantics (package healthcheck).
func HealthHandler(h *healthcheck.ProxyHealth) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", h.HealthzHandler())
	mux.Handle("/livez", h.LivezHandler())
	return mux
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
