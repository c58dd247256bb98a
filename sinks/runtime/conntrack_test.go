package runtime

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/conntrack"
	"github.com/proxysinks/proxysinks/host/kernel"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// syncingSink reports a successful sync of every snapshot, as the sinks'
// controllers do (Env.OnSync).
type syncingSink struct{ onSync func(SyncStats) }

func (s *syncingSink) Snapshot(*client.Snapshot) { s.onSync(SyncStats{}) }
func (s *syncingSink) Resync() SyncStats         { return SyncStats{} }

// recordingCT records what each reconcile was asked for: the frontends of
// the IPv4 Want.
type recordingCT struct{ wants chan map[netip.AddrPort]int }

func (r *recordingCT) ReconcileUDP(ipv6 bool, w *conntrack.Want) (int, error) {
	if !ipv6 {
		m := map[netip.AddrPort]int{}
		for k, eps := range w.Frontends {
			m[k] = len(eps)
		}
		r.wants <- m
	}
	return 0, nil
}

const udpService = `apiVersion: v1
kind: Service
metadata: {name: dns, namespace: default}
spec:
  clusterIP: 10.96.0.10
  clusterIPs: [10.96.0.10]
  ports: [{name: dns, protocol: UDP, port: 53}]
`

const udpSlice = `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: dns-1, namespace: default, labels: {kubernetes.io/service-name: dns}}
addressType: IPv4
ports: [{name: dns, protocol: UDP, port: 5353}]
endpoints: [{addresses: [10.244.1.5], conditions: {ready: true}}]
`

// TestConntrackReconcile: a sink that gives the runtime its conntrack
// (Built.Conntrack) has its UDP flows reconciled after the sync of a
// snapshot in which a UDP service's endpoints changed, and only then.
func TestConntrackReconcile(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "cluster.yaml")
	write := func(body string) {
		t.Helper()
		tmp := filepath.Join(dir, "new.yaml")
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, manifest); err != nil {
			t.Fatal(err)
		}
	}
	write(udpService)
	ct := &recordingCT{wants: make(chan map[netip.AddrPort]int, 16)}
	sink := Sink{Name: "test-sink", Mode: "iptables", New: func(e Env) (Built, error) {
		return Built{Controller: &syncingSink{onSync: e.OnSync}, Conntrack: ct}, nil
	}}
	cfg := Config{FromFile: manifest, NodeName: "node-1", NodeAddresses: []netip.Addr{netip.MustParseAddr("192.168.1.10")}, SyncPeriod: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, sink, io.Discard, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	// The first snapshot: the UDP service has no endpoint, nothing
	// changed; then its first endpoint arrives.
	time.Sleep(500 * time.Millisecond)
	write(udpService + udpSlice)
	select {
	case got := <-ct.wants:
		want := map[netip.AddrPort]int{netip.MustParseAddrPort("10.96.0.10:53"): 1}
		if len(got) != 1 || got[netip.MustParseAddrPort("10.96.0.10:53")] != 1 {
			t.Fatalf("reconciled with frontends %v, want %v", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reconcile in 10 s after the UDP service's first endpoint")
	}
	select {
	case got := <-ct.wants:
		t.Fatalf("a second reconcile (%v) without a change", got)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestConntrackFlags: the --conntrack-* flags fill Config.Conntrack, with
// kube-proxy's defaults; a negative value is refused by name.
func TestConntrackFlags(t *testing.T) {
	dry := []string{"--dry-run", "--from-file", "../../examples/demo/cluster.yaml", "--node-name", "demo-node", "--node-address", "10.244.2.1"}
	status, cfg, _, stderr := main(t, dry...)
	if want := conntrack.Defaults(); status != 0 || cfg.Conntrack != want {
		t.Errorf("defaults: status %d, %+v; want %+v\n%s", status, cfg.Conntrack, want, stderr)
	}
	status, cfg, _, stderr = main(t, append(dry, "--conntrack-max-per-core", "0", "--conntrack-tcp-timeout-established", "0s",
		"--conntrack-tcp-be-liberal", "--conntrack-udp-timeout", "45s", "--conntrack-udp-timeout-stream", "3m")...)
	want := conntrack.Settings{Min: 128 * 1024, TCPCloseWaitTimeout: time.Hour, TCPBeLiberal: true, UDPTimeout: 45 * time.Second, UDPStreamTimeout: 3 * time.Minute}
	if status != 0 || cfg.Conntrack != want {
		t.Errorf("flags: status %d, %+v; want %+v\n%s", status, cfg.Conntrack, want, stderr)
	}
	if status, _, _, stderr := main(t, append(dry, "--conntrack-udp-timeout", "-1s")...); status != 2 || !strings.Contains(stderr, "--conntrack-udp-timeout: -1s is negative") {
		t.Errorf("a negative timeout: status %d, %q; want 2 naming the flag", status, stderr)
	}
}

// TestApplyConntrackKernel applies settings as Run does, in a fresh
// network namespace: the namespace holds them, the host keeps its own.
func TestApplyConntrackKernel(t *testing.T) {
	const name = conntrack.SysctlUDPTimeout
	host, err := kernel.Sysctl{}.Get(name)
	if err != nil {
		nstest.Missing(t, "conntrack sysctls (nf_conntrack): %v", err)
	}
	want := 47
	if host == want {
		want = 48
	}
	ns := nstest.New(t)
	var got int
	err = ns.Do(func() error {
		if err := applyConntrack(conntrack.Settings{UDPTimeout: time.Duration(want) * time.Second}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
			return err
		}
		var err error
		got, err = kernel.Sysctl{}.Get(name)
		return err
	})
	if err != nil || got != want {
		t.Fatalf("in the namespace: %s = %d, %v; want %d", name, got, err, want)
	}
	if now, err := (kernel.Sysctl{}).Get(name); err != nil || now != host {
		t.Errorf("the host's %s is %d (%v), was %d", name, now, err, host)
	}
}
