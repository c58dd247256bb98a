package client

// Routing is how kube-proxy's iptables and nftables modes route a service
// port's traffic from its traffic policies (its CategorizeEndpoints): which
// endpoints are the port's cluster endpoints and which its local ones.
// The source already applied the policies, topology and the terminating
// fallback to each Endpoint's Internal, External and Cluster; when both
// policies are Local, the cluster endpoints serve only this node's own
// traffic to the port's external destinations.
type Routing struct {
	// Accessible: the port has a node port, external IPs or load-balancer
	// IPs.
	Accessible bool
	// InternalLocal and ExternalLocal are the Local traffic policies (the
	// external one only where the service is externally accessible).
	InternalLocal, ExternalLocal bool
	// UsesCluster and UsesLocal: the cluster and the local endpoints
	// matter.
	UsesCluster, UsesLocal bool
}

// Routing returns the routing of a port of s; accessible tells whether the
// port is reached from outside the cluster (Routing.Accessible).
func (s *Service) Routing(accessible bool) Routing {
	r := Routing{
		Accessible:    accessible,
		InternalLocal: s.InternalTrafficLocal,
		ExternalLocal: s.ExternalTrafficLocal && s.ExternallyAccessible(),
	}
	r.UsesCluster = !r.InternalLocal || accessible
	r.UsesLocal = r.InternalLocal || r.ExternalLocal && accessible
	return r
}

// Categorize tells whether an endpoint whose Internal, External and
// Cluster are internal, external and cluster is one of the port's cluster
// endpoints and one of its local ones.
func (r Routing) Categorize(internal, external, cluster bool) (inCluster, inLocal bool) {
	switch {
	case !r.UsesCluster:
	case !r.InternalLocal:
		inCluster = internal
	case !r.ExternalLocal:
		inCluster = external
	default:
		inCluster = cluster
	}
	switch {
	case !r.UsesLocal:
	case r.InternalLocal:
		inLocal = internal
	default:
		inLocal = external
	}
	return inCluster, inLocal
}
