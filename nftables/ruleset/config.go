package ruleset

import (
	"fmt"
	"net/netip"

	"github.com/proxysinks/proxysinks/host/xtables"
)

// DefaultMasqueradeBit is kube-proxy's nftables.masqueradeBit default: the
// bit of the packet mark that asks for masquerading (mark 0x00004000).
const DefaultMasqueradeBit = 14

// Config is what the render needs to know beyond the snapshot: kube-proxy
// v1.37.2's nftables-mode settings and this node's facts. Its zero value
// is kube-proxy's defaults with no local-traffic detection and NodePorts on
// every local address.
type Config struct {
	// MasqueradeBit is nftables.masqueradeBit (0-31, every value
	// kube-proxy accepts, 0 included); nil means DefaultMasqueradeBit.
	MasqueradeBit *int
	// MasqueradeAll is --masquerade-all: every packet to a cluster IP is
	// masqueraded.
	MasqueradeAll bool
	// Local tells traffic from this node's pods (--detect-local-mode,
	// resolved): a family it detects nothing in gets no masquerade rule
	// for off-cluster traffic and no short-circuit of pod traffic.
	Local xtables.LocalTraffic
	// IPv4 and IPv6 are the per-family facts.
	IPv4, IPv6 Family
}

// Family is what the render needs to know about the node in one IP
// family.
type Family struct {
	// NodeIP is the node's IP of the family (kube-proxy's nodeIP): a
	// load-balancer source range holding it lets the load-balancer IPs
	// in as sources (VIPs that loop back through the node).
	NodeIP netip.Addr
	// NodePortsRestricted is set when --nodeport-addresses restricts the
	// family (a CIDR of it, or primary, which is this mode's default):
	// NodePorts are then served on NodePortAddrs only, through the
	// nodeport-ips set. Unset: on every local address but loopback.
	NodePortsRestricted bool
	// NodePortAddrs are the node's addresses that serve NodePorts when
	// restricted (loopback addresses are left out, as kube-proxy does).
	NodePortAddrs []netip.Addr
}

// SetNodePorts sets both families' NodePort addresses from the runtime's
// selection (sinks/runtime.NodePorts: its CIDRs and Addrs): a family with
// a CIDR of its own is restricted to its addresses among addrs.
func (c *Config) SetNodePorts(cidrs []netip.Prefix, addrs []netip.Addr) {
	for _, v6 := range []bool{false, true} {
		f := c.family(v6)
		f.NodePortsRestricted, f.NodePortAddrs = false, nil
		for _, p := range cidrs {
			if p.Addr().Is6() == v6 {
				f.NodePortsRestricted = true
			}
		}
		for _, a := range addrs {
			if a = a.Unmap(); a.Is6() == v6 {
				f.NodePortAddrs = append(f.NodePortAddrs, a)
			}
		}
	}
}

// family returns the facts of one family.
func (c *Config) family(v6 bool) *Family {
	if v6 {
		return &c.IPv6
	}
	return &c.IPv4
}

// Bit returns the masquerade bit: MasqueradeBit, or DefaultMasqueradeBit
// when it is nil.
func (c *Config) Bit() int {
	if c.MasqueradeBit == nil {
		return DefaultMasqueradeBit
	}
	return *c.MasqueradeBit
}

// mark returns the masquerade mark as kube-proxy writes it (%#08x).
func (c *Config) mark() (string, error) {
	bit := c.Bit()
	if bit < 0 || bit > 31 {
		return "", fmt.Errorf("nftables ruleset: masquerade bit %d is not in 0-31", bit)
	}
	return fmt.Sprintf("%#08x", uint32(1)<<bit), nil
}
