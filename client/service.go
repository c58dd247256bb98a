package client

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// ServiceKey identifies a Service: its namespace and name. It is comparable
// and orders services in snapshots (namespace first, then name).
type ServiceKey struct {
	Namespace string
	Name      string
}

// String returns "namespace/name".
func (k ServiceKey) String() string { return k.Namespace + "/" + k.Name }

// Compare orders keys by namespace, then name. It returns -1, 0 or +1.
func (k ServiceKey) Compare(o ServiceKey) int {
	if c := strings.Compare(k.Namespace, o.Namespace); c != 0 {
		return c
	}
	return strings.Compare(k.Name, o.Name)
}

// ServiceType is how a Service is exposed. Headless and ExternalName
// services never reach a sink.
type ServiceType string

// The service types a sink serves.
const (
	ClusterIP    ServiceType = "ClusterIP"
	NodePort     ServiceType = "NodePort"
	LoadBalancer ServiceType = "LoadBalancer"
)

// Protocol is a transport protocol of a service port.
type Protocol string

// The protocols Kubernetes services support.
const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// IPs holds addresses split by family. Both lists are in the order the API
// object gave them, without duplicates.
type IPs struct {
	V4 []netip.Addr
	V6 []netip.Addr
}

// All returns the IPv4 addresses followed by the IPv6 ones, in a new slice.
func (ips IPs) All() []netip.Addr {
	out := make([]netip.Addr, 0, len(ips.V4)+len(ips.V6))
	out = append(out, ips.V4...)
	return append(out, ips.V6...)
}

// Family returns the IPv6 list when v6 is true, else the IPv4 list.
func (ips IPs) Family(v6 bool) []netip.Addr {
	if v6 {
		return ips.V6
	}
	return ips.V4
}

// Len is the number of addresses of both families.
func (ips IPs) Len() int { return len(ips.V4) + len(ips.V6) }

// Add appends a to the list of its family unless it is already there. It
// reports whether a was added.
func (ips *IPs) Add(a netip.Addr) bool {
	a = a.Unmap()
	l := &ips.V4
	if a.Is6() {
		l = &ips.V6
	}
	if slices.Contains(*l, a) {
		return false
	}
	*l = append(*l, a)
	return true
}

// Equal reports whether both hold the same addresses in the same order.
func (ips IPs) Equal(o IPs) bool {
	return slices.Equal(ips.V4, o.V4) && slices.Equal(ips.V6, o.V6)
}

// Port is one port of a Service.
type Port struct {
	// Name is the port's name; it is empty only on single-port services.
	// Endpoints give the backend port for this name (Endpoint.PortFor).
	Name     string
	Protocol Protocol
	// Port is the service port (1-65535) on cluster, external and
	// load-balancer IPs.
	Port int
	// NodePort is the port on every node address (30000-32767 by
	// default); 0 when the service has none (type ClusterIP).
	NodePort int
	// TargetPort is the numeric target port from the Service spec, or 0 when
	// the spec names the container port (TargetPortName). Backends use the
	// port the EndpointSlice gives (Endpoint.PortFor), which is the
	// resolved number in both cases.
	TargetPort int
	// TargetPortName is the container port's name when the spec names it.
	TargetPortName string
}

// SessionAffinity is the ClientIP affinity of a Service. A nil
// *SessionAffinity means no affinity.
type SessionAffinity struct {
	// TimeoutSeconds is the sticky time (1-86400; Kubernetes' default is
	// 10800).
	TimeoutSeconds int
}

