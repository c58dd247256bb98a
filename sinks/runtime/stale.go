package runtime

import (
	"log/slog"
	"time"

	"github.com/proxysinks/proxysinks/client"
)

// StaleCheckInterval is how often the running sink reads the source's
// Stats to log when it turns stale or trustworthy again.
var StaleCheckInterval = time.Second

// staleWatch logs the source's staleness when it changes: while the source
// cannot give a state it trusts, the sink keeps the kernel as it is (the
// last good state, or nothing before the first snapshot).
type staleWatch struct {
	stats func() client.Stats
	log   *slog.Logger
	last  string
}

func newStaleWatch(stats func() client.Stats, log *slog.Logger) *staleWatch {
	return &staleWatch{stats: stats, log: log}
}

func (w *staleWatch) check() {
	st := w.stats()
	reason := ""
	if st.Stale {
		reason = st.StaleReason
	}
	if reason == w.last {
		return
	}
	if reason != "" {
		w.log.Warn("source stale: keeping the kernel as it is (the last good state) until the source can be trusted", "reason", reason)
	} else {
		w.log.Info("source trustworthy again", "was", w.last)
	}
	w.last = reason
}
