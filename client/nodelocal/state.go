package nodelocal

import (
	"log/slog"
	"reflect"
	"slices"
	"sync/atomic"

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

	services   map[client.ServiceKey]*svcState
	sliceOwner map[nsName]string // slice -> its service's name
	notProxied int
	invalid    map[objRef]*client.ObjectError
	total      atomic.Uint64

	results *client.Tracker
	dirty   []client.ServiceKey
	scratch scratch
}

// svcState is what the State knows under one service key.
type svcState struct {
	svc        *client.Service // nil: absent, invalid or not proxied
	notProxied bool
	slices     []*Slice // sorted by name and family
	dirty      bool     // listed in State.dirty
}

type nsName struct{ namespace, name string }

// NewState returns an empty State.
func NewState(cfg Config) *State {
	return &State{
		cfg:        cfg,
		node:       Node{Name: cfg.NodeName},
		services:   map[client.ServiceKey]*svcState{},
		sliceOwner: map[nsName]string{},
		invalid:    map[objRef]*client.ObjectError{},
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
	key := client.ServiceKey{Namespace: s.Namespace, Name: s.Name}
	svc, skip, err := ConvertService(s, st.cfg.ProxyName)
	st.setInvalid(objRef{"Service", s.Namespace, s.Name}, err)
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
	ref := nsName{es.Namespace, es.Name}
	s, err := ParseSlice(es)
	st.setInvalid(objRef{"EndpointSlice", es.Namespace, es.Name}, err)
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
	case found && reflect.DeepEqual(e.slices[i], s):
		return nil
	case found:
		e.slices[i] = s
	default:
		e.slices = slices.Insert(e.slices, i, s)
	}
	st.sliceOwner[ref] = s.Service
	st.markDirty(key, e)
	return nil
}

// DeleteSlice removes an EndpointSlice.
func (st *State) DeleteSlice(namespace, name string) {
	ref := nsName{namespace, name}
	st.setInvalid(objRef{"EndpointSlice", namespace, name}, nil)
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
	st.markDirty(key, e)
}

// SetNode updates this node's facts from its Node object; Node objects of
// other nodes are ignored. A zone change recomputes every service.
func (st *State) SetNode(n *corev1.Node) {
	if n.Name != st.cfg.NodeName {
		return
	}
	st.setNode(NodeFrom(n))
}

// DeleteNode forgets this node's zone.
func (st *State) DeleteNode(name string) {
	st.setInvalid(objRef{"Node", "", name}, nil)
	if name != st.cfg.NodeName {
		return
	}
	st.setNode(Node{Name: st.cfg.NodeName})
}

func (st *State) setNode(n Node) {
	if n == st.node {
		return
	}
	st.node = n
	for k, e := range st.services {
		if e.svc != nil {
			st.markDirty(k, e)
		}
	}
}

func (st *State) setInvalid(ref objRef, err error) {
	oe, ok := err.(*client.ObjectError)
	if err != nil && !ok {
		oe = &client.ObjectError{Kind: ref.kind, Namespace: ref.namespace, Name: ref.name, Err: err}
	}
	if oe == nil {
		delete(st.invalid, ref)
		return
	}
	st.invalid[ref] = oe
	st.total.Add(1)
	if st.cfg.Logger != nil {
		st.cfg.Logger.Warn("skipping invalid object", "kind", oe.Kind, "namespace", oe.Namespace,
			"name", oe.Name, "field", oe.Field, "error", oe.Error())
	}
}

// Invalid records an object that could not even be decoded (for example a
// manifest document with a wrong field type), so that it is counted and
// reported like the others. A later Set of the same object clears it.
func (st *State) Invalid(err *client.ObjectError) {
	st.setInvalid(objRef{err.Kind, err.Namespace, err.Name}, err)
}

// Dirty reports whether a snapshot would recompute anything.
func (st *State) Dirty() bool { return len(st.dirty) > 0 }

// Snapshot recomputes the services touched since the previous snapshot and
// returns the full state with the services whose content changed. The
// returned value is shared: it must not be modified.
func (st *State) Snapshot() *client.Snapshot {
	for _, k := range st.dirty {
		e := st.services[k]
		e.dirty = false
		var se *client.ServiceEndpoints
		if e.svc != nil {
			se = compute(e.svc, e.slices, st.node, &st.scratch)
		}
		st.results.Set(k, se)
		st.forget(k, e)
	}
	st.dirty = st.dirty[:0]
	return st.results.Snapshot()
}

// Stats returns the counters.
func (st *State) Stats() client.Stats {
	return client.Stats{
		InvalidTotal: st.total.Load(),
		Invalid:      len(st.invalid),
		NotProxied:   st.notProxied,
		Services:     st.results.Len(),
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
