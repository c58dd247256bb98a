package runtime

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
)

// countingController counts the snapshots it is given.
type countingController struct{ snapshots int }

func (c *countingController) Snapshot(*client.Snapshot) { c.snapshots++ }
func (c *countingController) Resync() SyncStats         { return SyncStats{} }

// TestDryRunBoundedWait: a dry run against an API server that never
// answers ends after DryRunWait, exit status 1, naming the reason,
// instead of waiting forever.
func TestDryRunBoundedWait(t *testing.T) {
	defer func(d time.Duration) { DryRunWait = d }(DryRunWait)
	DryRunWait = 2 * time.Second
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	// Port 1 on loopback: nothing listens, every list fails and is retried.
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctl := &countingController{}
	sink := Sink{Name: "test-sink", Mode: "test", New: func(Env) (Built, error) { return Built{Controller: ctl}, nil }}
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(sink, []string{"test-sink", "--dry-run", "--kubeconfig", kubeconfig, "--node-name", "n",
			"--node-address", "192.168.1.10", "--metrics-bind-address=", "--healthz-bind-address="}, &stdout, &stderr)
	}()
	select {
	case status := <-done:
		if status != 1 || !strings.Contains(stderr.String(), "the source gave no state within 2s") {
			t.Errorf("status %d, stderr %q; want 1 and the bounded wait named", status, stderr.String())
		}
		if ctl.snapshots != 0 {
			t.Errorf("%d snapshots given to the controller, want 0", ctl.snapshots)
		}
	case <-time.After(time.Minute):
		t.Fatal("the dry run still waits a minute later")
	}
}
