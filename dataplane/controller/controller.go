// Package controller is the core both IPVS controllers share (fullstate,
// incremental): their records of the four kinds of kernel objects, the
// round that reads the kernel (adoption at the first sync, drift at a
// resync), has the controller decide what changed, writes the plan through
// the dataplane.Applier, records what succeeded and reaps terminated
// destinations; the split resync; and the report and log of every round.
// A controller keeps only how it decides what changed.
package controller

import (
	"log/slog"
	"sync"
	"time"

	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/diffstore"
	"github.com/proxysinks/proxysinks/dataplane/objects"
	"github.com/proxysinks/proxysinks/dataplane/render"
)

// Reader reads what the kernel holds of the sink's objects
// (dataplane.Node.Read); nil in a dry run.
type Reader interface {
	Read() (*dataplane.State, error)
}

// Record is a controller's record of one kind of object: what it wants,
// and what it believes the kernel holds.
type Record[K comparable, V any] interface {
	objects.Store[K, V]
	// Changes returns the objects to write (created or updated) and to
	// delete since the last round was applied; changed and deleted are
	// empty slices the record may append to.
	Changes(changed, deleted []diffstore.Change[K, V]) ([]diffstore.Change[K, V], []diffstore.Change[K, V])
	// Applied records that changed and deleted (what Changes returned)
	// were written, except the keys failed reports (nil: none failed).
	Applied(changed, deleted []diffstore.Change[K, V], failed func(K) bool)
	// Len returns the number of objects recorded.
	Len() int
}

// Counts are what a controller's decision counted of the cluster: its
// services, the problems rendering them, and those with a Local traffic
// policy and no local endpoint (dataplane.SyncStats).
type Counts struct {
	Services, RenderErrors, NoLocalEndpoints int
}

// Records are a controller's records of the four kinds of objects.
type Records struct {
	Servers  Record[objects.ServerKey, render.ServerOptions]
	Dests    Record[objects.DestKey, render.DestOptions]
	Bindings Record[objects.AddrKey, struct{}]
	Entries  Record[objects.EntryKey, struct{}]
}

// Len returns the number of objects recorded of each kind.
func (r *Records) Len() (servers, dests, bindings, entries int) {
	return r.Servers.Len(), r.Dests.Len(), r.Bindings.Len(), r.Entries.Len()
}

// Core is what a controller is built on. Its methods expect Mu held,
// except StartResync, which takes it.
type Core struct {
	Applier *dataplane.Applier
	// Reader reads the kernel, for adoption and resyncs; nil for none.
	Reader Reader
	Log    *slog.Logger
	// OnSync, when set, is called after every round (metrics); a
	// controller points it at its own OnSync.
	OnSync func(dataplane.SyncStats)
	// Keys are the compact keys of the records.
	Keys    objects.Keys
	Records Records
	// ResyncServices reports that a resync's stats count the services (a
	// controller whose resync renders, as the incremental one): they are
	// logged then too.
	ResyncServices bool
	// Mu serializes the controller: its events or snapshots, its rounds.
	Mu sync.Mutex

	adopted bool
	synced  bool
	changes objects.Changes // reused between rounds
	// retryAll is set during a resync: its plan writes every
	// quarantined object, due or not.
	retryAll bool
}

// Init sets the core's parts; log nil is slog.Default.
func (c *Core) Init(applier *dataplane.Applier, reader Reader, log *slog.Logger, records Records) {
	if log == nil {
		log = slog.Default()
	}
	c.Applier, c.Reader, c.Log, c.Records = applier, reader, log, records
}

// Synced reports whether a round succeeded in reading (or had no need to
// read) the kernel and applied.
func (c *Core) Synced() bool { return c.synced }

