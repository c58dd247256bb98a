package diff

import (
	"github.com/proxysinks/proxysinks/client"
)

// Events turns successive snapshots into the minimal event stream for a
// client.Sink. It compares content, not pointers, so an unchanged service
// or endpoint produces no event even when the source rebuilt it.
//
// With a snapshot that lists its changes (Snapshot.Changes, as the sources
// give), the work is proportional to the changed services only, whatever
// the size of the cluster. A snapshot with Full set is compared service by
// service.
//
// Each Apply emits, in order: DeleteEndpoint for endpoints gone from
// surviving services or whose addresses changed, and DeleteService for
// services gone; then SetService for new or changed services and
// SetEndpoint for new or changed endpoints; then Sync. Within each phase,
// services come in key order and endpoints in key order.
type Events struct {
	sink client.Sink
	last map[client.ServiceKey]*client.ServiceEndpoints
}

// NewEvents returns an Events that starts from an empty state and sends to
// sink.
func NewEvents(sink client.Sink) *Events {
	return &Events{sink: sink, last: map[client.ServiceKey]*client.ServiceEndpoints{}}
}

// Apply sends the events that take the sink from the previous snapshot to s,
// then Sync.
func (ev *Events) Apply(s *client.Snapshot) {
	changes := s.Changes
	if s.Full {
		changes = ev.fullChanges(s)
	}
	// Phase 1: deletions.
	for _, c := range changes {
		old := ev.last[c.Key]
		if old == nil {
			continue
		}
		if c.Service == nil {
			ev.sink.DeleteService(c.Key)
			continue
		}
		deleted(old.Endpoints, c.Service.Endpoints, func(k client.EndpointKey) {
			ev.sink.DeleteEndpoint(c.Key, k)
		})
	}
	// Phase 2: additions and updates.
	for _, c := range changes {
		old := ev.last[c.Key]
		if c.Service == nil {
			delete(ev.last, c.Key)
			continue
		}
		var oldEps []*client.Endpoint
		if old == nil || !old.Service.Equal(c.Service.Service) {
			ev.sink.SetService(c.Service.Service)
		}
		if old != nil {
			oldEps = old.Endpoints
		}
		setOrChanged(oldEps, c.Service.Endpoints, func(e *client.Endpoint) {
			ev.sink.SetEndpoint(c.Key, e)
		})
		ev.last[c.Key] = c.Service
	}
	ev.sink.Sync()
}

// fullChanges compares every service of s with the last state.
func (ev *Events) fullChanges(s *client.Snapshot) []client.Change {
	var out []client.Change
	seen := make(map[client.ServiceKey]bool, s.Len())
	for se := range s.All() {
		k := se.Service.Key()
		seen[k] = true
		if !se.Equal(ev.last[k]) {
			out = append(out, client.Change{Key: k, Service: se})
		}
	}
	for k := range ev.last {
		if !seen[k] {
			out = append(out, client.Change{Key: k})
		}
	}
	sortChanges(out)
	return out
}

// deleted calls del for each key of old (sorted) missing from cur (sorted),
// or whose addresses changed: such an endpoint is a new backend, and
// deleting it first means a sink never removes an address that another key
// took over in the same round.
func deleted(old, cur []*client.Endpoint, del func(client.EndpointKey)) {
	j := 0
	for _, o := range old {
		for j < len(cur) && cur[j].Key < o.Key {
			j++
		}
		if j == len(cur) || cur[j].Key != o.Key || !cur[j].IPs.Equal(o.IPs) {
			del(o.Key)
		}
	}
}

// setOrChanged calls set for each endpoint of cur (sorted) that is missing
// from old (sorted) or differs from it.
func setOrChanged(old, cur []*client.Endpoint, set func(*client.Endpoint)) {
	j := 0
	for _, c := range cur {
		for j < len(old) && old[j].Key < c.Key {
			j++
		}
		if j == len(old) || old[j].Key != c.Key || !old[j].Equal(c) {
			set(c)
		}
	}
}
