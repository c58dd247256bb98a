package runtime

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/client"
)

// TestStaleWatchLogsChanges: the runtime logs the source turning stale
// (with the reason), a new reason, and the recovery, each once.
func TestStaleWatchLogsChanges(t *testing.T) {
	var buf bytes.Buffer
	st := client.Stats{Stale: true, StaleReason: "no first snapshot yet: a.yaml: reads as empty"}
	w := newStaleWatch(func() client.Stats { return st }, slog.New(slog.NewTextHandler(&buf, nil)))
	w.check()
	w.check()
	st.StaleReason = "b.yaml#1: not YAML"
	w.check()
	st = client.Stats{}
	w.check()
	w.check()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d log lines, want 3:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{"a.yaml: reads as empty", "b.yaml#1: not YAML", "source trustworthy again"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d %q lacks %q", i, lines[i], want)
		}
	}
}