// Sync runs a round ("sync") of decide, which records what the round
// wants and counts the cluster; the kernel is read first when it was never
// adopted.
func (c *Core) Sync(decide func() Counts) dataplane.SyncStats {
	st := dataplane.SyncStats{Start: time.Now()}
	if !c.adopted && c.Reader != nil {
		k, err := c.Reader.Read()
		return c.Round(st, "sync", k, err, decide)
	}
	return c.Round(st, "sync", nil, nil, decide)
}

// Resync re-reads the kernel and runs a round ("resync") of decide, which
// repairs the drift; before the first sync it returns first().
func (c *Core) Resync(first func() dataplane.SyncStats, decide func() Counts) dataplane.SyncStats {
	if !c.synced {
		return first()
	}
	st := dataplane.SyncStats{Start: time.Now()}
	if c.Reader == nil {
		return c.Round(st, "resync", nil, nil, decide)
	}
	k, err := c.Reader.Read()
	return c.Round(st, "resync", k, err, decide)
}

// Retry runs a round ("retry") that writes only the changes the last
// rounds left unwritten, whose retry is due (dataplane.Applier.Quarantine):
// decide must add nothing new (a controller's resync decision, which reads
// no snapshot). Before the first sync it does nothing.
func (c *Core) Retry(decide func() Counts) dataplane.SyncStats {
	st := dataplane.SyncStats{Start: time.Now()}
	if !c.synced {
		return st
	}
	return c.Round(st, "retry", nil, nil, decide)
}

// StartResync begins a resync whose kernel read runs apart from the
// rounds, so that a change arriving meanwhile waits for no read of the
// whole kernel (runtime.SplitResyncer): read (on any goroutine) reads the
// kernel while rounds go on; finish, called once read returned, on the
// goroutine that runs the rounds, runs a round of decide with what the
// read showed, leaving alone the objects written since the read started
// (dataplane.Applier.ReadApart). Before the first sync, or without a
// reader, read does nothing and finish is resync. It takes Mu.
func (c *Core) StartResync(resync func() dataplane.SyncStats, decide func() Counts) (read func() (finish func() dataplane.SyncStats)) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if !c.synced || c.Reader == nil {
		return func() func() dataplane.SyncStats { return resync }
	}
	return c.Applier.ReadApart(&c.Mu, c.Reader, func(start time.Time, k *dataplane.State, err error) dataplane.SyncStats {
		return c.Round(dataplane.SyncStats{Start: start}, "resync", k, err, decide)
	})
}

// Round is one round once the kernel was read: k (nil when it was not)
// or the read's error. It reconciles the records with k, has decide
// record what the round wants, writes what changed, reaps, and reports.
// On a read error it writes nothing: without the kernel's state the
// writes would be wrong.
func (c *Core) Round(st dataplane.SyncStats, what string, k *dataplane.State, err error, decide func() Counts) dataplane.SyncStats {
	if err != nil {
		st.Err = err
		c.finish(&st, what)
		return st
	}
	if k != nil {
		c.reconcile(k)
	}
	c.adopted = true
	n := decide()
	st.Services, st.RenderErrors, st.NoLocalEndpoints = n.Services, n.RenderErrors, n.NoLocalEndpoints
	c.retryAll = what == "resync"
	c.apply(&st)
	c.retryAll = false
	c.synced = true
	c.finish(&st, what)
	return st
}

// reconcile makes the records' view of the kernel match k.
func (c *Core) reconcile(k *dataplane.State) {
	r := &c.Records
	c.Keys.Reconcile(objects.Stores{Servers: r.Servers, Dests: r.Dests, Bindings: r.Bindings, Entries: r.Entries},
		k, c.Applier.IsTerminating)
}

