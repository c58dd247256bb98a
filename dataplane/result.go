package dataplane

import (
	"maps"
	"net/netip"
	"sort"
	"time"

	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/host/quarantine"
)

// ObjectMap maps objects of a plan, by kind, to a value: the error of each
// object that failed (Result.Failed), or the objects written during a
// recording (Applier.Track, State.Written). A nil map holds nothing.
type ObjectMap[V any] struct {
	Servers  map[render.VirtualServer]V
	Dests    map[render.Destination]V
	Bindings map[netip.Addr]V
	Entries  map[render.SetEntry]V
}

// Len returns how many objects the map holds.
func (m *ObjectMap[V]) Len() int {
	return len(m.Servers) + len(m.Dests) + len(m.Bindings) + len(m.Entries)
}

// Server reports whether the map holds vs.
func (m *ObjectMap[V]) Server(vs render.VirtualServer) bool { _, ok := m.Servers[vs]; return ok }

// Dest reports whether the map holds d.
func (m *ObjectMap[V]) Dest(d render.Destination) bool { _, ok := m.Dests[d]; return ok }

// Binding reports whether the map holds the binding of a.
func (m *ObjectMap[V]) Binding(a netip.Addr) bool { _, ok := m.Bindings[a]; return ok }

// Entry reports whether the map holds e.
func (m *ObjectMap[V]) Entry(e render.SetEntry) bool { _, ok := m.Entries[e]; return ok }

// addAll adds every object of o to m.
func (m *ObjectMap[V]) addAll(o *ObjectMap[V]) {
	copyInto(&m.Servers, o.Servers)
	copyInto(&m.Dests, o.Dests)
	copyInto(&m.Bindings, o.Bindings)
	copyInto(&m.Entries, o.Entries)
}

// put sets (*m)[k], making *m when nil.
func put[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

// copyInto copies src into *dst, making *dst when nil and src is not empty.
func copyInto[K comparable, V any](dst *map[K]V, src map[K]V) {
	if len(src) == 0 {
		return
	}
	if *dst == nil {
		*dst = make(map[K]V, len(src))
	}
	maps.Copy(*dst, src)
}

// Result tells which objects failed.
type Result struct {
	// Failed holds the error of each object that failed, and of each
	// held back by its quarantine (ErrHeld).
	Failed ObjectMap[error]
	// Held counts the objects held back (Applier.Quarantine).
	Held int
	// Quarantining is set when the applier quarantines refused objects;
	// Quarantined is then its quarantine after the plan.
	Quarantining bool
	Quarantined  []quarantine.Entry
	// Writes counts the objects written (kernel operations).
	Writes int
	// RulesErr is a failure of Applier.EntryRules (the IPVS and ipset
	// changes stand; the next plan touching the sets, or the next repair,
	// tries again).
	RulesErr error
}

// Err returns the failures as one error, or nil.
func (r Result) Err() error {
	if r.Failed.Len() == 0 && r.RulesErr == nil {
		return nil
	}
	errs := make([]error, 0, r.Failed.Len()+1)
	errs = appendValues(errs, r.Failed.Servers)
	errs = appendValues(errs, r.Failed.Dests)
	errs = appendValues(errs, r.Failed.Bindings)
	errs = appendValues(errs, r.Failed.Entries)
	if r.RulesErr != nil {
		errs = append(errs, r.RulesErr)
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return joinErrors(errs)
}

// WholeErr returns what failed the sync as a whole, or nil: with a
// quarantine, the rules failures and the objects of a batch
// that failed whole (WholeError); without, every failure (Err).
func (r Result) WholeErr() error {
	if !r.Quarantining {
		return r.Err()
	}
	var errs []error
	errs = appendWhole(errs, r.Failed.Servers)
	errs = appendWhole(errs, r.Failed.Dests)
	errs = appendWhole(errs, r.Failed.Bindings)
	errs = appendWhole(errs, r.Failed.Entries)
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	if r.RulesErr != nil {
		errs = append(errs, r.RulesErr)
	}
	return joinErrors(errs)
}

func appendWhole[K comparable](l []error, m map[K]error) []error {
	for _, e := range m {
		if whole(e) {
			l = append(l, e)
		}
	}
	return l
}

func appendValues[K comparable](l []error, m map[K]error) []error {
	for _, e := range m {
		l = append(l, e)
	}
	return l
}

// SyncStats describes one sync of a controller, for logs and metrics.
type SyncStats struct {
	Start    time.Time
	Duration time.Duration
	Services int
	// Writes is the number of kernel objects written.
	Writes int
	// Reaped is how many of them removed quiesced destinations whose
	// connections ended (Applier.Reap): endpoints that went, or
	// destinations the cluster's state does not have.
	Reaped int
	// Failed is the number of objects that failed (retried next sync).
	Failed int
	// RenderErrors counts problems in the input (bad annotations...).
	RenderErrors int
	// NoLocalEndpoints counts services with a Local traffic policy and no
	// local endpoint (kube-proxy's metric).
	NoLocalEndpoints int
	// Quarantined are the objects the kernel refused alone, retried with
	// backoff (Applier.Quarantine); they do not fail the sync.
	Quarantined []quarantine.Entry
	Err         error
}

// LogAttrs returns the stats as log attributes: the services (when
// withServices: a resync that reads no snapshot has none to count, and
// "services=0" would read as an empty cluster), the writes, and on failure
// the failed objects and the error.
func (s SyncStats) LogAttrs(withServices bool) []any {
	var attrs []any
	if withServices {
		attrs = append(attrs, "services", s.Services)
	}
	attrs = append(attrs, "writes", s.Writes)
	if s.Reaped > 0 {
		attrs = append(attrs, "reaped", s.Reaped)
	}
	if s.Err != nil {
		attrs = append(attrs, "failed", s.Failed, "error", s.Err)
	}
	if len(s.Quarantined) > 0 {
		attrs = append(attrs, "quarantined", len(s.Quarantined))
	}
	return attrs
}
