package nodelocal

import (
	"fmt"
	"net/netip"
	"strings"
)

// parseIP parses an IP address as the API objects give it; an address
// with a zone is invalid.
func parseIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("invalid IP %q", s)
	}
	return a, nil
}

// parseCIDR parses a CIDR (surrounding spaces allowed), IPv4-mapped IPv6
// prefixes unmapped and host bits cleared.
func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR %q", s)
	}
	return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()).Masked(), nil
}