// Plan returns the writes the records' changes need.
func (c *Core) Plan() dataplane.Plan {
	ch, r := &c.changes, &c.Records
	ch.Servers, ch.DeletedServers = r.Servers.Changes(ch.Servers[:0], ch.DeletedServers[:0])
	ch.Dests, ch.DeletedDests = r.Dests.Changes(ch.Dests[:0], ch.DeletedDests[:0])
	ch.Bindings, ch.DeletedBindings = r.Bindings.Changes(ch.Bindings[:0], ch.DeletedBindings[:0])
	ch.Entries, ch.DeletedEntries = r.Entries.Changes(ch.Entries[:0], ch.DeletedEntries[:0])
	p := c.Keys.Plan(ch)
	p.RetryAll = c.retryAll
	return p
}

// ApplyPlan writes p, which Plan returned, and records what succeeded;
// what failed, or was held back by its quarantine, stays a change,
// retried after the next round.
func (c *Core) ApplyPlan(p dataplane.Plan) dataplane.Result {
	if p.Empty() {
		c.Applier.ClearQuarantine()
		return dataplane.Result{Quarantining: c.Applier.Quarantine != nil}
	}
	res := c.Applier.Apply(p)
	ch, r := &c.changes, &c.Records
	if res.Failed.Len() == 0 {
		r.Servers.Applied(ch.Servers, ch.DeletedServers, nil)
		r.Dests.Applied(ch.Dests, ch.DeletedDests, nil)
		r.Bindings.Applied(ch.Bindings, ch.DeletedBindings, nil)
		r.Entries.Applied(ch.Entries, ch.DeletedEntries, nil)
		return res
	}
	f := c.Keys.Failures(&res)
	r.Servers.Applied(ch.Servers, ch.DeletedServers, f.Server)
	r.Dests.Applied(ch.Dests, ch.DeletedDests, f.Dest)
	r.Bindings.Applied(ch.Bindings, ch.DeletedBindings, f.Addr)
	r.Entries.Applied(ch.Entries, ch.DeletedEntries, f.Entry)
	return res
}

// apply writes the round's changes, counts them in st and reaps.
func (c *Core) apply(st *dataplane.SyncStats) {
	res := c.ApplyPlan(c.Plan())
	st.Writes, st.Failed = res.Writes, res.Failed.Len()-res.Held
	st.Quarantined = res.Quarantined
	if err := res.WholeErr(); err != nil {
		st.Err = err
	}
	c.Applier.ReapInto(st)
}

// finish reports and logs a round; what is "sync" (events or a snapshot,
// with their services) or "resync" (the periodic repair). The report
// comes first: the kernel is programmed, and the metrics of the time until
// then must not count writing the log line. A round that failed in part
// logs at Error, one that wrote at Info, one that wrote nothing at Debug
// (an unchanged cluster's resyncs stay out of the log).
func (c *Core) finish(st *dataplane.SyncStats, what string) {
	st.Duration = time.Since(st.Start)
	if c.OnSync != nil {
		c.OnSync(*st)
	}
	attrs := st.LogAttrs(what == "sync" || c.ResyncServices)
	switch {
	case st.Err != nil:
		c.Log.Error(what+" failed in part; failed objects are retried at the next sync", attrs...)
	case st.Failed > 0:
		c.Log.Warn(what+": objects refused are quarantined, retried alone with backoff", append(attrs, "duration", st.Duration)...)
	case st.Writes > 0:
		c.Log.Info(what, append(attrs, "duration", st.Duration)...)
	default:
		c.Log.Debug(what, append(attrs, "duration", st.Duration)...)
	}
}

// Diffstore is a diffstore.Store as a Record: its rounds (Reset, Set,
// Done) decide what changed.
type Diffstore[K comparable, V any] struct{ *diffstore.Store[K, V] }

// Changes returns the store's changes of its last round.
func (d Diffstore[K, V]) Changes(_, _ []diffstore.Change[K, V]) ([]diffstore.Change[K, V], []diffstore.Change[K, V]) {
	return d.Changed(), d.Deleted()
}

// Applied records the round's changes as applied, but the failed ones.
func (d Diffstore[K, V]) Applied(_, _ []diffstore.Change[K, V], failed func(K) bool) {
	d.AppliedAll(failed)
}
