package xtables

import (
	"fmt"
	"net/netip"
)

// LocalMode is kube-proxy's detectLocalMode (--detect-local-mode): how
// its rules tell traffic from this node's pods from other traffic.
type LocalMode string

// The modes kube-proxy v1.37 knows.
const (
	// LocalClusterCIDR: traffic from the cluster's pod CIDR of the
	// family (clusterCIDR, --cluster-cidr) is local. The default.
	LocalClusterCIDR LocalMode = "ClusterCIDR"
	// LocalNodeCIDR: traffic from the node's pod CIDR of the family
	// (the Node's spec.podCIDRs) is local.
	LocalNodeCIDR LocalMode = "NodeCIDR"
	// LocalBridgeInterface: traffic that comes in through one bridge
	// (detectLocal.bridgeInterface, --pod-bridge-interface) is local.
	LocalBridgeInterface LocalMode = "BridgeInterface"
	// LocalInterfaceNamePrefix: traffic that comes in through an
	// interface whose name starts with a prefix
	// (detectLocal.interfaceNamePrefix, --pod-interface-name-prefix) is
	// local.
	LocalInterfaceNamePrefix LocalMode = "InterfaceNamePrefix"
)

// ParseLocalMode returns the mode named s ("" is ClusterCIDR, kube-proxy's
// default on Linux).
func ParseLocalMode(s string) (LocalMode, error) {
	switch m := LocalMode(s); m {
	case "":
		return LocalClusterCIDR, nil
	case LocalClusterCIDR, LocalNodeCIDR, LocalBridgeInterface, LocalInterfaceNamePrefix:
		return m, nil
	}
	return "", fmt.Errorf("%q is not ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix", s)
}

// LocalTraffic is a resolved local-traffic detection: by source prefix
// (the CIDR modes) or by input interface (the interface modes). The zero
// value detects nothing (kube-proxy's no-op detector): rules that need
// it are left out, or fall back as kube-proxy's do.
type LocalTraffic struct {
	// CIDRs are the pod CIDRs of the CIDR modes: traffic from the first
	// prefix of a family is local in that family; a family without one
	// detects nothing.
	CIDRs []netip.Prefix
	// Interface is the input interface of the interface modes, as
	// iptables matches it: a bridge's name, or a prefix followed by "+".
	// It applies to both families.
	Interface string
}

// NewLocalTraffic resolves a mode: cidrs are the cluster CIDRs
// (ClusterCIDR) or the node's pod CIDRs (NodeCIDR), iface the bridge
// (BridgeInterface) or the name prefix (InterfaceNamePrefix); an interface
// mode without its name is an error, as in kube-proxy's validation.
func NewLocalTraffic(m LocalMode, cidrs []netip.Prefix, iface string) (LocalTraffic, error) {
	switch m {
	case LocalClusterCIDR, LocalNodeCIDR, "":
		return LocalTraffic{CIDRs: cidrs}, nil
	case LocalBridgeInterface, LocalInterfaceNamePrefix:
		if iface == "" {
			return LocalTraffic{}, fmt.Errorf("local traffic mode %s needs an interface name", m)
		}
		if m == LocalInterfaceNamePrefix {
			iface += "+"
		}
		return LocalTraffic{Interface: iface}, nil
	}
	return LocalTraffic{}, fmt.Errorf("unknown local traffic mode %q", m)
}

// Source returns the prefix whose sources are local in the family
// (masked), or false when the detection is not by prefix or the family
// has none.
func (l LocalTraffic) Source(f Family) (netip.Prefix, bool) {
	if l.Interface != "" {
		return netip.Prefix{}, false
	}
	for _, p := range l.CIDRs {
		if p.Addr().Is6() == (f == IPv6) {
			return p.Masked(), true
		}
	}
	return netip.Prefix{}, false
}

// Detects reports whether the detection tells local traffic in the
// family (kube-proxy's IsImplemented).
func (l LocalTraffic) Detects(f Family) bool {
	_, ok := l.Source(f)
	return ok || l.Interface != ""
}

// Equal reports whether l and o detect the same traffic.
func (l LocalTraffic) Equal(o LocalTraffic) bool {
	if l.Interface != o.Interface {
		return false
	}
	for _, f := range []Family{IPv4, IPv6} {
		a, aok := l.Source(f)
		b, bok := o.Source(f)
		if aok != bok || a != b {
			return false
		}
	}
	return true
}
