package nodelocal

import (
	"fmt"
	"net/netip"
	"strings"
)

// The conversion reads addresses and prefixes as kube-proxy v1.37.2 does
// (k8s.io/utils/net ParseIPSloppy and ParseCIDRSloppy, Go 1.16's parser):
// IPv4 components with leading zeros are decimal ("192.0.2.052" is
// 192.0.2.52; apiservers without StrictIPCIDRValidation accept such
// values), IPv6 groups may carry leading zeros beyond four digits, a
// prefix length may have leading zeros, and an IPv4-mapped IPv6 address
// or prefix is IPv4 (kube-proxy's family of ::ffff:10.0.0.0/104 is IPv4 and
// it programs 10.0.0.0/8). Zones are refused (Go 1.16's parser has none).

// repair says how a value was read differently from its text; the zero
// value means it was read as written.
type repair struct {
	sloppy bool // leading zeros
	mapped bool // IPv4-mapped IPv6, read as IPv4
	masked bool // host bits of a prefix cleared
}

// any reports whether a value was repaired.
func (r repair) any() bool { return r != repair{} }

// String names the repairs, "" when there is none.
func (r repair) String() string {
	var parts []string
	if r.sloppy {
		parts = append(parts, "leading zeros read as decimal")
	}
	if r.mapped {
		parts = append(parts, "IPv4-mapped IPv6 read as IPv4")
	}
	if r.masked {
		parts = append(parts, "host bits cleared")
	}
	return strings.Join(parts, ", ")
}

// parseIP parses an IP address as kube-proxy does (see above); an
// IPv4-mapped address is returned as IPv4.
func parseIP(s string) (netip.Addr, repair, error) {
	a, sloppy, ok := parseAddr(s)
	if !ok {
		return netip.Addr{}, repair{}, fmt.Errorf("invalid IP %q", s)
	}
	r := repair{sloppy: sloppy, mapped: a.Is4In6()}
	return a.Unmap(), r, nil
}

// parseCIDR parses a CIDR as kube-proxy does (see above), host bits
// cleared; an IPv4-mapped IPv6 prefix of 96 bits or more is returned as
// the IPv4 prefix it maps. Surrounding spaces are the caller's.
func parseCIDR(s string) (netip.Prefix, repair, error) {
	bad := func() (netip.Prefix, repair, error) {
		return netip.Prefix{}, repair{}, fmt.Errorf("invalid CIDR %q", s)
	}
	addr, bitsText, ok := strings.Cut(s, "/")
	if !ok {
		return bad()
	}
	a, sloppy, ok := parseAddr(addr)
	if !ok {
		return bad()
	}
	bits, bitsSloppy, ok := decimal(bitsText, a.BitLen())
	if !ok {
		return bad()
	}
	r := repair{sloppy: sloppy || bitsSloppy}
	p := netip.PrefixFrom(a, bits)
	m := p.Masked()
	r.masked = m != p
	if m.Addr().Is4In6() {
		// Only a prefix of 96 bits or more keeps the ::ffff: part.
		r.mapped = true
		m = netip.PrefixFrom(m.Addr().Unmap(), bits-96)
	}
	return m, r, nil
}

// parseAddr parses an address as Go 1.16's net.ParseIP did: the first
// '.' or ':' says the family; sloppy reports leading zeros. An
// IPv4-mapped address is left mapped.
func parseAddr(s string) (a netip.Addr, sloppy, ok bool) {
	// The strict parser accepts a subset of what Go 1.16's did, zones
	// aside: try it first.
	if a, err := netip.ParseAddr(s); err == nil {
		return a, false, a.Zone() == ""
	}
	i := strings.IndexAny(s, ".:")
	if i < 0 {
		return netip.Addr{}, false, false
	}
	if s[i] == '.' {
		return parseIPv4(s)
	}
	if strings.ContainsRune(s, '%') {
		return netip.Addr{}, false, false // no zones
	}
	// Leading zeros: drop them from every hex group and from the
	// components of a trailing IPv4 part, and parse again.
	groups := strings.Split(s, ":")
	last := len(groups) - 1
	for j, g := range groups {
		if j == last && strings.Contains(g, ".") {
			v4, _, ok := parseIPv4(g)
			if !ok {
				return netip.Addr{}, false, false
			}
			groups[j] = v4.String()
			continue
		}
		if len(g) > 1 {
			t := strings.TrimLeft(g, "0")
			if t == "" {
				t = "0"
			}
			groups[j] = t
		}
	}
	a, err := netip.ParseAddr(strings.Join(groups, ":"))
	if err != nil {
		return netip.Addr{}, false, false
	}
	return a, true, true
}

// parseIPv4 parses dotted decimal, leading zeros allowed (sloppy reports
// them).
func parseIPv4(s string) (a netip.Addr, sloppy, ok bool) {
	var b [4]byte
	for i := range b {
		part := s
		if i < 3 {
			dot := strings.IndexByte(s, '.')
			if dot < 0 {
				return netip.Addr{}, false, false
			}
			part, s = s[:dot], s[dot+1:]
		}
		n, z, ok := decimal(part, 255)
		if !ok {
			return netip.Addr{}, false, false
		}
		b[i], sloppy = byte(n), sloppy || z
	}
	return netip.AddrFrom4(b), sloppy, true
}

// decimal parses a non-empty string of digits no larger than limit;
// sloppy reports leading zeros.
func decimal(s string, limit int) (n int, sloppy, ok bool) {
	if s == "" {
		return 0, false, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false, false
		}
		n = n*10 + int(c-'0')
		if n > limit {
			return 0, false, false
		}
	}
	return n, len(s) > 1 && s[0] == '0', true
}
