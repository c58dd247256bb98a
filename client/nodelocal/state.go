package nodelocal

import (
	"log/slog"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/proxysinks/proxysinks/client"
)

// Config configures a State.
type Config struct {
	// NodeName is this node's name: endpoints whose nodeName equals it are
	// local, and the Node object of that name gives the zone.
	NodeName string
	// ProxyName selects services by their
	// service.kubernetes.io/service-proxy-name label (see ConvertService).
	ProxyName string
	// Logger receives one warning per invalid object version; nil logs
	// nothing.
	Logger *slog.Logger
	// Needs are the optional facts the sink asked for: the node's
	// addresses and pod CIDRs (from SetNode), the ServiceCIDR objects
	// (SetServiceCIDR). The snapshots carry them; without them they are
	// not read.
	Needs client.Needs
	// Start is when the proxy started; zero means the time NewState is
	// called. EndpointSlice trigger times (Slice.TriggerTime) not after it
	// are ignored, as kube-proxy ignores those older than its start: they
	// measure changes made before this proxy ran, not its programming
	// latency.
	Start time.Time
}

// objRef names an API object.
type objRef struct {
	kind, namespace, name string
}

// State turns object events (services, EndpointSlices, the node) into
// snapshots. It converts and validates each object once, recomputes only the
// services touched since the previous snapshot, and lists in each snapshot
// the services whose content changed. A State is not safe for concurrent
// use; sources guard it with a lock.
type State struct {
	cfg  Config
	node Node
	// facts are what the sink asked for beyond the services (Config.Needs).
	facts facts

	services   map[client.ServiceKey]*svcState
	sliceOwner map[nsName]string // slice -> its service's name
	notProxied int
	invalid    map[objRef]*client.ObjectError
	total      atomic.Uint64
	// adjusted holds the adjustments of each object that has some (see
	// setAdjusted); repaired and skipped count them.
	adjusted          map[objRef][]Adjustment
	repaired, skipped atomic.Uint64

	results *client.Tracker
	dirty   []client.ServiceKey
	scratch scratch
	// computed holds the results of a parallel recomputation (reused).
	computed []*client.ServiceEndpoints
}

// svcState is what the State knows under one service key.
type svcState struct {
	svc        *client.Service // nil: absent, invalid or not proxied
	notProxied bool
	slices     []*Slice // sorted by name and family
	dirty      bool     // listed in State.dirty
	// trigger is the earliest trigger time of the slice changes since the
	// last snapshot (zero: none known).
	trigger time.Time
}

type nsName struct{ namespace, name string }

// facts are the node's addresses and pod CIDRs and the cluster's service
// CIDRs, as the next snapshot carries them.
type facts struct {
	node *client.Node
	// cidrObjects are the valid CIDRs of each ServiceCIDR object, by
	// name; cidrs are all of them, sorted and deduplicated.
	cidrObjects map[string][]netip.Prefix
	cidrs       []netip.Prefix
	// dirty is set when node or cidrs changed since the last snapshot.
	dirty bool
	// changed is set when the last snapshot listed a change (of a service
	// or of these facts).
	changed bool
}

// NewState returns an empty State.
func NewState(cfg Config) *State {
	if cfg.Start.IsZero() {
		cfg.Start = time.Now()
	}
	return &State{
		cfg:        cfg,
		node:       Node{Name: cfg.NodeName},
		services:   map[client.ServiceKey]*svcState{},
		sliceOwner: map[nsName]string{},
		invalid:    map[objRef]*client.ObjectError{},
		adjusted:   map[objRef][]Adjustment{},
		results:    client.NewTracker(),
	}
}

func (st *State) entry(k client.ServiceKey) *svcState {
	e := st.services[k]
	if e == nil {
		e = &svcState{}
		st.services[k] = e
	}
	return e
}

func (st *State) markDirty(k client.ServiceKey, e *svcState) {
	if !e.dirty {
		e.dirty = true
		st.dirty = append(st.dirty, k)
	}
}

func (st *State) setNotProxied(e *svcState, v bool) {
	if e.notProxied != v {
		e.notProxied = v
		if v {
			st.notProxied++
		} else {
			st.notProxied--
		}
	}
}

