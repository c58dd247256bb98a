package runtime

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/quarantine"
)

// refusedSink reports, at every sync, one virtual server of service "bad"
// quarantined (whole false) or the sync failed as a whole (whole true),
// and counts the retries.
type refusedSink struct {
	env   Env
	whole bool
	mu    sync.Mutex
	tries int
}

func (s *refusedSink) stats() SyncStats {
	if s.whole {
		return SyncStats{Start: time.Now(), Err: fmt.Errorf("netlink: socket closed")}
	}
	e := quarantine.Entry{Object: quarantine.Object{Kind: "VirtualServer", Name: "TCP/10.96.0.2:80",
		Addr: netip.MustParseAddr("10.96.0.2"), Port: 80}, Err: fmt.Errorf("invalid argument"), Next: time.Now().Add(50 * time.Millisecond)}
	return SyncStats{Start: time.Now(), Failed: 1, Quarantined: []quarantine.Entry{e}}
}
func (s *refusedSink) Snapshot(*client.Snapshot) { s.env.OnSync(s.stats()) }
func (s *refusedSink) Resync() SyncStats         { st := s.stats(); s.env.OnSync(st); return st }
func (s *refusedSink) Retry() SyncStats {
	s.mu.Lock()
	s.tries++
	s.mu.Unlock()
	st := s.stats()
	s.env.OnSync(st)
	return st
}

const refusedCluster = `apiVersion: v1
kind: Service
metadata: {name: bad, namespace: default}
spec:
  clusterIP: 10.96.0.2
  clusterIPs: [10.96.0.2]
  ports: [{name: http, protocol: TCP, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  healthCheckNodePort: %d
  clusterIP: 10.96.0.3
  clusterIPs: [10.96.0.3]
  ports: [{name: http, protocol: TCP, port: 80, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: default
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, protocol: TCP, port: 80}]
endpoints:
- addresses: [10.244.1.2]
  nodeName: node-1
  conditions: {ready: true}
`

// freePort returns a TCP port free on 127.0.0.1 just now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer is a log writer safe for the loop and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// TestQuarantineKeepsHealth: an object the kernel refused alone leaves
// /livez, /healthz and another eTP=Local service's health-check node port
// at 200 long past kube-proxy's timeout; the metric and the log name it
// and its Service; it is retried when due. A sync that fails as a whole
// still fails all three after the timeout.
func TestQuarantineKeepsHealth(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprintf("whole=%v", whole), func(t *testing.T) {
			dir := t.TempDir()
			manifest := filepath.Join(dir, "cluster.yaml")
			hc := freePort(t)
			if err := os.WriteFile(manifest, []byte(fmt.Sprintf(refusedCluster, hc)), 0o644); err != nil {
				t.Fatal(err)
			}
			s := &refusedSink{whole: whole}
			sink := Sink{Name: "test-sink", Mode: "ipvs", New: func(e Env) (Built, error) { s.env = e; return Built{Controller: s}, nil }}
			metrics, health := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", freePort(t))
			cfg := Config{FromFile: manifest, NodeName: "node-1", NodeAddresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")},
				SyncPeriod: 200 * time.Millisecond, MinSyncPeriod: 10 * time.Millisecond, MetricsAddress: metrics, HealthzAddress: health}
			var logs syncBuffer
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Run(ctx, cfg, sink, io.Discard, slog.New(slog.NewTextHandler(&logs, nil))) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			}()
			get := func(url string) (int, string) {
				t.Helper()
				resp, err := http.Get(url)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			// Past twice the timeout (2 sync periods).
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				if code, _ := get(fmt.Sprintf("http://127.0.0.1:%d/", hc)); code != 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(4 * cfg.SyncPeriod)
			want := http.StatusOK
			if whole {
				want = http.StatusServiceUnavailable
			}
			for _, url := range []string{"http://" + health + "/livez", "http://" + health + "/healthz", fmt.Sprintf("http://127.0.0.1:%d/", hc)} {
				if code, body := get(url); code != want {
					t.Errorf("%s: %d %s; want %d", url, code, body, want)
				}
			}
			if whole {
				return
			}
			_, m := get("http://" + metrics + "/metrics")
			if !strings.Contains(m, `proxysinks_quarantined_objects{kind="VirtualServer"} 1`) {
				t.Errorf("metrics lack the quarantined virtual server:\n%s", grepLines(m, "quarantined"))
			}
			if l := logs.String(); !strings.Contains(l, "object=TCP/10.96.0.2:80") || !strings.Contains(l, "service=default/bad") {
				t.Errorf("no log line naming the object and its service:\n%s", l)
			}
			s.mu.Lock()
			tries := s.tries
			s.mu.Unlock()
			if tries == 0 {
				t.Errorf("the quarantined object was never retried")
			}
		})
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// recordedEvents is an EventRecorder that keeps the Events.
type recordedEvents []string

func (r *recordedEvents) Refused(ns, name, msg string) { *r = append(*r, ns+"/"+name+": "+msg) }

// TestQuarantineEvents: an object named by its address gets an Event on
// its Service, found in the last snapshot, at most one per eventInterval;
// one that leaves quarantine and comes back gets a new one.
func TestQuarantineEvents(t *testing.T) {
	svc := &client.Service{Namespace: "ns", Name: "lb", Type: client.LoadBalancer,
		Ports: []client.Port{{Protocol: client.TCP, Port: 443, NodePort: 30443}}}
	svc.ClusterIPs.Add(netip.MustParseAddr("10.96.0.9"))
	svc.LoadBalancerIPs.Add(netip.MustParseAddr("192.0.2.9"))
	snap := client.NewSnapshot([]*client.ServiceEndpoints{{Service: svc}}, nil)
	now := time.Unix(1000, 0)
	var ev recordedEvents
	q := newQuarantineReport(slog.New(slog.DiscardHandler), nil)
	q.now, q.events = func() time.Time { return now }, &ev
	q.snapshot(snap)
	entry := quarantine.Entry{Object: quarantine.Object{Kind: "SetEntry", Name: "KUBE-LOAD-BALANCER-SOURCE-CIDR 192.0.2.9,tcp:443,0.0.0.0/0",
		Addr: netip.MustParseAddr("192.0.2.9"), Port: 443}, Err: fmt.Errorf("invalid CIDR")}
	node := quarantine.Entry{Object: quarantine.Object{Kind: "SetEntry", Name: "KUBE-NODE-PORT-TCP 30443", Port: 30443}, Err: fmt.Errorf("x")}
	q.report(SyncStats{Quarantined: []quarantine.Entry{entry, node}})
	now = now.Add(time.Minute)
	q.report(SyncStats{Quarantined: []quarantine.Entry{entry}})
	want := []string{"ns/lb: the node's kernel refused SetEntry KUBE-LOAD-BALANCER-SOURCE-CIDR 192.0.2.9,tcp:443,0.0.0.0/0: invalid CIDR; retried with backoff",
		"ns/lb: the node's kernel refused SetEntry KUBE-NODE-PORT-TCP 30443: x; retried with backoff"}
	if d := cmp.Diff(want, []string(ev)); d != "" {
		t.Errorf("events -want +got:\n%s", d)
	}
	now = now.Add(eventInterval)
	q.report(SyncStats{Quarantined: []quarantine.Entry{entry}})
	q.report(SyncStats{})
	q.report(SyncStats{Quarantined: []quarantine.Entry{entry}})
	if len(ev) != 4 {
		t.Errorf("%d events; want one more after eventInterval and one when it came back:\n%s", len(ev), strings.Join(ev, "\n"))
	}
}
