package runtime

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/proxysinks/proxysinks/client"
)

// NodePorts is where a sink serves NodePorts: the selection of the node's
// addresses by --nodeport-addresses (kube-proxy's nodePortAddresses), as
// kube-proxy v1.37 makes it per IP family. A sink gets the first in
// Env.NodePorts and every later one through NodePortsSetter.
type NodePorts struct {
	// CIDRs are --nodeport-addresses with the keywords expanded: primary
	// to the node's primary IPs (/32, /128), localhost to 127.0.0.0/8 and
	// ::1/128. A family with none of them, or whose list holds its zero
	// CIDR (the all keyword), is not restricted: NodePorts are served on
	// every local address of it. Sorted.
	CIDRs []netip.Prefix
	// Addrs are the node's addresses that serve NodePorts, sorted: in a
	// restricted family those in CIDRs (loopback ones too when a CIDR
	// holds them: a sink that does not serve NodePorts on loopback skips
	// them); in the other families every address but loopback and IPv6
	// link-local ones, as kube-proxy's IPVS mode lists them.
	Addrs []netip.Addr
}

// Equal reports whether n and o select the same.
func (n NodePorts) Equal(o NodePorts) bool {
	return slices.Equal(n.CIDRs, o.CIDRs) && slices.Equal(n.Addrs, o.Addrs)
}

// Restricted reports whether NodePorts of a's family are served only on
// the addresses in CIDRs.
func (n NodePorts) Restricted(a netip.Addr) bool {
	return slices.ContainsFunc(n.CIDRs, func(p netip.Prefix) bool { return p.Addr().Is4() == a.Is4() })
}

// NodePortsSetter is a Controller that serves NodePorts on the node's
// addresses, and follows their changes: when the selection changes (an
// address added to or removed from the node, the Node's primary IP
// changing) the runtime calls SetNodePorts, then hands the controller its
// last snapshot again, which it programs on the new selection. Both run
// on the runtime's loop, never while a split resync's read
// (SplitResyncer) runs. Every sink's controller implements it.
type NodePortsSetter interface {
	SetNodePorts(NodePorts)
}

// The keywords of --nodeport-addresses (kube-proxy v1.37's).
const (
	NodePortPrimary   = "primary"
	NodePortLocalhost = "localhost"
	NodePortAll       = "all"
)

// defaultNodePortAddresses is --nodeport-addresses when none is given for
// a sink of mode: kube-proxy v1.37 serves NodePorts on the node's primary
// IPs in its nftables mode, on every address in the others (none).
func defaultNodePortAddresses(mode string) []string {
	if mode == "nftables" {
		return []string{NodePortPrimary}
	}
	return nil
}

// parseNodePortAddresses parses --nodeport-addresses: CIDRs and the
// keywords, each at most once. localhost and all expand here; primary,
// whose addresses come from the node, is reported.
func parseNodePortAddresses(vals []string) (cidrs []netip.Prefix, primary bool, err error) {
	seen := map[string]bool{}
	for _, v := range splitAll(vals) {
		switch v {
		case NodePortPrimary, NodePortLocalhost, NodePortAll:
			if seen[v] {
				return nil, false, fmt.Errorf("--nodeport-addresses: %q given twice", v)
			}
			seen[v] = true
		}
		switch v {
		case NodePortPrimary:
			primary = true
		case NodePortLocalhost:
			cidrs = append(cidrs, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
		case NodePortAll:
			cidrs = append(cidrs, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"))
		default:
			p, err := ParsePrefixes("nodeport-addresses", []string{v})
			if err != nil {
				return nil, false, fmt.Errorf("%w (nor primary, localhost or all)", err)
			}
			cidrs = append(cidrs, p...)
		}
	}
	return cidrs, primary, nil
}

// PrimaryIPs returns the node's primary IPs as kube-proxy v1.37 detects
// them (detectNodeIPs): the Node's first address (InternalIPs before
// ExternalIPs) and its first of the other family; bind (--bind-address),
// when valid and not unspecified, replaces the one of its family. A family
// known from neither has none (kube-proxy assumes loopback, which primary
// then leaves out).
func PrimaryIPs(node *client.Node, bind netip.Addr) []netip.Addr {
	var v4, v6 netip.Addr
	if node != nil {
		var ordered []netip.Addr
		for _, t := range []client.NodeAddressType{client.NodeInternalIP, client.NodeExternalIP} {
			for _, a := range node.Addresses {
				if a.Type == t {
					ordered = append(ordered, a.Addr.Unmap())
				}
			}
		}
		for _, a := range ordered {
			switch {
			case a.Is4() && !v4.IsValid():
				v4 = a
			case a.Is6() && !v6.IsValid():
				v6 = a
			}
			// kube-proxy keeps the first address and the first of the
			// other family after it.
			if v4.IsValid() && v6.IsValid() {
				break
			}
		}
	}
	if bind.IsValid() && !bind.IsUnspecified() {
		if bind = bind.Unmap(); bind.Is4() {
			v4 = bind
		} else {
			v6 = bind
		}
	}
	var out []netip.Addr
	for _, a := range []netip.Addr{v4, v6} {
		if a.IsValid() && !a.IsLoopback() {
			out = append(out, a)
		}
	}
	return out
}

// SelectNodePorts selects where NodePorts are served from the node's
// addresses: the CIDRs of --nodeport-addresses and, with primary, the
// primary IPs (PrimaryIPs) as /32 and /128.
func (c Config) SelectNodePorts(addrs, primary []netip.Addr) NodePorts {
	cidrs := slices.Clone(c.NodePortAddresses)
	if c.NodePortPrimary {
		for _, a := range primary {
			cidrs = append(cidrs, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	// A family whose list holds its zero CIDR is not restricted.
	for _, is4 := range []bool{true, false} {
		if slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Addr().Is4() == is4 && p.Bits() == 0 }) {
			cidrs = slices.DeleteFunc(cidrs, func(p netip.Prefix) bool { return p.Addr().Is4() == is4 })
		}
	}
	slices.SortFunc(cidrs, netip.Prefix.Compare)
	n := NodePorts{CIDRs: slices.Compact(cidrs)}
	for _, a := range addrs {
		a = a.Unmap()
		if n.Restricted(a) {
			if slices.ContainsFunc(n.CIDRs, func(p netip.Prefix) bool { return p.Contains(a) }) {
				n.Addrs = append(n.Addrs, a)
			}
			continue
		}
		if !a.IsLoopback() && !(a.Is6() && a.IsLinkLocalUnicast()) {
			n.Addrs = append(n.Addrs, a)
		}
	}
	slices.SortFunc(n.Addrs, netip.Addr.Compare)
	n.Addrs = slices.Compact(n.Addrs)
	return n
}
