package client

import (
	"iter"
	"net/netip"
	"slices"
	"time"
)

// Callback is a full-state sink. It is called once per consistent snapshot
// and reads every service from the channel, in (namespace, name) order with
// endpoints sorted by key; the channel is closed at the end of the snapshot.
// The next snapshot is not delivered before the callback returns.
type Callback func(<-chan *ServiceEndpoints)

// Sink is an incremental sink. Events describe the changes since the last
// Sync; Sync marks a consistent point where the sink may apply them.
//
// Within one round, deletions come before additions (all DeleteEndpoint and
// DeleteService calls, then SetService and SetEndpoint), so a sink that
// programs backends by address never removes a live backend when a key's
// address moves to another key. Endpoint keys are stable across updates: an
// endpoint whose conditions, flags or ports change is one SetEndpoint with
// the same key, never a Set(new)/Delete(old) pair. An endpoint whose
// addresses change is a DeleteEndpoint (in the deletion phase) then a
// SetEndpoint of the same key, so addresses that swap between keys in one
// round are all removed before any is added back.
type Sink interface {
	// SetService adds or replaces a service. A new service's endpoints
	// follow as SetEndpoint calls.
	SetService(svc *Service)
	// DeleteService removes a service and, with it, all its endpoints (no
	// DeleteEndpoint calls are made for them).
	DeleteService(key ServiceKey)
	// SetEndpoint adds or replaces the endpoint ep.Key of service svc.
	SetEndpoint(svc ServiceKey, ep *Endpoint)
	// DeleteEndpoint removes the endpoint key of service svc.
	DeleteEndpoint(svc ServiceKey, key EndpointKey)
	// Sync marks a consistent state: the sink may apply what it received.
	Sync()
}

// Change names one service whose content changed since the previous
// snapshot of the same source.
type Change struct {
	Key ServiceKey
	// Service is the new content, or nil when the service went away.
	Service *ServiceEndpoints
	// TriggerTime is when the cluster change that this change delivers was
	// triggered, from the EndpointSlices' endpoints.kubernetes.io/last-change-trigger-time
	// annotation: the earliest trigger time among the slice updates folded
	// into this change that no earlier snapshot delivered. It is zero when
	// unknown: a removal, a change of the Service object alone, slices
	// without the annotation, or changes from before the source started.
	// Sinks measure network programming latency (kube-proxy's
	// network_programming_duration_seconds) from it.
	TriggerTime time.Time
}

// Snapshot is one consistent node-local state, as sources deliver it: the
// full state, readable in key order, and the services that changed since
// the previous snapshot of the same source. A Snapshot is immutable and
// shares unchanged parts with the snapshots before it, so building one
// after a change costs in proportion to the change, not to the cluster.
type Snapshot struct {
	// Changes lists, sorted by key, the services added, changed or removed
	// since the previous snapshot from the same source; the first snapshot
	// lists every service. Consumers use it to avoid walking the state.
	Changes []Change
	// Full is true when Changes is not known: consumers must compare every
	// service.
	Full bool
	// Node is this node's addresses and pod CIDRs when the sink asked for
	// them (Needs.Node) and the source has read the node's Node object;
	// nil otherwise.
	Node *Node
	// ServiceCIDRs are the prefixes of the cluster's ServiceCIDR objects
	// (networking.k8s.io/v1, spec.cidrs), sorted and without duplicates,
	// when the sink asked for them (Needs.ServiceCIDRs); nil otherwise, or
	// when the cluster has none.
	//
	// A change of Node or ServiceCIDRs alone delivers a snapshot that
	// lists no service change: a sink that reads them compares them with
	// what it programmed (Node.Equal, slices.Equal).
	ServiceCIDRs []netip.Prefix

	chunks [][]*ServiceEndpoints // sorted runs, each non-empty
	n      int
}

// NewSnapshot returns a snapshot of services, which must be sorted by key
// (see ServiceKey.Compare), with the given changes. The slice is kept: it
// must not be modified afterwards.
func NewSnapshot(services []*ServiceEndpoints, changes []Change) *Snapshot {
	s := &Snapshot{Changes: changes, n: len(services)}
	if len(services) > 0 {
		s.chunks = [][]*ServiceEndpoints{services}
	}
	return s
}

// Len is the number of services.
func (s *Snapshot) Len() int { return s.n }

// All yields every service in key order (namespace, then name).
func (s *Snapshot) All() iter.Seq[*ServiceEndpoints] {
	return func(yield func(*ServiceEndpoints) bool) {
		for _, c := range s.chunks {
			for _, se := range c {
				if !yield(se) {
					return
				}
			}
		}
	}
}

// NoLocalEndpoints counts the services with a Local traffic policy and no
// ready or serving endpoint on this node (ServiceEndpoints.NoLocalEndpoints;
// kube-proxy's kubeproxy_sync_proxy_rules_no_local_endpoints_total).
func (s *Snapshot) NoLocalEndpoints() int {
	n := 0
	for se := range s.All() {
		if se.NoLocalEndpoints() {
			n++
		}
	}
	return n
}

// Services returns every service in key order, in a new slice.
func (s *Snapshot) Services() []*ServiceEndpoints {
	out := make([]*ServiceEndpoints, 0, s.n)
	for _, c := range s.chunks {
		out = append(out, c...)
	}
	return out
}

// Lookup returns the service with key k, or nil.
func (s *Snapshot) Lookup(k ServiceKey) *ServiceEndpoints {
	ci, _ := slices.BinarySearchFunc(s.chunks, k, func(c []*ServiceEndpoints, k ServiceKey) int {
		return c[len(c)-1].Service.Key().Compare(k)
	})
	if ci == len(s.chunks) {
		return nil
	}
	c := s.chunks[ci]
	i, ok := slices.BinarySearchFunc(c, k, func(se *ServiceEndpoints, k ServiceKey) int {
		return se.Service.Key().Compare(k)
	})
	if !ok {
		return nil
	}
	return c[i]
}

// ToCallback adapts a full-state Callback to the function sources deliver
// snapshots to. It streams the snapshot's services to cb and returns when cb returns; a
// callback that returns early is not blocked on.
func ToCallback(cb Callback) func(*Snapshot) {
	return func(s *Snapshot) {
		ch := make(chan *ServiceEndpoints, 128)
		done := make(chan struct{})
		go func() {
			defer close(done)
			cb(ch)
		}()
		defer func() { <-done }()
		defer close(ch)
		for se := range s.All() {
			select {
			case ch <- se:
			case <-done:
				return
			}
		}
	}
}
