package diff

import (
	"cmp"
	"slices"

	"github.com/proxysinks/proxysinks/client"
)

// Snapshots is a client.Sink that rebuilds snapshots from incremental
// events: on each Sync it delivers the full state, listing the services
// touched since the previous Sync. With client.ToCallback it lets a
// full-state sink run from an event source. A service is delivered only
// once it has had a SetService; endpoints set before their service are kept
// and appear with it.
type Snapshots struct {
	deliver  func(*client.Snapshot)
	services map[client.ServiceKey]*building
	touched  map[client.ServiceKey]struct{}
	tracker  *client.Tracker
}

type building struct {
	svc *client.Service
	eps map[client.EndpointKey]*client.Endpoint
}

// NewSnapshots returns a Snapshots that calls deliver on every Sync.
func NewSnapshots(deliver func(*client.Snapshot)) *Snapshots {
	return &Snapshots{
		deliver:  deliver,
		services: map[client.ServiceKey]*building{},
		touched:  map[client.ServiceKey]struct{}{},
		tracker:  client.NewTracker(),
	}
}

func (s *Snapshots) get(k client.ServiceKey) *building {
	b := s.services[k]
	if b == nil {
		b = &building{eps: map[client.EndpointKey]*client.Endpoint{}}
		s.services[k] = b
	}
	s.touched[k] = struct{}{}
	return b
}

// SetService implements client.Sink.
func (s *Snapshots) SetService(svc *client.Service) { s.get(svc.Key()).svc = svc }

// DeleteService implements client.Sink.
func (s *Snapshots) DeleteService(k client.ServiceKey) {
	delete(s.services, k)
	s.touched[k] = struct{}{}
}

// SetEndpoint implements client.Sink.
func (s *Snapshots) SetEndpoint(k client.ServiceKey, ep *client.Endpoint) {
	s.get(k).eps[ep.Key] = ep
}

// DeleteEndpoint implements client.Sink.
func (s *Snapshots) DeleteEndpoint(k client.ServiceKey, key client.EndpointKey) {
	if b := s.services[k]; b != nil {
		delete(b.eps, key)
		s.touched[k] = struct{}{}
	}
}

// Sync implements client.Sink: it delivers the current state.
func (s *Snapshots) Sync() {
	for k := range s.touched {
		b := s.services[k]
		if b == nil || b.svc == nil {
			s.tracker.Set(k, nil)
			continue
		}
		se := &client.ServiceEndpoints{Service: b.svc, Endpoints: make([]*client.Endpoint, 0, len(b.eps))}
		for _, e := range b.eps {
			se.Endpoints = append(se.Endpoints, e)
		}
		slices.SortFunc(se.Endpoints, func(a, b *client.Endpoint) int { return cmp.Compare(a.Key, b.Key) })
		s.tracker.Set(k, se)
	}
	clear(s.touched)
	s.deliver(s.tracker.Snapshot())
}

func sortChanges(c []client.Change) {
	slices.SortFunc(c, func(a, b client.Change) int { return a.Key.Compare(b.Key) })
}

var _ client.Sink = (*Snapshots)(nil)
