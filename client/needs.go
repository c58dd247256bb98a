package client

// Needs are the optional kinds and fields a sink asks its source for, beyond
// Services and EndpointSlices.
type Needs struct {
	// Node asks for the node's addresses and pod CIDRs (Snapshot.Node).
	Node bool
	// ServiceCIDRs asks for the cluster's ServiceCIDR objects
	// (Snapshot.ServiceCIDRs).
	ServiceCIDRs bool
}
