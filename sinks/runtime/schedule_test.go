package runtime

import (
	"testing"
	"time"
)

// TestResyncSchedule: a first sync or a resync longer than the period is
// not followed by a resync at once; later snapshot syncs do not put the
// resync off.
func TestResyncSchedule(t *testing.T) {
	const period = time.Second
	// quiet fails when a resync is due within a fifth of the period (a
	// tick is waiting or fires early).
	quiet := func(r *resyncSchedule, after string) {
		t.Helper()
		select {
		case <-r.C():
			t.Errorf("a resync due at once after %s", after)
		case <-time.After(period / 5):
		}
	}
	r := newResyncSchedule(period)
	defer r.stop()
	time.Sleep(period + period/3) // a first sync longer than the period
	r.synced()
	quiet(r, "a first sync longer than the period")

	<-r.C()                       // the resync is due...
	time.Sleep(period + period/3) // ...and takes longer than the period
	r.resynced()
	quiet(r, "a resync longer than the period")

	// A snapshot sync after the first does not move the resync: one that
	// ends after the resync was due leaves it due.
	time.Sleep(period + period/3)
	r.synced()
	select {
	case <-r.C():
	case <-time.After(period / 5):
		t.Error("a later snapshot sync put the due resync off")
	}
}
