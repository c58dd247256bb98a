package runtime

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
)

// splitSink is a SplitResyncer whose kernel read waits for release.
type splitSink struct {
	snapshots chan int // the services of each snapshot
	started   chan struct{}
	release   chan struct{}
	finished  chan struct{}
}

func (s *splitSink) Snapshot(snap *client.Snapshot) { s.snapshots <- len(snap.Services()) }
func (s *splitSink) Resync() SyncStats {
	panic("Resync called on a SplitResyncer")
}
func (s *splitSink) StartResync() func() func() SyncStats {
	s.started <- struct{}{}
	return func() func() SyncStats {
		<-s.release
		return func() SyncStats {
			s.finished <- struct{}{}
			return SyncStats{}
		}
	}
}

const splitService = `apiVersion: v1
kind: Service
metadata: {name: %s, namespace: default}
spec:
  clusterIP: %s
  clusterIPs: [%s]
  ports: [{name: http, protocol: TCP, port: 80}]
`

// TestSplitResync: while a SplitResyncer's kernel read runs, the loop goes
// on handing snapshots over; the finish is called on the loop once the
// read returned, and no second resync starts while one reads.
func TestSplitResync(t *testing.T) {
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
	svc := func(name, ip string) string { return fmt.Sprintf(splitService, name, ip, ip) }
	write(svc("a", "10.96.0.1"))

	s := &splitSink{snapshots: make(chan int, 16), started: make(chan struct{}, 16), release: make(chan struct{}), finished: make(chan struct{}, 16)}
	sink := Sink{Name: "test-sink", Mode: "ipvs", New: func(Env) (Built, error) { return Built{Controller: s}, nil }}
	cfg := Config{FromFile: manifest, NodeName: "node-1", NodeAddresses: []netip.Addr{netip.MustParseAddr("192.168.1.10")},
		SyncPeriod: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, sink, io.Discard, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	defer func() {
		cancel()
		close(s.release)
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s in 10 s", what)
		}
	}
	snapshot := func(want int) {
		t.Helper()
		select {
		case n := <-s.snapshots:
			if n != want {
				t.Fatalf("a snapshot of %d services, want %d", n, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no snapshot of %d services in 10 s", want)
		}
	}
	snapshot(1)
	wait("resync", s.started)
	// The read is held: a change still reaches the controller.
	write(svc("a", "10.96.0.1") + "---\n" + svc("b", "10.96.0.2"))
	snapshot(2)
	// Several periods pass: no second resync while the first reads.
	time.Sleep(3 * cfg.SyncPeriod)
	select {
	case <-s.started:
		t.Fatal("a second resync started while the first read")
	case <-s.finished:
		t.Fatal("the resync finished before its read returned")
	default:
	}
	s.release <- struct{}{}
	wait("finish", s.finished)
}
