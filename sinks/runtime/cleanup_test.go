package runtime

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestCleanupAndUnsupported: --cleanup runs the sink's Cleanup and exits
// (0, or 1 when it fails) without building a controller, is refused by a
// sink without one, and a flag the sink does not use is refused.
func TestCleanupAndUnsupported(t *testing.T) {
	var calls int
	var cleanupErr error
	newSink := func(cleanup bool) Sink {
		s := testSink(func(Env) (Built, error) { t.Error("--cleanup built a controller"); return Built{}, errors.New("no") })
		s.Mode = "test"
		if cleanup {
			s.Cleanup = func(Config, *slog.Logger) error { calls++; return cleanupErr }
		}
		return s
	}
	tests := []struct {
		name      string
		cleanup   bool
		err       error
		args      []string
		status    int
		calls     int
		wantInErr string
	}{
		{"cleanup", true, nil, []string{"--cleanup"}, 0, 1, ""},
		{"cleanup fails", true, errors.New("table busy"), []string{"--cleanup"}, 1, 1, "cleanup: table busy"},
		{"no cleanup", false, nil, []string{"--cleanup"}, 2, 0, "--cleanup: this sink has no cleanup"},
		{"unsupported flag", true, nil, []string{"--cleanup", "--weight", "3"}, 2, 0, `--weight: does not apply to proxy mode "test"`},
	}
	for _, tt := range tests {
		calls, cleanupErr = 0, tt.err
		var stdout, stderr bytes.Buffer
		status := Main(newSink(tt.cleanup), append([]string{"test"}, tt.args...), &stdout, &stderr)
		if status != tt.status || calls != tt.calls || !strings.Contains(stderr.String(), tt.wantInErr) {
			t.Errorf("%s: status %d, %d cleanups, stderr %q; want %d, %d, %q", tt.name, status, calls, stderr.String(), tt.status, tt.calls, tt.wantInErr)
		}
	}
}
