package runtime

import (
	"time"

	"github.com/proxysinks/proxysinks/host/quarantine"
)

// SyncStats are what a controller reports of one sync (Env.OnSync) or
// resync: the metrics and the health are made of them.
type SyncStats struct {
	// Start is when the sync began (zero: unknown, the runtime takes the
	// time it is told).
	Start time.Time
	// Duration is how long it took.
	Duration time.Duration
	// Services is the number of services in the state synced (a resync,
	// which reads no snapshot, may leave it 0 or -1).
	Services int
	// Writes is the number of kernel objects written.
	Writes int
	// Failed is the number of objects that failed (retried next sync).
	Failed int
	// NoLocalEndpoints counts services with a Local traffic policy and no
	// local endpoint (kube-proxy's metric).
	NoLocalEndpoints int
	// Quarantined are the objects the kernel refused alone, retried with
	// backoff: all of them, after every sync. They do not fail the sync:
	// the rest of the node is programmed, and health stays good.
	Quarantined []quarantine.Entry
	// Err is why the sync failed as a whole (nil: it programmed the
	// kernel, but for the objects quarantined).
	Err error
}

// programmedAt is when a sync programmed the kernel: where it ended
// (Start+Duration), or now for stats without a start.
func programmedAt(st SyncStats, now time.Time) time.Time {
	if st.Start.IsZero() {
		return now
	}
	return st.Start.Add(st.Duration)
}
