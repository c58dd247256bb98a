package nodelocal

import (
	"net/netip"
	"testing"

	netutils "k8s.io/utils/net"
)

// kube-proxy v1.37.2 reads addresses with k8s.io/utils/net's
// ParseIPSloppy and ParseCIDRSloppy (the version in its go.mod, which
// this module's graph holds): parseIP and parseCIDR must accept, refuse
// and read every input as they do, zones aside (Go 1.16's parser has
// none, and refuses them too).

var sloppySeeds = []string{
	"192.0.2.1", "192.0.2.052", "0192.0.2.1", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.-1", "1..2.3",
	"::ffff:1.2.3.4", "::ffff:01.02.03.04", "::1.2.3.4", "1::1.2.3.4", "::", "::0", ":::", "2001:db8::00001",
	"2001:db8::10000", "2001:DB8::1", "fe80::1%eth0", "", " ", "1.2.3.4 ", "a.b.c.d", "::ffff:", "1:2:3:4:5:6:7:8",
	"1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:1.2.3.4", "::ffff:10.0.0.0", "0.0.0.0", "00000000001.2.3.4",
}

var sloppyCIDRSeeds = []string{
	"10.0.0.0/8", "10.1.2.3/8", "010.0.0.0/08", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0", "/8", "10.0.0.0/+8",
	"::ffff:10.0.0.0/104", "::ffff:10.1.0.0/104", "::ffff:0.0.0.0/96", "::ffff:10.0.0.0/80", "::/0", "0.0.0.0/0",
	"2001:db8::/32", "2001:db8::/129", "2001:db8::/0032", "fe80::%eth0/64", "garbage", "1.2.3.4/32/1", "::1.2.3.4/128",
}

// sameAsSloppyIP reports why parseIP reads s differently from
// ParseIPSloppy, or "".
func sameAsSloppyIP(s string) string {
	want := netutils.ParseIPSloppy(s)
	got, _, err := parseIP(s)
	switch {
	case want == nil && err == nil:
		return "accepted " + got.String() + ", kube-proxy refuses it"
	case want != nil && err != nil:
		return "refused, kube-proxy reads " + want.String()
	case want != nil && got.String() != want.String():
		return "read as " + got.String() + ", kube-proxy reads " + want.String()
	}
	return ""
}

// sameAsSloppyCIDR reports why parseCIDR reads s differently from
// ParseCIDRSloppy (the network kube-proxy programs: IPNet.String), or "".
func sameAsSloppyCIDR(s string) string {
	_, want, werr := netutils.ParseCIDRSloppy(s)
	got, _, err := parseCIDR(s)
	switch {
	case werr != nil && err == nil:
		return "accepted " + got.String() + ", kube-proxy refuses it"
	case werr == nil && err != nil:
		return "refused, kube-proxy reads " + want.String()
	case werr == nil && got.String() != want.String():
		return "read as " + got.String() + ", kube-proxy reads " + want.String()
	case werr == nil && got.Addr().Is4() != (want.IP.To4() != nil):
		return "family differs from kube-proxy's"
	}
	return ""
}

func TestParseSameAsKubeProxy(t *testing.T) {
	for _, s := range sloppySeeds {
		if why := sameAsSloppyIP(s); why != "" {
			t.Errorf("parseIP(%q): %s", s, why)
		}
	}
	for _, s := range sloppyCIDRSeeds {
		if why := sameAsSloppyCIDR(s); why != "" {
			t.Errorf("parseCIDR(%q): %s", s, why)
		}
	}
}

// FuzzParseSameAsKubeProxy: parseIP and parseCIDR agree with kube-proxy's
// parsers on any input.
func FuzzParseSameAsKubeProxy(f *testing.F) {
	for _, s := range append(sloppySeeds, sloppyCIDRSeeds...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if why := sameAsSloppyIP(s); why != "" {
			t.Errorf("parseIP(%q): %s", s, why)
		}
		if why := sameAsSloppyCIDR(s); why != "" {
			t.Errorf("parseCIDR(%q): %s", s, why)
		}
		if p, _, err := parseCIDR(s); err == nil && (!p.IsValid() || p != p.Masked()) {
			t.Errorf("parseCIDR(%q) = %v: not a valid masked prefix", s, p)
		}
		if a, _, err := parseIP(s); err == nil && (a.Is4In6() || a.Zone() != "" || a == (netip.Addr{})) {
			t.Errorf("parseIP(%q) = %v: mapped, zoned or invalid", s, a)
		}
	})
}
