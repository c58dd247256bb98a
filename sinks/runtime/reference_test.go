package runtime

import (
	"errors"
	"testing"

	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
)

// TestMetricFamilies: a sink's own metrics (a vector with no series yet,
// a text source) are listed with the runtime's, each with its type and
// label names.
func TestMetricFamilies(t *testing.T) {
	sink := Sink{Name: "test-sink", Mode: "iptables", Metrics: func(reg prometheus.Registerer, text func(httpserve.TextSource)) error {
		reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "own_total", Help: "Own."}, []string{"b", "a"}))
		text(func(dst []byte) []byte {
			return append(dst, "# HELP own_text Text.\n# TYPE own_text gauge\nown_text{x=\"1\"} 2\n"...)
		})
		return nil
	}}
	fams, err := sink.MetricFamilies()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range fams {
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		got[f.GetName()] = f.GetType().String() + " " + f.GetHelp() + " " + fmt.Sprint(labels)
	}
	for name, want := range map[string]string{
		"own_total":                      dto.MetricType_COUNTER.String() + " Own. [a b]",
		"own_text":                       dto.MetricType_GAUGE.String() + " Text. [x]",
		"proxysinks_quarantined_objects": dto.MetricType_GAUGE.String() + " Objects the kernel refused alone, retried with backoff (the rest of the node is programmed), by kind. [kind]",
		"kubeproxy_proxy_livez_total":    dto.MetricType_COUNTER.String() + " Cumulative proxy livez HTTP status [code]",
		"kubeproxy_conntrack_reconciler_deleted_entries_total": dto.MetricType_COUNTER.String() + " Cumulative conntrack flows deleted by conntrack reconciler [ip_family]",
		"proxysinks_source_stale":                              "",
	} {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s not listed", name)
		case want != "" && g != want:
			t.Errorf("%s: %q, want %q", name, g, want)
		}
	}
}

// TestWithLabels: the number of labels a vector takes is found, and one
// taking more than maxLabels is an error.
func TestWithLabels(t *testing.T) {
	for _, n := range []int{0, 1, 3, maxLabels - 1, maxLabels} {
		var got int
		err := withLabels(func(v ...string) error {
			if len(v) != n {
				return errors.New("cardinality")
			}
			got = len(v)
			return nil
		})
		if (err != nil) != (n >= maxLabels) || err == nil && got != n {
			t.Errorf("%d labels: got %d, error %v", n, got, err)
		}
	}
}