// Service is what a node must serve for one Kubernetes Service.
type Service struct {
	Namespace string
	Name      string
	Type      ServiceType

	// ClusterIPs are spec.clusterIPs (one per family at most).
	ClusterIPs IPs
	// ExternalIPs are spec.externalIPs.
	ExternalIPs IPs
	// LoadBalancerIPs are status.loadBalancer.ingress[].ip of a LoadBalancer
	// service, except ingress points whose ipMode is Proxy (the load
	// balancer delivers traffic to node ports itself).
	LoadBalancerIPs IPs

	// Ports in spec order.
	Ports []Port

	// SessionAffinity is non-nil for ClientIP affinity.
	SessionAffinity *SessionAffinity

	// ExternalTrafficLocal is externalTrafficPolicy=Local on a service
	// reachable from outside (NodePort, LoadBalancer or external IPs):
	// external traffic goes to local endpoints only and keeps its source IP.
	ExternalTrafficLocal bool
	// InternalTrafficLocal is internalTrafficPolicy=Local: traffic to the
	// cluster IPs goes to local endpoints only.
	InternalTrafficLocal bool
	// HealthCheckNodePort is spec.healthCheckNodePort of a LoadBalancer
	// service with ExternalTrafficLocal, else 0.
	HealthCheckNodePort int

	// LoadBalancerSourceRanges are the client ranges allowed to reach the
	// load-balancer IPs (spec.loadBalancerSourceRanges), masked to their
	// prefix length. They apply per family: the load-balancer IPs of a
	// family without a range (or with a zero-length one) are open to
	// every client (see SourceRanges).
	LoadBalancerSourceRanges []netip.Prefix

	// Labels are the Service's labels.
	Labels map[string]string
	// Annotations are the Service's annotations, without
	// kubectl.kubernetes.io/last-applied-configuration. Sinks read their
	// per-service options here (e.g. proxysinks.io/ipvs-scheduler).
	Annotations map[string]string
}

// Key returns the service's key.
func (s *Service) Key() ServiceKey { return ServiceKey{Namespace: s.Namespace, Name: s.Name} }

// ExternallyAccessible reports whether traffic from outside the cluster can
// reach the service: it is a NodePort or LoadBalancer service, or it has
// external IPs.
func (s *Service) ExternallyAccessible() bool {
	return s.Type == NodePort || s.Type == LoadBalancer || s.ExternalIPs.Len() > 0
}

// SourceRanges returns the load-balancer source ranges of one family (IPv6
// when v6), nil when the family's load-balancer IPs are open to every
// client: no range of the family, or a zero-length one ("0.0.0.0/0" and
// "::/0" mean allow all, as in kube-proxy). Invalid prefixes are left out.
func (s *Service) SourceRanges(v6 bool) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s.LoadBalancerSourceRanges {
		if !p.IsValid() || p.Addr().Is6() != v6 {
			continue // an invalid prefix cannot reach a kernel
		}
		if p.Bits() == 0 {
			return nil
		}
		out = append(out, p)
	}
	return out
}

// Equal reports whether s and o describe the same service, by content.
func (s *Service) Equal(o *Service) bool {
	if s == o {
		return true
	}
	if s == nil || o == nil {
		return false
	}
	if s.Namespace != o.Namespace || s.Name != o.Name || s.Type != o.Type ||
		s.ExternalTrafficLocal != o.ExternalTrafficLocal ||
		s.InternalTrafficLocal != o.InternalTrafficLocal ||
		s.HealthCheckNodePort != o.HealthCheckNodePort {
		return false
	}
	if !s.ClusterIPs.Equal(o.ClusterIPs) || !s.ExternalIPs.Equal(o.ExternalIPs) ||
		!s.LoadBalancerIPs.Equal(o.LoadBalancerIPs) {
		return false
	}
	if !slices.Equal(s.Ports, o.Ports) || !slices.Equal(s.LoadBalancerSourceRanges, o.LoadBalancerSourceRanges) {
		return false
	}
	if (s.SessionAffinity == nil) != (o.SessionAffinity == nil) ||
		s.SessionAffinity != nil && *s.SessionAffinity != *o.SessionAffinity {
		return false
	}
	return maps.Equal(s.Labels, o.Labels) && maps.Equal(s.Annotations, o.Annotations)
}