// SetService adds or updates a Service. It returns the validation error of
// an invalid service, which is then not served (until a valid version
// comes).
func (st *State) SetService(s *corev1.Service) error {
	c := ConvertServiceObject(s, st.cfg.ProxyName)
	return st.SetConvertedService(&c)
}

// ConvertedService is a Service after conversion (ConvertService): what
// State.SetConvertedService takes. Sources convert objects as they arrive,
// possibly on other goroutines, and hand the result to the State, so that
// the State's lock is held for the bookkeeping only.
type ConvertedService struct {
	Namespace, Name string
	// Service, Skip and Err are ConvertService's results.
	Service *client.Service
	Skip    string
	Err     error
	// Adjustments are the values repaired or skipped in Service.
	Adjustments []Adjustment
}

// ConvertServiceObject converts s with ConvertService. proxyName must be the
// State's Config.ProxyName.
func ConvertServiceObject(s *corev1.Service, proxyName string) ConvertedService {
	var adj adjustments
	svc, skip, err := convertService(s, proxyName, &adj)
	if svc == nil {
		adj.list = nil // nothing of it is served
	}
	return ConvertedService{Namespace: s.Namespace, Name: s.Name, Service: svc, Skip: skip, Err: err, Adjustments: adj.list}
}

// SetConvertedService is SetService for a service converted beforehand
// (ConvertServiceObject with this State's ProxyName).
func (st *State) SetConvertedService(c *ConvertedService) error {
	st.setAdjusted(objRef{"Service", c.Namespace, c.Name}, c.Adjustments)
	return st.setService(c.Namespace, c.Name, c.Service, c.Skip, c.Err)
}

func (st *State) setService(namespace, name string, svc *client.Service, skip string, err error) error {
	key := client.ServiceKey{Namespace: namespace, Name: name}
	st.setInvalid(objRef{"Service", namespace, name}, err)
	e := st.entry(key)
	st.setNotProxied(e, skip != "")
	if svc == nil && e.svc == nil || svc != nil && e.svc.Equal(svc) {
		st.forget(key, e)
		return err
	}
	e.svc = svc
	st.markDirty(key, e)
	return err
}

// DeleteService removes a Service.
func (st *State) DeleteService(namespace, name string) {
	key := client.ServiceKey{Namespace: namespace, Name: name}
	st.setInvalid(objRef{"Service", namespace, name}, nil)
	st.setAdjusted(objRef{"Service", namespace, name}, nil)
	e := st.services[key]
	if e == nil {
		return
	}
	st.setNotProxied(e, false)
	if e.svc != nil {
		e.svc = nil
		st.markDirty(key, e)
	}
	st.forget(key, e)
}

// forget drops an entry that holds nothing and waits for no snapshot.
func (st *State) forget(k client.ServiceKey, e *svcState) {
	if !e.dirty && e.svc == nil && !e.notProxied && len(e.slices) == 0 {
		delete(st.services, k)
	}
}

// SetSlice adds or updates an EndpointSlice. It returns the validation error
// of an invalid slice, which is then left out of its service.
func (st *State) SetSlice(es *discoveryv1.EndpointSlice) error {
	p := ParseSliceObject(es)
	return st.SetParsedSlice(&p)
}

// ParsedSlice is an EndpointSlice after validation (ParseSlice): what
// State.SetParsedSlice takes (see ConvertedService).
type ParsedSlice struct {
	Namespace, Name string
	// Slice and Err are ParseSlice's results (both nil for an ignored
	// FQDN slice).
	Slice *Slice
	Err   error
	// Adjustments are the values repaired or skipped in Slice.
	Adjustments []Adjustment
}

// ParseSliceObject validates es with ParseSlice.
func ParseSliceObject(es *discoveryv1.EndpointSlice) ParsedSlice {
	var adj adjustments
	s, err := parseSlice(es, &adj)
	if s == nil {
		adj.list = nil // nothing of it is served
	}
	return ParsedSlice{Namespace: es.Namespace, Name: es.Name, Slice: s, Err: err, Adjustments: adj.list}
}

