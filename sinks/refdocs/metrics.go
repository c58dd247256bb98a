package refdocs

import (
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// Metric is one metric family as the reference lists it.
type Metric struct {
	Name, Type, Help string
	// Labels are the label names of its series, sorted.
	Labels []string
	// Sinks are the names of the sinks that serve it, in the order given.
	Sinks []string
}

// Metrics returns every metric family any of sinks serves
// (runtime.Sink.MetricFamilies), sorted by name: one Metric per name, or
// one per form (type, labels, help) when sinks serve a name in different
// forms.
func Metrics(sinks []runtime.Sink) ([]Metric, error) {
	var out []*Metric
	for _, s := range sinks {
		fams, err := s.MetricFamilies()
		if err != nil {
			return nil, err
		}
		for _, f := range fams {
			m := Metric{Name: f.GetName(), Type: strings.ToLower(f.GetType().String()), Help: oneLine(f.GetHelp()), Labels: labelNames(f)}
			i := slices.IndexFunc(out, func(o *Metric) bool {
				return o.Name == m.Name && o.Type == m.Type && o.Help == m.Help && slices.Equal(o.Labels, m.Labels)
			})
			if i < 0 {
				out = append(out, &m)
				i = len(out) - 1
			}
			out[i].Sinks = append(out[i].Sinks, s.Name)
		}
	}
	ms := make([]Metric, 0, len(out))
	for _, m := range out {
		ms = append(ms, *m)
	}
	slices.SortStableFunc(ms, func(a, b Metric) int { return strings.Compare(a.Name, b.Name) })
	return ms, nil
}

// labelNames returns the label names of f's series, sorted.
func labelNames(f *dto.MetricFamily) []string {
	var names []string
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if !slices.Contains(names, l.GetName()) {
				names = append(names, l.GetName())
			}
		}
	}
	slices.Sort(names)
	return names
}

// MetricsPage renders docs/reference/metrics.md: one row per metric.
func MetricsPage(sinks []runtime.Sink) (string, error) {
	ms, err := Metrics(sinks)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(header("Metrics"))
	b.WriteString(`Every metric the sink binaries serve on ` + "`/metrics`" + ` at ` + "`--metrics-bind-address`" + ` (default ` + "`127.0.0.1:10249`" + `, as kube-proxy's; see [operate.md](../operate.md) to expose it). The list is what a scrape of each sink returns (` + "`runtime.Sink.MetricFamilies`" + `), not written by hand.

- Names starting ` + "`kubeproxy_`" + ` have kube-proxy v1.37's names, labels and meaning, so that dashboards and alerts written for kube-proxy work unchanged; ` + "`proxysinks_`" + ` are the sinks' own; ` + "`go_`" + ` and ` + "`process_`" + ` are client_golang's Go and process collectors.
- A histogram is served as ` + "`<name>_bucket`" + ` (label ` + "`le`" + `), ` + "`<name>_sum`" + ` and ` + "`<name>_count`" + `; a summary as ` + "`<name>`" + ` (label ` + "`quantile`" + `), ` + "`<name>_sum`" + ` and ` + "`<name>_count`" + `.
- ` + "`ip_family`" + ` is ` + "`IPv4`" + `, and ` + "`IPv6`" + ` on a node with IPv6: one sync of a sink covers both families and is reported under each.
- Some are served only when their source is there: ` + "`proxysinks_ipvs_*`" + ` with ` + "`--ipvs-stats`" + `; ` + "`kubeproxy_conntrack_reconciler_*`" + ` when the node's conntrack opens; ` + "`kubeproxy_iptables_*_packets_total`" + ` when its nfacct object can be read; a vector's series appear once something is counted under their labels.
- A name the sinks serve in different forms (type, labels or help) has one row per form.

`)
	b.WriteString(row("metric", "type", "labels", "sinks", "help"))
	b.WriteString(row("---", "---", "---", "---", "---"))
	for _, m := range ms {
		labels := "—"
		if len(m.Labels) > 0 {
			labels = "`" + strings.Join(m.Labels, "`, `") + "`"
		}
		on := strings.Join(m.Sinks, ", ")
		if len(m.Sinks) == len(sinks) {
			on = "all"
		}
		b.WriteString(row("`"+m.Name+"`", m.Type, labels, on, m.Help))
	}
	return b.String(), nil
}

// oneLine returns s with its line breaks as spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
