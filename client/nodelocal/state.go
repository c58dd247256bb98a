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

// Stats counts what a State could not or would not serve.
type Stats struct {
	// InvalidTotal counts every invalid object version seen (a counter,
	// never decreasing).
	InvalidTotal uint64
	// Invalid is the number of objects that are invalid right now.
	Invalid int
	// NotProxied is the number of valid services skipped on purpose:
	// headless, ExternalName, or labelled for another proxy.
	NotProxied int
	// Services is the number of services served.
	Services int
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

	services   map[client.ServiceKey]*client.Service
	notProxied map[client.ServiceKey]bool
	slices     map[client.ServiceKey]map[string]*Slice
	sliceOwner map[objRef]client.ServiceKey
	invalid    map[objRef]*client.ObjectError
	total      atomic.Uint64

	results *client.Tracker
	dirty   map[client.ServiceKey]struct{}
}

// NewState returns an empty State.
func NewState(cfg Config) *State {
	return &State{
		cfg:        cfg,
		node:       Node{Name: cfg.NodeName},
		services:   map[client.ServiceKey]*client.Service{},
		notProxied: map[client.ServiceKey]bool{},
		slices:     map[client.ServiceKey]map[string]*Slice{},
		sliceOwner: map[objRef]client.ServiceKey{},
		invalid:    map[objRef]*client.ObjectError{},
		results:    client.NewTracker(),
		dirty:      map[client.ServiceKey]struct{}{},
	}
}

// SetService adds or updates a Service. It returns the validation error of
// an invalid service, which is then not served (until a valid version
// comes).
func (st *State) SetService(s *corev1.Service) error {
	key := client.ServiceKey{Namespace: s.Namespace, Name: s.Name}
	ref := objRef{"Service", s.Namespace, s.Name}
	svc, skip, err := ConvertService(s, st.cfg.ProxyName)
	st.setInvalid(ref, err)
	if skip != "" {
		st.notProxied[key] = true
	} else {
		delete(st.notProxied, key)
	}
	old, had := st.services[key]
	if svc == nil {
		if had {
			delete(st.services, key)
			st.dirty[key] = struct{}{}
		}
		return err
	}
	if had && old.Equal(svc) {
		return nil
	}
	st.services[key] = svc
	st.dirty[key] = struct{}{}
	return nil
}

// DeleteService removes a Service.
func (st *State) DeleteService(namespace, name string) {
	key := client.ServiceKey{Namespace: namespace, Name: name}
	st.setInvalid(objRef{"Service", namespace, name}, nil)
	delete(st.notProxied, key)
	if _, ok := st.services[key]; ok {
		delete(st.services, key)
		st.dirty[key] = struct{}{}
	}
}

// SetSlice adds or updates an EndpointSlice. It returns the validation error
// of an invalid slice, which is then left out of its service.
func (st *State) SetSlice(es *discoveryv1.EndpointSlice) error {
	ref := objRef{"EndpointSlice", es.Namespace, es.Name}
	s, err := ParseSlice(es)
	st.setInvalid(ref, err)
	oldKey, had := st.sliceOwner[ref]
	if s == nil {
		if had {
			st.removeSlice(ref, oldKey)
		}
		return err
	}
	key := s.ServiceKey()
	if had && oldKey != key {
		st.removeSlice(ref, oldKey)
	} else if had && reflect.DeepEqual(st.slices[key][es.Name], s) {
		return nil
	}
	m := st.slices[key]
	if m == nil {
		m = map[string]*Slice{}
		st.slices[key] = m
	}
	m[es.Name] = s
	st.sliceOwner[ref] = key
	st.dirty[key] = struct{}{}
	return nil
}

// DeleteSlice removes an EndpointSlice.
func (st *State) DeleteSlice(namespace, name string) {
	ref := objRef{"EndpointSlice", namespace, name}
	st.setInvalid(ref, nil)
	if key, ok := st.sliceOwner[ref]; ok {
		st.removeSlice(ref, key)
	}
}

func (st *State) removeSlice(ref objRef, key client.ServiceKey) {
	delete(st.sliceOwner, ref)
	delete(st.slices[key], ref.name)
	if len(st.slices[key]) == 0 {
		delete(st.slices, key)
	}
	st.dirty[key] = struct{}{}
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
	for k := range st.services {
		st.dirty[k] = struct{}{}
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
	for k := range st.dirty {
		var se *client.ServiceEndpoints
		if svc := st.services[k]; svc != nil {
			m := st.slices[k]
			sl := make([]*Slice, 0, len(m))
			for _, s := range m {
				sl = append(sl, s)
			}
			se = Compute(svc, sl, st.node)
		}
		st.results.Set(k, se)
	}
	clear(st.dirty)
	return st.results.Snapshot()
}

// Stats returns the counters.
func (st *State) Stats() Stats {
	return Stats{
		InvalidTotal: st.total.Load(),
		Invalid:      len(st.invalid),
		NotProxied:   len(st.notProxied),
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