// SetParsedSlice is SetSlice for a slice validated beforehand
// (ParseSliceObject).
func (st *State) SetParsedSlice(p *ParsedSlice) error {
	st.setAdjusted(objRef{"EndpointSlice", p.Namespace, p.Name}, p.Adjustments)
	return st.setSlice(p.Namespace, p.Name, p.Slice, p.Err)
}

func (st *State) setSlice(namespace, name string, s *Slice, err error) error {
	ref := nsName{namespace, name}
	st.setInvalid(objRef{"EndpointSlice", namespace, name}, err)
	oldSvc, had := st.sliceOwner[ref]
	if s == nil {
		if had {
			st.removeSlice(ref, oldSvc)
		}
		return err
	}
	if had && oldSvc != s.Service {
		st.removeSlice(ref, oldSvc)
	}
	key := s.ServiceKey()
	e := st.entry(key)
	i, found := slices.BinarySearchFunc(e.slices, s, compareSlices)
	switch {
	case found && e.slices[i].SameContent(s):
		return nil
	case found:
		e.slices[i] = s
	case len(e.slices) == 0:
		e.slices = []*Slice{s}
	default:
		e.slices = slices.Insert(e.slices, i, s)
	}
	st.sliceOwner[ref] = s.Service
	if t := s.TriggerTime; t.After(st.cfg.Start) && (e.trigger.IsZero() || t.Before(e.trigger)) {
		e.trigger = t
	}
	st.markDirty(key, e)
	return nil
}

// DeleteSlice removes an EndpointSlice.
func (st *State) DeleteSlice(namespace, name string) {
	ref := nsName{namespace, name}
	st.setInvalid(objRef{"EndpointSlice", namespace, name}, nil)
	st.setAdjusted(objRef{"EndpointSlice", namespace, name}, nil)
	if svc, ok := st.sliceOwner[ref]; ok {
		st.removeSlice(ref, svc)
	}
}

func (st *State) removeSlice(ref nsName, svc string) {
	delete(st.sliceOwner, ref)
	key := client.ServiceKey{Namespace: ref.namespace, Name: svc}
	e := st.services[key]
	if e == nil {
		return
	}
	e.slices = slices.DeleteFunc(e.slices, func(s *Slice) bool { return s.Name == ref.name })
	// As in kube-proxy, a removal forgets the pending trigger times: a
	// deleted slice's annotation dates from its last update, not from the
	// deletion.
	e.trigger = time.Time{}
	st.markDirty(key, e)
}

func (st *State) setInvalid(ref objRef, err error) {
	oe, ok := err.(*client.ObjectError)
	if err != nil && !ok {
		oe = &client.ObjectError{Kind: ref.kind, Namespace: ref.namespace, Name: ref.name, Err: err}
	}
	if oe == nil {
		if len(st.invalid) > 0 {
			delete(st.invalid, ref)
		}
		return
	}
	st.invalid[ref] = oe
	st.total.Add(1)
	if st.cfg.Logger != nil {
		st.cfg.Logger.Warn("skipping invalid object", "kind", oe.Kind, "namespace", oe.Namespace,
			"name", oe.Name, "field", oe.Field, "error", oe.Error())
	}
}

// setAdjusted records the adjustments of an object's current version: each
// one the object's previous version did not have is logged and counted,
// so a value is reported once however often its object is set again.
func (st *State) setAdjusted(ref objRef, adj []Adjustment) {
	old := st.adjusted[ref]
	if len(adj) == 0 {
		if old != nil {
			delete(st.adjusted, ref)
		}
		return
	}
	st.adjusted[ref] = adj
	for _, a := range adj {
		if slices.Contains(old, a) {
			continue
		}
		verb := "repaired value"
		if a.Skipped {
			st.skipped.Add(1)
			verb = "skipped value"
		} else {
			st.repaired.Add(1)
		}
		if st.cfg.Logger != nil {
			st.cfg.Logger.Warn(verb, "kind", ref.kind, "namespace", ref.namespace, "name", ref.name,
				"field", a.Field, "value", a.Value, "result", a.Result, "reason", a.Reason)
		}
	}
}

