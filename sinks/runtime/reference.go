package runtime

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/sinks/healthcheck"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
	"github.com/proxysinks/proxysinks/sinks/udpflows"
)

// newMetrics registers the runtime's metrics in reg: httpserve's (with the
// source's stats), and the quarantine's gauge.
func newMetrics(reg httpserve.Registry, stats func() client.Stats, log *slog.Logger) (*httpserve.Metrics, *quarantineReport) {
	m := httpserve.NewMetricsIn(reg, ipFamilies()...)
	m.WatchSource(stats)
	return m, newQuarantineReport(log, m.Registry)
}

// MetricFamilies returns every metric family the sink serves on /metrics,
// sorted by name: the runtime's (httpserve's, the source's, the
// quarantine's and udpflows', which a node with conntrack serves) and the
// sink's own (Sink.Metrics), as a scrape of a sink that has programmed
// nothing parses them, except that every vector has one series (its labels
// set to "x"), so that each family says its type and labels. Nothing
// touches a kernel.
func (s Sink) MetricFamilies() ([]*dto.MetricFamily, error) {
	reg := &keepingRegistry{Registry: prometheus.NewRegistry()}
	log := slog.New(slog.DiscardHandler)
	m, _ := newMetrics(reg, func() client.Stats { return client.Stats{} }, log)
	if _, err := udpflows.New(nil, reg, log); err != nil {
		return nil, fmt.Errorf("%s: udpflows metrics: %w", s.Name, err)
	}
	if s.Metrics != nil {
		if err := s.Metrics(reg, m.AddText); err != nil {
			return nil, fmt.Errorf("%s: sink metrics: %w", s.Name, err)
		}
	}
	if err := reg.fill(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	h := httpserve.Handler(m, healthcheck.NewProxyHealth(time.Minute, nil), s.Mode)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("%s: /metrics: status %d: %s", s.Name, rec.Code, rec.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: parse /metrics: %w", s.Name, err)
	}
	out := make([]*dto.MetricFamily, 0, len(fams))
	for _, f := range fams {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// keepingRegistry is a registry that keeps what is registered in it, so that
// fill can give every vector a series.
type keepingRegistry struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

// Register registers c and keeps it.
func (r *keepingRegistry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister registers cs, panicking as prometheus.Registry's does.
func (r *keepingRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// fill gives every vector registered one series, its label values "x".
func (r *keepingRegistry) fill() error {
	for _, c := range r.collectors {
		var get func(...string) error
		switch v := c.(type) {
		case *prometheus.CounterVec:
			get = func(lv ...string) error { _, err := v.GetMetricWithLabelValues(lv...); return err }
		case *prometheus.GaugeVec:
			get = func(lv ...string) error { _, err := v.GetMetricWithLabelValues(lv...); return err }
		case *prometheus.HistogramVec:
			get = func(lv ...string) error { _, err := v.GetMetricWithLabelValues(lv...); return err }
		case *prometheus.SummaryVec:
			get = func(lv ...string) error { _, err := v.GetMetricWithLabelValues(lv...); return err }
		default:
			continue
		}
		if err := withLabels(get); err != nil {
			return err
		}
	}
	return nil
}

// maxLabels is the most labels fill tries a vector with.
const maxLabels = 16

// withLabels calls get with 0, 1, ... label values "x" until it succeeds
// (a vector refuses the wrong number).
func withLabels(get func(...string) error) error {
	var values []string
	var err error
	for range maxLabels {
		if err = get(values...); err == nil {
			return nil
		}
		values = append(values, "x")
	}
	return fmt.Errorf("a vector takes none of 0 to %d labels: %w", maxLabels-1, err)
}
