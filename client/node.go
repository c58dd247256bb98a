package client

import (
	"net/netip"
	"slices"
)

// Node is what a source tells a sink about this node's Node object when
// the sink asks for it (Needs.Node): its IP addresses and pod CIDRs. It is
// shared and read-only.
type Node struct {
	// Name is the node's name.
	Name string
	// Addresses are the node's IP addresses (status.addresses of type
	// InternalIP or ExternalIP), in the Node's order.
	Addresses []NodeAddress
	// PodCIDRs are the node's pod CIDRs (spec.podCIDRs, or spec.podCIDR
	// when the list is empty), in the Node's order.
	PodCIDRs []netip.Prefix
}

// NodeAddressType is the kind of a node address, as status.addresses names
// it.
type NodeAddressType string

// The node address types a Node carries (the others, Hostname, InternalDNS
// and ExternalDNS, are names, not addresses).
const (
	NodeInternalIP NodeAddressType = "InternalIP"
	NodeExternalIP NodeAddressType = "ExternalIP"
)

// NodeAddress is one IP address of a node and its kind.
type NodeAddress struct {
	Type NodeAddressType
	Addr netip.Addr
}

// Equal reports whether n and o hold the same facts (nil equals nil only).
func (n *Node) Equal(o *Node) bool {
	if n == nil || o == nil {
		return n == o
	}
	return n.Name == o.Name && slices.Equal(n.Addresses, o.Addresses) && slices.Equal(n.PodCIDRs, o.PodCIDRs)
}

// IPs returns the node's addresses of type t, in the Node's order.
func (n *Node) IPs(t NodeAddressType) []netip.Addr {
	if n == nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range n.Addresses {
		if a.Type == t {
			out = append(out, a.Addr)
		}
	}
	return out
}
