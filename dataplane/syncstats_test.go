package dataplane

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestSyncStatsLogAttrs(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name         string
		st           SyncStats
		withServices bool
		want         []any
	}{
		{"sync", SyncStats{Services: 3, Writes: 2}, true, []any{"services", 3, "writes", 2}},
		{"resync: no services to count", SyncStats{Writes: 1}, false, []any{"writes", 1}},
		{"failed", SyncStats{Services: 1, Writes: 4, Failed: 2, Err: boom}, true, []any{"services", 1, "writes", 4, "failed", 2, "error", boom}},
	} {
		if diff := cmp.Diff(tc.want, tc.st.LogAttrs(tc.withServices), cmpopts.EquateErrors()); diff != "" {
			t.Errorf("%s: LogAttrs (-want +got):\n%s", tc.name, diff)
		}
	}
}
