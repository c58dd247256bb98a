package runtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// localPolicies are two services whose only endpoint is on another node:
// "itp" with internalTrafficPolicy Local, "etp" (a NodePort) with
// externalTrafficPolicy Local; and "both" with an endpoint here.
const localPolicies = `apiVersion: v1
kind: Service
metadata: {name: itp, namespace: default}
spec:
  clusterIP: 10.96.0.1
  clusterIPs: [10.96.0.1]
  internalTrafficPolicy: Local
  ports: [{name: http, protocol: TCP, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: etp, namespace: default}
spec:
  type: NodePort
  clusterIP: 10.96.0.2
  clusterIPs: [10.96.0.2]
  externalTrafficPolicy: Local
  ports: [{name: http, protocol: TCP, port: 80, nodePort: 30080}]
---
apiVersion: v1
kind: Service
metadata: {name: both, namespace: default}
spec:
  type: NodePort
  clusterIP: 10.96.0.3
  clusterIPs: [10.96.0.3]
  internalTrafficPolicy: Local
  externalTrafficPolicy: Local
  ports: [{name: http, protocol: TCP, port: 80, nodePort: 30081}]
`

func slice(svc, node, ip string) string {
	return fmt.Sprintf(`---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %s-1, namespace: default, labels: {kubernetes.io/service-name: %s}}
addressType: IPv4
ports: [{name: http, protocol: TCP, port: 8080}]
endpoints: [{addresses: [%s], nodeName: %s, conditions: {ready: true}}]
`, svc, svc, ip, node)
}

// freeAddr returns a loopback address with a free port.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrape returns the metric families of /metrics at addr.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

// series returns a family's series as "name{label=value,...} value",
// sorted.
func series(mf *dto.MetricFamily) []string {
	var out []string
	for _, m := range mf.GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		var v float64
		switch {
		case m.Counter != nil:
			v = m.Counter.GetValue()
		case m.Gauge != nil:
			v = m.Gauge.GetValue()
		case m.Histogram != nil:
			v = float64(m.Histogram.GetSampleCount())
		}
		out = append(out, fmt.Sprintf("%s{%s} %g", mf.GetName(), strings.Join(ls, ","), v))
	}
	sort.Strings(out)
	return out
}

// TestKubeProxyMetrics scrapes a running sink's /metrics and checks the
// metrics kube-proxy v1.37 has, with its names, labels and meaning.
func TestKubeProxyMetrics(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "cluster.yaml")
	body := localPolicies + slice("itp", "node-2", "10.244.2.1") + slice("etp", "node-2", "10.244.2.2") + slice("both", "node-1", "10.244.1.3")
	if err := os.WriteFile(manifest, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	synced := make(chan struct{}, 16)
	sink := Sink{Name: "test-sink", Mode: "iptables", New: func(e Env) (Built, error) {
		return Built{Controller: &syncingSink{onSync: func(st SyncStats) { e.OnSync(st); synced <- struct{}{} }}}, nil
	}}
	metrics, health := freeAddr(t), freeAddr(t)
	cfg := Config{FromFile: manifest, NodeName: "node-1", NodeAddresses: []netip.Addr{netip.MustParseAddr("192.168.1.10")},
		SyncPeriod: time.Hour, MetricsAddress: metrics, HealthzAddress: health}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, sink, io.Discard, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("no sync in 10 s")
	}
	// itp's endpoint moves, with a trigger time: one endpoint change, one
	// network programming latency.
	itp := strings.Replace(slice("itp", "node-2", "10.244.2.9"), "metadata: {", fmt.Sprintf("metadata: {annotations: {endpoints.kubernetes.io/last-change-trigger-time: %q}, ", time.Now().UTC().Format(time.RFC3339Nano)), 1)
	tmp := filepath.Join(dir, "new.yaml")
	if err := os.WriteFile(tmp, []byte(localPolicies+itp+slice("etp", "node-2", "10.244.2.2")+slice("both", "node-1", "10.244.1.3")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, manifest); err != nil {
		t.Fatal(err)
	}
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("no second sync in 10 s")
	}
	for _, path := range []string{"/healthz", "/healthz", "/livez"} {
		resp, err := http.Get("http://" + health + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	mfs := scrape(t, metrics)
	fams := ipFamilies()
	var want []string
	perFamily := func(format string) {
		for _, f := range fams {
			want = append(want, fmt.Sprintf(format, f))
		}
	}
	want = append(want,
		"kubeproxy_proxy_healthz_total{code=200} 2", "kubeproxy_proxy_livez_total{code=200} 1",
		// Three services, each with a Service and endpoints, then one
		// endpoint change; handed over since.
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending{} 0", "kubeproxy_sync_proxy_rules_endpoint_changes_total{} 4",
		"kubeproxy_sync_proxy_rules_service_changes_pending{} 0", "kubeproxy_sync_proxy_rules_service_changes_total{} 3")
	perFamily("kubeproxy_sync_proxy_rules_duration_seconds{ip_family=%s} 2")
	perFamily("kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family=%s,traffic_policy=external} 1")
	perFamily("kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family=%s,traffic_policy=internal} 1")
	var got []string
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "kubeproxy_") || strings.HasSuffix(name, "_timestamp_seconds") || name == "kubeproxy_network_programming_duration_seconds" {
			continue
		}
		got = append(got, series(mf)...)
	}
	sort.Strings(want)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kube-proxy's metrics (-want +got):\n%s", diff)
	}
	// The timestamps: set, per family.
	for _, name := range []string{"kubeproxy_sync_proxy_rules_last_timestamp_seconds", "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds"} {
		mf := mfs[name]
		if mf == nil || len(mf.GetMetric()) != len(fams) {
			t.Errorf("%s: %v, want one series per family %v", name, mf, fams)
			continue
		}
		for _, m := range mf.GetMetric() {
			if l := m.GetLabel(); len(l) != 1 || l[0].GetName() != "ip_family" || m.Gauge.GetValue() < float64(time.Now().Add(-time.Minute).Unix()) {
				t.Errorf("%s: %v, want ip_family and a recent time", name, m)
			}
		}
	}
	var prog []string
	if mf := mfs["kubeproxy_network_programming_duration_seconds"]; mf != nil {
		prog = series(mf)
	}
	want = nil
	perFamily("kubeproxy_network_programming_duration_seconds{ip_family=%s} 1")
	if diff := cmp.Diff(want, prog); diff != "" {
		t.Errorf("kubeproxy_network_programming_duration_seconds (-want +got):\n%s", diff)
	}
	// The reference (MetricFamilies) lists every family the running sink
	// serves.
	ref, err := sink.MetricFamilies()
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, f := range ref {
		listed[f.GetName()] = true
	}
	for name := range mfs {
		if !listed[name] {
			t.Errorf("%s served but not in MetricFamilies", name)
		}
	}
}
