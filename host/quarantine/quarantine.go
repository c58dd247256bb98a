// Package quarantine is the set of kernel objects a kernel refused, with
// their backoff: every sink keeps one (the IPVS controller core for its
// virtual servers, destinations, addresses and set entries; the iptables
// and nftables sinks for their services), so that one refused object is
// retried alone, at 1 s, 2 s, 4 s ... up to the sync period, or at once
// when what the sink wants of it changes, while the rest of the node keeps
// converging.
package quarantine

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
)

// Object names a refused object for logs, metrics and events.
type Object struct {
	// Kind is the object's kind, the metric's label: VirtualServer,
	// Destination, Address, SetEntry (IPVS sinks), Service (iptables, nftables).
	Kind string
	// Name is the object as the kernel knows it ("TCP/10.96.0.10:53").
	Name string
	// Namespace and Service name the Service the object serves, when
	// known (the target of an Event).
	Namespace, Service string
	// Addr and Port, when Service is empty, are the service address and
	// port the object belongs to, by which the sink's runtime finds its
	// Service in the cluster's state.
	Addr netip.Addr
	Port uint16
}

// Entry is one quarantined object.
type Entry struct {
	Object
	// Err is the kernel's last refusal.
	Err error
	// Since is when it was first refused; Next when it is retried.
	Since, Next time.Time
	// Attempts counts the refusals in a row.
	Attempts int
}

// Default bounds of the backoff: the first retry after Min, each next one
// twice as late, at most Max (a sink sets Max to its sync period).
const (
	DefaultMin = time.Second
	DefaultMax = 30 * time.Second
)

// Set is the quarantined objects, by a key of the sink's choosing. The
// zero value is not usable: use New. Not safe for concurrent use (its
// controller serializes).
type Set[K comparable] struct {
	min, max time.Duration
	// Now is the clock (tests set it).
	Now func() time.Time
	m   map[K]*state
}

type state struct {
	e       Entry
	version any
	delay   time.Duration
}

// New returns an empty set whose backoff starts at min and doubles up to
// max (zero: DefaultMin, DefaultMax).
func New[K comparable](min, max time.Duration) *Set[K] {
	if min <= 0 {
		min = DefaultMin
	}
	if max <= 0 {
		max = DefaultMax
	}
	if max < min {
		max = min
	}
	return &Set[K]{min: min, max: max, Now: time.Now, m: map[K]*state{}}
}

// Fail records that the kernel refused k, wanted as version (a comparable
// value that changes when what the sink wants of k changes), with err. A
// new object waits min; one refused again waits twice as long as last
// time, at most max. It returns whether k is newly quarantined.
func (s *Set[K]) Fail(k K, o Object, version any, err error) bool {
	now := s.Now()
	st, ok := s.m[k]
	if !ok {
		st = &state{e: Entry{Object: o, Since: now}, delay: s.min}
		s.m[k] = st
	} else {
		st.delay = min(2*st.delay, s.max)
	}
	st.e.Object, st.e.Err, st.version = o, err, version
	st.e.Attempts++
	st.e.Next = now.Add(st.delay)
	return !ok
}

// Clear takes k out of quarantine (written, or no longer wanted); it
// returns whether it was in.
func (s *Set[K]) Clear(k K) bool {
	if _, ok := s.m[k]; !ok {
		return false
	}
	delete(s.m, k)
	return true
}

// Hold reports whether a write of k wanted as version waits: k is
// quarantined, its retry is not due and the sink wants of it what it
// wanted when it was refused.
func (s *Set[K]) Hold(k K, version any) bool {
	st, ok := s.m[k]
	if !ok {
		return false
	}
	return st.version == version && s.Now().Before(st.e.Next)
}

// Has reports whether k is quarantined.
func (s *Set[K]) Has(k K) bool { _, ok := s.m[k]; return ok }

// Len returns the number of quarantined objects.
func (s *Set[K]) Len() int { return len(s.m) }

// Keep clears every key keep rejects (objects gone from what the sink
// wants).
func (s *Set[K]) Keep(keep func(K) bool) {
	for k := range s.m {
		if !keep(k) {
			delete(s.m, k)
		}
	}
}

// Due returns the keys whose retry is due, in no order.
func (s *Set[K]) Due() []K {
	now := s.Now()
	var out []K
	for k, st := range s.m {
		if !now.Before(st.e.Next) {
			out = append(out, k)
		}
	}
	return out
}

// Entries returns the quarantined objects, by kind and name.
func (s *Set[K]) Entries() []Entry {
	if len(s.m) == 0 {
		return nil
	}
	out := make([]Entry, 0, len(s.m))
	for _, st := range s.m {
		out = append(out, st.e)
	}
	Sort(out)
	return out
}

// Sort orders entries by kind, then name.
func Sort(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
}

// Next returns when the first retry of es is due (zero when es is empty).
func Next(es []Entry) time.Time {
	var t time.Time
	for _, e := range es {
		if t.IsZero() || e.Next.Before(t) {
			t = e.Next
		}
	}
	return t
}
