package runtime

import (
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/dataplane"
)

// The programming metrics end where the sync ended, not when OnSync is
// called: a controller that logs before reporting does not add the log
// write to them.
func TestProgrammedAt(t *testing.T) {
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	now := start.Add(time.Second) // OnSync called long after the sync
	for _, tc := range []struct {
		name string
		st   dataplane.SyncStats
		want time.Time
	}{
		{"sync", dataplane.SyncStats{Start: start, Duration: 3 * time.Millisecond}, start.Add(3 * time.Millisecond)},
		{"nothing to do", dataplane.SyncStats{Start: start}, start},
		{"no start", dataplane.SyncStats{Duration: time.Millisecond}, now},
	} {
		if got := programmedAt(tc.st, now); !got.Equal(tc.want) {
			t.Errorf("%s: programmedAt = %v, want %v", tc.name, got, tc.want)
		}
	}
}
