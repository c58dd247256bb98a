package runtime

import (
	"testing"
	"time"
)

// The programming metrics end where the sync ended, not when OnSync is
// called: a controller that logs before reporting does not add the log
// write to them.
func TestProgrammedAt(t *testing.T) {
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	now := start.Add(time.Second) // OnSync called long after the sync
	for _, tc := range []struct {
		name string
		st   SyncStats
		want time.Time
	}{
		{"sync", SyncStats{Start: start, Duration: 3 * time.Millisecond}, start.Add(3 * time.Millisecond)},
		{"nothing to do", SyncStats{Start: start}, start},
		{"no start", SyncStats{Duration: time.Millisecond}, now},
	} {
		if got := programmedAt(tc.st, now); !got.Equal(tc.want) {
			t.Errorf("%s: programmedAt = %v, want %v", tc.name, got, tc.want)
		}
	}
}
