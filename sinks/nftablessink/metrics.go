package nftablessink

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
)

// Metrics are kube-proxy v1.37.2's nftables-mode metrics (pkg/proxy/metrics:
// their names, help and ip_family label), and the sink's counts of other
// writers' changes to its tables and of its reads of them.
type Metrics struct {
	// FullDuration and PartialDuration are the durations of full and
	// partial syncs per family (kubeproxy_sync_full_proxy_rules_duration_seconds,
	// kubeproxy_sync_partial_proxy_rules_duration_seconds).
	FullDuration, PartialDuration *prometheus.HistogramVec
	// SyncFailures counts the syncs of a family whose transaction the
	// kernel refused (kubeproxy_sync_proxy_rules_nftables_sync_failures_total).
	SyncFailures *prometheus.CounterVec
	// CleanupFailures counts the failed deletions of stale chains and
	// sets (kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total).
	CleanupFailures *prometheus.CounterVec
	// ForeignChanges is proxysinks_nftables_foreign_changes_total: the
	// syncs that found a family's kube-proxy table changed by another
	// writer since the sink's last commit (and repaired it).
	ForeignChanges *prometheus.CounterVec
	// TableReads is proxysinks_nftables_table_reads_total: the tables
	// read back from the kernel, which a sync does only when the
	// nf_tables generation moved since the sink's last commit (the first
	// sync, another writer, a failed commit).
	TableReads prometheus.Counter
}

// NewMetrics registers the metrics in reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	family := []string{"ip_family"}
	d := httpserve.NewSyncDurations()
	m := &Metrics{
		FullDuration: d.Full, PartialDuration: d.Partial,
		SyncFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_nftables_sync_failures_total", Help: "Cumulative proxy nftables sync failures"}, family),
		CleanupFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total", Help: "Cumulative proxy nftables cleanup failures"}, family),
		ForeignChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "proxysinks_nftables_foreign_changes_total", Help: "Syncs that found the kube-proxy table of a family changed by another writer since the sink's last commit (repaired by the sync)."}, family),
		TableReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "proxysinks_nftables_table_reads_total", Help: "Tables read back from the kernel: only when the nf_tables generation moved since the sink's last commit (first sync, another writer, a failed commit)."}),
	}
	for _, c := range []prometheus.Collector{m.FullDuration, m.PartialDuration, m.SyncFailures, m.CleanupFailures, m.ForeignChanges, m.TableReads} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register nftables metrics: %w", err)
		}
	}
	return m, nil
}

// observe records a sync of the families (ip_family values) the Proxier
// programs. One sync covers them all: its duration is observed under each
// of them, as the runtime reports kubeproxy_sync_proxy_rules_duration_seconds.
// Refused transactions and other writers' changes are counted under the
// family they happened in.
func (m *Metrics) observe(families []string, st nftables.SyncStats) {
	if m == nil {
		return
	}
	httpserve.SyncDurations{Full: m.FullDuration, Partial: m.PartialDuration}.Observe(families, st.Full, st.Duration)
	for _, f := range st.FailedFamilies {
		m.SyncFailures.WithLabelValues(ipFamily(f)).Inc()
	}
	for _, f := range st.ForeignFamilies {
		m.ForeignChanges.WithLabelValues(ipFamily(f)).Inc()
	}
	m.TableReads.Add(float64(st.Reads))
}

// ipFamily is kube-proxy's ip_family label value of an nf_tables family.
func ipFamily(f nft.Family) string {
	if f == nft.FamilyIPv6 {
		return "IPv6"
	}
	return "IPv4"
}