// Invalid records an object that could not even be decoded (for example a
// manifest document with a wrong field type), so that it is counted and
// reported like the others. A later Set of the same object clears it.
func (st *State) Invalid(err *client.ObjectError) {
	st.setInvalid(objRef{err.Kind, err.Namespace, err.Name}, err)
}

// Dirty reports whether a snapshot would recompute anything, or carry a
// new Node or new ServiceCIDRs.
func (st *State) Dirty() bool { return len(st.dirty) > 0 || st.facts.dirty }

// Changed reports whether the last snapshot differs from the one before
// it: it lists a service change, or carries a new Node or new
// ServiceCIDRs (which list no change). Sources deliver only such snapshots
// between periodic syncs.
func (st *State) Changed() bool { return st.facts.changed }

// Snapshot recomputes the services touched since the previous snapshot and
// returns the full state with the services whose content changed. The
// returned value is shared: it must not be modified.
//
// Each change carries the earliest trigger time (Slice.TriggerTime) of the
// slice updates folded into it, zero when none is known: a removal, slices
// without the annotation, or only trigger times from before Config.Start.
func (st *State) Snapshot() *client.Snapshot {
	computed := st.recompute()
	for i, k := range st.dirty {
		e := st.services[k]
		e.dirty = false
		var se *client.ServiceEndpoints
		if computed != nil {
			se = computed[i]
		} else if e.svc != nil {
			se = compute(e.svc, e.slices, st.node, &st.scratch, true)
		}
		st.results.SetTriggered(k, se, e.trigger)
		e.trigger = time.Time{}
		st.forget(k, e)
	}
	clear(computed)
	st.dirty = st.dirty[:0]
	snap := st.results.Snapshot()
	snap.Node, snap.ServiceCIDRs = st.facts.node, st.facts.cidrs
	st.facts.changed = len(snap.Changes) > 0 || st.facts.dirty
	st.facts.dirty = false
	return snap
}

// parallelMin is the number of services to recompute from which Snapshot
// spreads the work over the CPUs (a first snapshot, a zone change).
const parallelMin = 1024

// recompute computes the dirty services on every CPU when there are many,
// and returns the results in the order of st.dirty; nil when there are few
// (the caller computes them as it goes).
func (st *State) recompute() []*client.ServiceEndpoints {
	workers := min(runtime.GOMAXPROCS(0), len(st.dirty)/(parallelMin/2), 8)
	if len(st.dirty) < parallelMin || workers < 2 {
		return nil
	}
	out := slices.Grow(st.computed[:0], len(st.dirty))[:len(st.dirty)]
	st.computed = out
	var wg sync.WaitGroup
	per := (len(st.dirty) + workers - 1) / workers
	for w := range workers {
		lo, hi := w*per, min((w+1)*per, len(st.dirty))
		wg.Go(func() {
			sc := &st.scratch
			if w > 0 {
				sc = &scratch{}
			}
			for i := lo; i < hi; i++ {
				if e := st.services[st.dirty[i]]; e.svc != nil {
					out[i] = compute(e.svc, e.slices, st.node, sc, true)
				}
			}
		})
	}
	wg.Wait()
	return out
}

// Stats returns the counters.
func (st *State) Stats() client.Stats {
	return client.Stats{
		InvalidTotal:        st.total.Load(),
		RepairedValuesTotal: st.repaired.Load(),
		SkippedValuesTotal:  st.skipped.Load(),
		Invalid:             len(st.invalid),
		NotProxied:          st.notProxied,
		Services:            st.results.Len(),
	}
}

// Errors returns the objects that are invalid right now, sorted by kind,
// namespace and name.
func (st *State) Errors() []*client.ObjectError {
	out := make([]*client.ObjectError, 0, len(st.invalid))
	for _, e := range st.invalid {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *client.ObjectError) int {
		if a.Kind != b.Kind {
			if a.Kind < b.Kind {
				return -1
			}
			return 1
		}
		return client.ServiceKey{Namespace: a.Namespace, Name: a.Name}.Compare(client.ServiceKey{Namespace: b.Namespace, Name: b.Name})
	})
	return out
}
