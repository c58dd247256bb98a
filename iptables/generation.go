package iptables

import (
	"bytes"
	"log/slog"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// Defaults of Config.CompareEvery and Config.CompareInterval.
const (
	defaultCompareEvery    = 10
	defaultCompareInterval = 5 * time.Minute
)

// genTracker lets a resync skip reading the nf_tables families' tables
// when nothing was committed since the kernel was last known to hold what
// the Proxier wrote. nf_tables keeps one generation per network namespace
// that every committed transaction increments, whoever commits: for IPv4
// and IPv6, every table, iptables-nft and nft alike. The legacy backend has
// none; its families are always read.
//
// The kernel is "known" as of generation id when the last sync read or
// wrote every nft family and no transaction but its own was committed
// from before its reads (or from the previous known generation) to after
// its writes: the generation moved by exactly the number of its own
// commits (iptables-nft-restore commits once per table section, none for a
// section that changes nothing: the count is an upper bound, and a
// shortfall only means a compare). A foreign commit anywhere in between, a
// failed restore, an unreadable generation or a partial sync over a kernel
// that had changed leaves it unknown, and the next resync compares. What
// could still go unseen is a change that does not move the generation, or
// a foreign commit exactly filling a shortfall of our own: a full compare
// is forced anyway at least every CompareEvery resyncs and every
// CompareInterval.
type genTracker struct {
	read     func() (uint32, error) // nil: no generation (always compare)
	every    int
	interval time.Duration
	log      *slog.Logger
	now      func() time.Time

	known bool
	id    uint32
	snap  *client.Snapshot // the snapshot the kernel was known to hold
	// lastCompare is when every nft family was last read; skips counts
	// the resyncs skipped since.
	lastCompare time.Time
	skips       int
	// commits counts the transactions the current sync committed.
	commits int
	warned  bool
}

// newGenTracker returns the tracker of cfg: the generation of the current
// namespace when the tools run in it (no Run, no dry run), cfg.Generation
// when given, else none.
func newGenTracker(cfg *Config) genTracker {
	g := genTracker{read: cfg.Generation, every: cfg.CompareEvery, interval: cfg.CompareInterval, log: cfg.Log, now: time.Now}
	if g.read == nil && cfg.Run == nil && cfg.DryRun == nil {
		g.read = func() (uint32, error) { return xtables.NFTGeneration(0) }
	}
	if cfg.DryRun != nil {
		g.read = nil
	}
	if g.every == 0 {
		g.every = defaultCompareEvery
	}
	if g.interval == 0 {
		g.interval = defaultCompareInterval
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	return g
}

// genSync is the tracker's view of one sync.
type genSync struct {
	ok     bool   // g0 was read
	g0     uint32 // the generation before the sync
	prev   bool   // the kernel was known as of g0
	unread int    // nft families neither read nor skipped
	skip   bool   // skipping is allowed in this sync
}

// begin reads the generation before a sync of s by the Proxier's
// families, when some family uses nf_tables.
func (g *genTracker) begin(fams []*family, s *client.Snapshot) genSync {
	var gs genSync
	g.commits = 0
	for _, f := range fams {
		if f.backend != xtables.Legacy {
			gs.unread++
		}
	}
	if g.read == nil || gs.unread == 0 {
		return gs
	}
	id, ok := g.readGen()
	gs.ok, gs.g0 = ok, id
	gs.prev = ok && g.known && id == g.id
	gs.skip = gs.prev && s == g.snap && g.skips+1 < g.every && g.now().Sub(g.lastCompare) < g.interval
	return gs
}

// skipRead reports whether a full sync of f may skip reading the kernel:
// an nf_tables family in sync, with nothing committed since the kernel was
// known to hold the same snapshot, and no compare due.
func (gs *genSync) skipRead(f *family) bool {
	if f.backend == xtables.Legacy {
		return false
	}
	gs.unread--
	return gs.skip && f.synced && !f.full
}

// end records what the sync of s leaves known. failed is true when the
// sync returned an error: a failed restore or read, or a service that
// cannot be rendered, which every resync reports again (so it compares).
func (g *genTracker) end(gs genSync, fams []*family, s *client.Snapshot, skipped, failed bool) {
	if g.read == nil || !gs.ok {
		g.known = false
		return
	}
	ok := !failed && (gs.unread == 0 || gs.prev)
	for _, f := range fams {
		if !f.synced || f.full {
			ok = false
		}
	}
	id, read := g.readGen()
	g.known = ok && read && id == gs.g0+uint32(g.commits)
	g.id, g.snap = id, s
	switch {
	case g.known && gs.unread == 0 && !skipped:
		g.lastCompare, g.skips = g.now(), 0
	case skipped:
		g.skips++
	}
}

// wrote counts the nf_tables transactions a restore of input by f's tools
// committed, at most: iptables-nft-restore commits each table section on
// its own (dataplane/rules TestNFTGeneration).
func (g *genTracker) wrote(f *family, input []byte) {
	if f.backend != xtables.Legacy {
		g.commits += bytes.Count(input, []byte("COMMIT\n"))
	}
}

// readGen reads the generation, logging the first failure of a run of
// failures: it only costs a full compare.
func (g *genTracker) readGen() (uint32, bool) {
	id, err := g.read()
	if err != nil {
		if !g.warned {
			g.log.Warn("iptables: cannot read the nf_tables generation; resyncs read every table until it can", "error", err)
			g.warned = true
		}
		return 0, false
	}
	g.warned = false
	return id, true
}
