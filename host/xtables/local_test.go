package xtables

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLocalTraffic: each mode resolves to kube-proxy's detector: the first
// prefix of each family for the CIDR modes, the bridge or "<prefix>+" for
// the interface modes; an interface mode without a name and an unknown
// mode are errors.
func TestLocalTraffic(t *testing.T) {
	pfx := netip.MustParsePrefix
	cidrs := []netip.Prefix{pfx("10.244.1.7/16"), pfx("10.99.0.0/16"), pfx("fd00:244::/48")}
	for _, tc := range []struct {
		mode      string
		iface     string
		want      LocalTraffic
		src4      string // "" when not by prefix
		detects6  bool
		wantError bool
	}{
		{mode: "", want: LocalTraffic{CIDRs: cidrs}, src4: "10.244.0.0/16", detects6: true},
		{mode: "NodeCIDR", want: LocalTraffic{CIDRs: cidrs}, src4: "10.244.0.0/16", detects6: true},
		{mode: "BridgeInterface", iface: "cbr0", want: LocalTraffic{Interface: "cbr0"}, detects6: true},
		{mode: "InterfaceNamePrefix", iface: "veth", want: LocalTraffic{Interface: "veth+"}, detects6: true},
		{mode: "BridgeInterface", wantError: true},
		{mode: "InterfaceNamePrefix", wantError: true},
		{mode: "Pods", wantError: true},
	} {
		m, err := ParseLocalMode(tc.mode)
		var l LocalTraffic
		if err == nil {
			l, err = NewLocalTraffic(m, cidrs, tc.iface)
		}
		if (err != nil) != tc.wantError {
			t.Errorf("%q %q: error %v, want error %v", tc.mode, tc.iface, err, tc.wantError)
			continue
		}
		if tc.wantError {
			continue
		}
		if diff := cmp.Diff(tc.want, l, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
			t.Errorf("%q: (-want +got):\n%s", tc.mode, diff)
		}
		p, ok := l.Source(IPv4)
		if got := map[bool]string{true: p.String(), false: ""}[ok]; got != tc.src4 {
			t.Errorf("%q: IPv4 source %q, want %q", tc.mode, got, tc.src4)
		}
		if l.Detects(IPv6) != tc.detects6 || !l.Detects(IPv4) {
			t.Errorf("%q: detects IPv4 %v, IPv6 %v", tc.mode, l.Detects(IPv4), l.Detects(IPv6))
		}
	}
	v4only := LocalTraffic{CIDRs: []netip.Prefix{pfx("10.244.1.0/24")}}
	if v4only.Detects(IPv6) {
		t.Error("an IPv4 pod CIDR detects IPv6 traffic")
	}
	if !v4only.Equal(LocalTraffic{CIDRs: []netip.Prefix{pfx("10.244.1.9/24"), pfx("10.1.0.0/16")}}) || v4only.Equal(LocalTraffic{CIDRs: []netip.Prefix{pfx("10.244.2.0/24")}}) {
		t.Error("Equal does not compare the first prefix of each family")
	}
}
