package runtime

import "time"

// resyncSchedule times the periodic resync: SyncPeriod after the first
// sync and after each resync ended, as kube-proxy times its periodic sync
// from the last one. A plain ticker would have a tick waiting after any
// sync longer than the period (a first sync of tens of thousands of
// services on a slow machine), and a resync, which reads the whole kernel
// back, would follow it at once.
type resyncSchedule struct {
	t      *time.Ticker
	period time.Duration
	first  bool // the first sync ended
}

func newResyncSchedule(period time.Duration) *resyncSchedule {
	return &resyncSchedule{t: time.NewTicker(period), period: period}
}

// C delivers the resync times.
func (r *resyncSchedule) C() <-chan time.Time { return r.t.C }

// synced is called after a snapshot's sync: the first one starts the
// period. Later ones do not move it, so that a stream of changes cannot
// put the resync (the repair of drift) off for ever.
func (r *resyncSchedule) synced() {
	if !r.first {
		r.first = true
		r.t.Reset(r.period) // drops a tick that came during the sync (Go ≥ 1.23)
	}
}

// resynced is called after a resync: the next one is a period later.
func (r *resyncSchedule) resynced() { r.t.Reset(r.period) }

func (r *resyncSchedule) stop() { r.t.Stop() }
