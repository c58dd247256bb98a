package client

import (
	"slices"
)

// EndpointKey identifies an endpoint within its service. It is stable for the
// life of the endpoint: it does not change when the endpoint's conditions,
// hints or ports change, or when its other address family appears in another
// EndpointSlice. It is "Kind/namespace/name" of the endpoint's targetRef
// (usually the Pod) when the EndpointSlice gives one, else the endpoint's
// address.
type EndpointKey string

// PortOverride is the backend port an endpoint serves for a named service
// port, from the ports of the endpoint's EndpointSlice.
type PortOverride struct {
	Name     string
	Protocol Protocol
	Port     int
}

// Endpoint is one backend of a service as seen from this node.
type Endpoint struct {
	// Key identifies the endpoint within its service.
	Key EndpointKey
	// IPs are the endpoint's addresses: at most one per family in practice
	// (a dual-stack pod appears in an IPv4 and an IPv6 EndpointSlice and is
	// merged here by its targetRef).
	IPs IPs
	// Hostname is the endpoint's hostname, if any.
	Hostname string
	// NodeName is the node the endpoint runs on, if known.
	NodeName string
	// Zone is the endpoint's zone, if known.
	Zone string
	// Local is true when the endpoint runs on this node.
	Local bool

	// Ready, Serving and Terminating are the EndpointSlice conditions, with
	// the API's defaults applied, as kube-proxy reads them (unset ready
	// means ready; unset serving means serving; unset terminating means
	// not terminating).
	Ready       bool
	Serving     bool
	Terminating bool

	// Internal is true when this node sends cluster-internal traffic
	// (cluster IPs) to the endpoint, and External when it sends external
	// traffic (node ports, external IPs, load-balancer IPs) to it. They
	// apply the node-local rules: traffic policies, topology hints for this
	// node, and serving-terminating endpoints only when no ready endpoint
	// exists. Sinks program the endpoints that have the flag and nothing
	// else.
	Internal bool
	External bool
	// Cluster is true when the endpoint is one of the service's cluster
	// endpoints for this node (ready and allowed by topology hints, or
	// serving and terminating when none is), whatever the traffic
	// policies: what Internal or External marks under a Cluster policy.
	// Under Local policies sinks use them only where kube-proxy does, on
	// externally accessible services: a Local policy with no endpoint on
	// this node (IPVS, kubernetes PR 97081) and this node's own traffic to
	// external destinations (the iptables short-circuit).
	Cluster bool

	// PortOverrides give the backend port for each named service port, in
	// (name, protocol) order.
	PortOverrides []PortOverride
}

// PortFor returns the backend port of the endpoint for the service port p:
// the EndpointSlice port with p's name and protocol. ok is false when the
// endpoint does not serve p.
func (e *Endpoint) PortFor(p Port) (port int, ok bool) {
	for _, o := range e.PortOverrides {
		if o.Name == p.Name && o.Protocol == p.Protocol {
			return o.Port, true
		}
	}
	return 0, false
}

// Equal reports whether e and o describe the same endpoint, by content.
func (e *Endpoint) Equal(o *Endpoint) bool {
	if e == o {
		return true
	}
	if e == nil || o == nil {
		return false
	}
	return e.Key == o.Key && e.Hostname == o.Hostname && e.NodeName == o.NodeName &&
		e.Zone == o.Zone && e.Local == o.Local && e.Ready == o.Ready &&
		e.Serving == o.Serving && e.Terminating == o.Terminating &&
		e.Internal == o.Internal && e.External == o.External && e.Cluster == o.Cluster &&
		e.IPs.Equal(o.IPs) && slices.Equal(e.PortOverrides, o.PortOverrides)
}

// ServiceEndpoints is a service and its endpoints (sorted by Key), the unit
// of a full-state snapshot.
type ServiceEndpoints struct {
	Service   *Service
	Endpoints []*Endpoint
}

// Equal reports whether both hold the same service and endpoints, by content.
func (se *ServiceEndpoints) Equal(o *ServiceEndpoints) bool {
	if se == o {
		return true
	}
	if se == nil || o == nil {
		return false
	}
	return se.Service.Equal(o.Service) && slices.EqualFunc(se.Endpoints, o.Endpoints, (*Endpoint).Equal)
}

// NoLocalEndpoints reports whether the service has a Local traffic policy
// (external or internal) and no ready or serving endpoint on this node:
// what kube-proxy's kubeproxy_sync_proxy_rules_no_local_endpoints_total
// counts.
func (se *ServiceEndpoints) NoLocalEndpoints() bool {
	s := se.Service
	if s == nil || !s.ExternalTrafficLocal && !s.InternalTrafficLocal {
		return false
	}
	for _, e := range se.Endpoints {
		if e.Local && (e.Ready || e.Serving) {
			return false
		}
	}
	return true
}

// Endpoint returns the endpoint with key k, or nil. Endpoints must be sorted
// by key (as sources deliver them).
func (se *ServiceEndpoints) Endpoint(k EndpointKey) *Endpoint {
	i, ok := slices.BinarySearchFunc(se.Endpoints, k, func(e *Endpoint, k EndpointKey) int {
		switch {
		case e.Key < k:
			return -1
		case e.Key > k:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return se.Endpoints[i]
}
