package runtime

import (
	"sync"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
)

// changeCounter turns the source's snapshots into kube-proxy's change
// metrics: kubeproxy_sync_proxy_rules_{service,endpoint}_changes_total
// and _pending, and the last-queued time. It compares each snapshot with
// the one before it from the source, in proportion to its changes.
type changeCounter struct {
	m    *httpserve.Metrics
	mu   sync.Mutex
	prev *client.Snapshot
	// pending changes, not handed to the controller yet.
	services, endpoints int
}

// queued counts the changes of a snapshot the source delivered.
func (c *changeCounter) queued(s *client.Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	svcs, eps := 0, 0
	count := func(old, cur *client.ServiceEndpoints) {
		oldSvc, curSvc := serviceOf(old), serviceOf(cur)
		if !oldSvc.Equal(curSvc) {
			svcs++
		}
		if (old != nil || cur != nil) && !endpointsEqual(old, cur) {
			eps++
		}
	}
	forChanges(c.prev, s, count)
	c.prev = s
	c.services += svcs
	c.endpoints += eps
	c.m.ServiceChanges.Add(float64(svcs))
	c.m.EndpointChanges.Add(float64(eps))
	c.m.ServiceChangesPending.Set(float64(c.services))
	c.m.EndpointChangesPending.Set(float64(c.endpoints))
	c.m.Queued()
}

// handedOver marks the pending changes as taken by the controller.
func (c *changeCounter) handedOver() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.services, c.endpoints = 0, 0
	c.m.ServiceChangesPending.Set(0)
	c.m.EndpointChangesPending.Set(0)
}

// serviceOf is se's Service (nil for nil).
func serviceOf(se *client.ServiceEndpoints) *client.Service {
	if se == nil {
		return nil
	}
	return se.Service
}

// endpointsEqual reports whether a and b (either nil) hold equal
// endpoints.
func endpointsEqual(a, b *client.ServiceEndpoints) bool {
	var ea, eb []*client.Endpoint
	if a != nil {
		ea = a.Endpoints
	}
	if b != nil {
		eb = b.Endpoints
	}
	if len(ea) != len(eb) {
		return false
	}
	for i := range ea {
		if !ea[i].Equal(eb[i]) {
			return false
		}
	}
	return true
}

// forChanges calls f with each service's content in prev (nil: none) and
// in s where s changed it: s's changes, or, when s does not know them,
// every service of both.
func forChanges(prev, s *client.Snapshot, f func(old, cur *client.ServiceEndpoints)) {
	lookup := func(p *client.Snapshot, k client.ServiceKey) *client.ServiceEndpoints {
		if p == nil {
			return nil
		}
		return p.Lookup(k)
	}
	if !s.Full {
		for _, ch := range s.Changes {
			f(lookup(prev, ch.Key), ch.Service)
		}
		return
	}
	for se := range s.All() {
		if old := lookup(prev, se.Service.Key()); old != se {
			f(old, se)
		}
	}
	if prev != nil {
		for se := range prev.All() {
			if s.Lookup(se.Service.Key()) == nil {
				f(se, nil)
			}
		}
	}
}

// noLocalCounter keeps kube-proxy's counts of services with a Local
// traffic policy and no local endpoint, by policy, over the snapshots
// handed to the controller, in proportion to their changes.
type noLocalCounter struct {
	prev               *client.Snapshot
	internal, external int
}

// handedOver updates the counts from a snapshot handed to the controller.
func (n *noLocalCounter) handedOver(s *client.Snapshot) {
	if s.Full {
		n.prev, n.internal, n.external = nil, 0, 0
	}
	forChanges(n.prev, s, func(old, cur *client.ServiceEndpoints) {
		i, e := noLocal(old)
		n.internal -= i
		n.external -= e
		i, e = noLocal(cur)
		n.internal += i
		n.external += e
	})
	n.prev = s
}

// noLocal returns 1 for each of its policies under which se is Local and
// has no local endpoint, as kube-proxy counts them: a service without any
// endpoint (rejected) has none.
func noLocal(se *client.ServiceEndpoints) (internal, external int) {
	if se == nil || se.Service == nil {
		return 0, 0
	}
	any, local := false, false
	for _, e := range se.Endpoints {
		if e.Ready || e.Serving {
			any = true
			local = local || e.Local
		}
	}
	if !any || local {
		return 0, 0
	}
	svc := se.Service
	if svc.InternalTrafficLocal {
		internal = 1
	}
	if svc.ExternalTrafficLocal && svc.ExternallyAccessible() {
		external = 1
	}
	return internal, external
}

// ipFamilies are the ip_family values of the per-family metrics: IPv4,
// and IPv6 when this host has it.
func ipFamilies() []string {
	if ipv6Supported() {
		return []string{"IPv4", "IPv6"}
	}
	return []string{"IPv4"}
}
