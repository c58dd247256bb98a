package monitoring

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/e2e/vm"
)

var update = flag.Bool("update", false, "rewrite deploy/monitoring/prometheus-operator/prometheusrule.yaml from deploy/monitoring/rules.yaml")

// The files under test, relative to the workspace root.
const (
	monitoringDir  = "deploy/monitoring"
	rulesFile      = monitoringDir + "/rules.yaml"
	rulesTestFile  = monitoringDir + "/rules_test.yaml"
	dashboardFile  = monitoringDir + "/dashboard.json"
	readmeFile     = monitoringDir + "/README.md"
	operatorDir    = monitoringDir + "/prometheus-operator"
	podMonitorFile = operatorDir + "/podmonitor.yaml"
	promRuleFile   = operatorDir + "/prometheusrule.yaml"
	daemonSetFile  = "deploy/base/daemonset.yaml"
	// metricsDoc is the reference list of the sinks' metrics, generated
	// from the code.
	metricsDoc = "docs/reference/metrics.md"
)

// root returns the workspace root.
func root(t *testing.T) string {
	t.Helper()
	dir, err := vm.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// read returns a file under the workspace root.
func read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// need returns the path of program, or skips the test naming it; it fails
// instead when cluster.RequireEnv (make test) or CI is set.
func need(t *testing.T, program, hint string) string {
	t.Helper()
	path, err := exec.LookPath(program)
	if err == nil {
		return path
	}
	msg := fmt.Sprintf("%s missing (%s): %v", program, hint, err)
	if os.Getenv(cluster.RequireEnv) == "1" || os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// promtool returns promtool's path (Debian's prometheus package).
func promtool(t *testing.T) string {
	return need(t, "promtool", "make deps installs Debian's prometheus package")
}

// run runs a command in dir and returns its output, failing the test on
// an error.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ruleFile is a Prometheus rules file.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

// rule is an alerting or a recording rule.
type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// rules returns rules.yaml's rules, decoded strictly.
func rules(t *testing.T) []rule {
	t.Helper()
	var f ruleFile
	if err := yaml.UnmarshalStrict(read(t, rulesFile), &f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no rules", rulesFile)
	}
	return out
}

// TestRulesPromtool runs promtool check rules and the rule unit tests of
// rules_test.yaml.
func TestRulesPromtool(t *testing.T) {
	bin := promtool(t)
	dir := filepath.Join(root(t), monitoringDir)
	run(t, dir, bin, "check", "rules", filepath.Base(rulesFile))
	run(t, dir, bin, "test", "rules", filepath.Base(rulesTestFile))
}

// TestRulesTested checks that rules_test.yaml has, for every alert, a case
// where it fires and one where it does not, and that every alert says how
// severe it is and what to run.
func TestRulesTested(t *testing.T) {
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string            `json:"alertname"`
				ExpAlerts []json.RawMessage `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(read(t, rulesTestFile), &tests); err != nil {
		t.Fatalf("%s: %v", rulesTestFile, err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, r := range rules(t) {
		if r.Alert == "" {
			continue
		}
		if !fires[r.Alert] || !silent[r.Alert] {
			t.Errorf("%s: %s is not tested both firing (%v) and silent (%v)", rulesTestFile, r.Alert, fires[r.Alert], silent[r.Alert])
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
		}
		d := r.Annotations["description"]
		if r.Annotations["summary"] == "" || !strings.Contains(d, "kubectl") || !strings.Contains(d, "docs/troubleshooting.md") {
			t.Errorf("%s: want a summary, and a description naming the kubectl command to run and docs/troubleshooting.md; got %q", r.Alert, r.Annotations)
		}
	}
}

// promRuleHeader opens the PrometheusRule generated from rules.yaml.
const promRuleHeader = `# Generated from ../rules.yaml by go test ./e2e/monitoring/ -update: edit
# that file, not this one. The sinks' alerts as a PrometheusRule for the
# Prometheus Operator; kube-prometheus's Prometheus selects it as it is.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: proxysinks
  namespace: monitoring
  labels:
    prometheus: k8s
    role: alert-rules
spec:
`

// promRule returns the PrometheusRule holding the rules file src: its
// groups, from the line "groups:" on, under spec.
func promRule(src []byte) ([]byte, error) {
	i := bytes.Index(src, []byte("\ngroups:\n"))
	if i < 0 {
		return nil, fmt.Errorf("%s: no top-level groups: line", rulesFile)
	}
	var b bytes.Buffer
	b.WriteString(promRuleHeader)
	for _, line := range strings.SplitAfter(string(src[i+1:]), "\n") {
		if strings.TrimSpace(line) != "" {
			b.WriteString("  ")
		}
		b.WriteString(line)
	}
	return b.Bytes(), nil
}

// TestPrometheusRule checks that prometheusrule.yaml is generated from
// rules.yaml (-update rewrites it) and holds the same groups.
func TestPrometheusRule(t *testing.T) {
	src := read(t, rulesFile)
	want, err := promRule(src)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root(t), promRuleFile)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := read(t, promRuleFile)
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is not generated from %s (-want +got); run go test ./e2e/monitoring/ -update:\n%s", promRuleFile, rulesFile, diff)
	}
	var obj struct {
		Spec ruleFile `json:"spec"`
	}
	var plain ruleFile
	if err := yaml.Unmarshal(got, &obj); err != nil {
		t.Fatalf("%s: %v", promRuleFile, err)
	}
	if err := yaml.Unmarshal(src, &plain); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	if diff := cmp.Diff(plain, obj.Spec); diff != "" || len(plain.Groups) == 0 {
		t.Errorf("%s spec differs from %s (-plain +spec):\n%s", promRuleFile, rulesFile, diff)
	}
}

// TestPodMonitor checks that the PodMonitor selects the DaemonSet's pods
// in its namespace on its metrics port, and gives them kube-proxy's job
// label and the node as instance, as kube-prometheus's kube-proxy
// PodMonitor does.
func TestPodMonitor(t *testing.T) {
	var ds struct {
		Metadata struct{ Namespace string }
		Spec     struct {
			Template struct {
				Metadata struct{ Labels map[string]string }
				Spec     struct {
					HostNetwork bool
					Containers  []struct {
						Args  []string
						Ports []struct {
							Name          string
							ContainerPort int
						}
					}
				}
			}
		}
	}
	if err := yaml.Unmarshal(read(t, daemonSetFile), &ds); err != nil {
		t.Fatalf("%s: %v", daemonSetFile, err)
	}
	var pm struct {
		APIVersion string
		Kind       string
		Metadata   struct {
			Name, Namespace string
			Labels          map[string]string
		}
		Spec struct {
			NamespaceSelector   struct{ MatchNames []string }
			Selector            struct{ MatchLabels map[string]string }
			PodMetricsEndpoints []struct {
				Port        string
				Interval    string
				Relabelings []struct {
					Action       string
					SourceLabels []string
					TargetLabel  string
					Replacement  string
				}
			}
		}
	}
	if err := yaml.UnmarshalStrict(read(t, podMonitorFile), &pm); err != nil {
		t.Fatalf("%s: %v", podMonitorFile, err)
	}
	if !slices.Contains(pm.Spec.NamespaceSelector.MatchNames, ds.Metadata.Namespace) {
		t.Errorf("PodMonitor namespaces %v, want the DaemonSet's %q", pm.Spec.NamespaceSelector.MatchNames, ds.Metadata.Namespace)
	}
	pod := ds.Spec.Template.Metadata.Labels
	for k, v := range pm.Spec.Selector.MatchLabels {
		if pod[k] != v {
			t.Errorf("PodMonitor selects %s=%s, the DaemonSet's pods have %v", k, v, pod)
		}
	}
	if len(pm.Spec.Selector.MatchLabels) == 0 || len(pm.Spec.PodMetricsEndpoints) != 1 || len(ds.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want a PodMonitor with a selector and one endpoint, and a DaemonSet with one container")
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	port := 0
	for _, p := range ds.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == ep.Port {
			port = p.ContainerPort
		}
	}
	// The port the sinks' metrics server binds by default
	// (--metrics-bind-address 127.0.0.1:10249), as kube-proxy's.
	if port != 10249 {
		t.Errorf("PodMonitor port %q is container port %d, want the metrics port 10249", ep.Port, port)
	}
	if !ds.Spec.Template.Spec.HostNetwork {
		t.Errorf("the DaemonSet's pods do not use the host network: README.md's metricsBindAddress advice assumes they do")
	}
	labels := map[string]string{}
	for _, r := range ep.Relabelings {
		if r.Action != "replace" {
			t.Errorf("relabeling %+v: want action replace", r)
		}
		labels[r.TargetLabel] = strings.Join(r.SourceLabels, ";") + "=>" + r.Replacement
	}
	want := map[string]string{"job": "=>kube-proxy", "instance": "__meta_kubernetes_pod_node_name=>"}
	if diff := cmp.Diff(want, labels); diff != "" {
		t.Errorf("PodMonitor relabelings (-want +got):\n%s", diff)
	}
}

// TestKustomize renders prometheus-operator/ with kustomize (as kubectl
// kustomize does: cluster.Kustomize) and checks it holds the PodMonitor and
// the PrometheusRule as written.
func TestKustomize(t *testing.T) {
	rendered, err := cluster.Kustomize(filepath.Join(root(t), operatorDir))
	if err != nil {
		t.Fatal(err)
	}
	out := string(rendered)
	got := map[string]any{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("rendered document: %v\n%s", err, doc)
		}
		got[fmt.Sprint(obj["kind"])] = obj
	}
	want := map[string]any{}
	for _, f := range []string{podMonitorFile, promRuleFile} {
		var obj map[string]any
		if err := yaml.Unmarshal(read(t, f), &obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want[fmt.Sprint(obj["kind"])] = obj
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kustomize %s (-files +rendered):\n%s", operatorDir, diff)
	}
}

// exported returns the metric names the sinks export, as series names:
// metricsDoc's rows ("| `name` | type | labels | sinks | help |"), a
// histogram's as _bucket, _sum and _count, a summary's also as _sum and
// _count; Prometheus's up; and the names rules.yaml records.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `([a-zA-Z_:][a-zA-Z0-9_:]*)` \\| *([a-z]+) *\\|")
	for _, m := range row.FindAllStringSubmatch(string(read(t, metricsDoc)), -1) {
		names[m[1]] = true
		switch m[2] {
		case "histogram":
			names[m[1]+"_bucket"], names[m[1]+"_sum"], names[m[1]+"_count"] = true, true, true
		case "summary":
			names[m[1]+"_sum"], names[m[1]+"_count"] = true, true
		}
	}
	if len(names) < 10 {
		t.Fatalf("%s: %d metric rows, want the sinks' metrics", metricsDoc, len(names))
	}
	names["up"] = true
	for _, r := range rules(t) {
		if r.Record != "" {
			names[r.Record] = true
		}
	}
	return names
}

// checkExported reports the names in expr that the sinks do not export.
func checkExported(t *testing.T, where, expr string, names map[string]bool) {
	t.Helper()
	found := metricNames(expr)
	if len(found) == 0 {
		t.Errorf("%s: no metric in %q", where, expr)
	}
	for _, n := range found {
		if !names[n] {
			t.Errorf("%s: %s is not a metric the sinks export (%s) in %q", where, n, metricsDoc, expr)
		}
	}
}

// TestRulesMetricsExported checks every metric the rules name.
func TestRulesMetricsExported(t *testing.T) {
	names := exported(t)
	for _, r := range rules(t) {
		checkExported(t, rulesFile+": "+r.Alert+r.Record, r.Expr, names)
	}
}

// kubeProxyMixin are the metrics kube-prometheus's kube-proxy monitoring
// queries (kubernetes-mixin: alerts/kube_proxy.libsonnet, KubeProxyDown on
// up; dashboards/proxy.libsonnet, the "Proxy" dashboard), histograms by
// their base name, each with job="kube-proxy".
var kubeProxyMixin = []string{
	"up",
	"kubeproxy_sync_proxy_rules_duration_seconds",
	"kubeproxy_network_programming_duration_seconds",
	"rest_client_requests_total",
	"rest_client_request_duration_seconds",
	"process_resident_memory_bytes",
	"process_cpu_seconds_total",
	"go_goroutines",
}

// TestKubePrometheusTable checks README.md's table of what kube-prometheus's
// kube-proxy monitoring queries: one row per metric, and whether a sink
// exports it as the sinks do.
func TestKubePrometheusTable(t *testing.T) {
	names := exported(t)
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| [^|]+ \\| (yes|no)[^|]*\\|$")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(string(read(t, readmeFile)), -1) {
		listed = append(listed, m[1])
		has := names[m[1]] || names[m[1]+"_bucket"]
		if says := m[2] == "yes"; says != has {
			t.Errorf("%s: %s: says exported %v, %s says %v", readmeFile, m[1], says, metricsDoc, has)
		}
	}
	if diff := cmp.Diff(kubeProxyMixin, listed); diff != "" {
		t.Errorf("%s: the table's metrics are not kube-prometheus's kube-proxy ones (-want +got):\n%s", readmeFile, diff)
	}
}
