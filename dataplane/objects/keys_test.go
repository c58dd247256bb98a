package objects

import (
	"net/netip"
	"testing"

	"github.com/proxysinks/proxysinks/dataplane/render"
)

// TestKeysRoundTrip checks that the stores' compact keys give back exactly
// the rendered objects, and that objects that differ get different keys:
// IPv4 and IPv4-mapped IPv6 addresses, zones, invalid addresses and
// prefixes, and prefixes with and without a valid length.
func TestKeysRoundTrip(t *testing.T) {
	addrs := []netip.Addr{
		{},
		netip.MustParseAddr("10.96.0.10"),
		netip.MustParseAddr("::ffff:10.96.0.10"),
		netip.MustParseAddr("fd00::10"),
		netip.MustParseAddr("fe80::1%eth0"),
		netip.MustParseAddr("fe80::1%eth1"),
		netip.MustParseAddr("fe80::1"),
	}
	prefixes := []netip.Prefix{
		{},
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("10.0.0.0/9"),
		netip.MustParsePrefix("fd00::/64"),
		netip.PrefixFrom(netip.MustParseAddr("10.0.0.0"), 99), // invalid length
		netip.PrefixFrom(netip.MustParseAddr("fe80::1%eth0"), 64),
	}
	m := &Keys{}
	for _, a := range addrs {
		if got := m.AddrOf(m.Addr(a)); got != a {
			t.Errorf("address %v (zone %q) came back as %v (zone %q)", a, a.Zone(), got, got.Zone())
		}
		for _, b := range addrs {
			if (m.Addr(a) == m.Addr(b)) != (a == b) {
				t.Errorf("addresses %v and %v: keys equal %v, addresses equal %v", a, b, m.Addr(a) == m.Addr(b), a == b)
			}
		}
	}
	for _, a := range addrs {
		for _, proto := range []render.Protocol{render.TCP, render.SCTP} {
			vs := render.VirtualServer{Protocol: proto, Addr: a, Port: 53}
			if got := m.ServerOf(m.Server(vs)); got != vs {
				t.Errorf("virtual server %v came back as %v", vs, got)
			}
			d := render.Destination{Server: vs, Addr: addrs[1], Port: 8080}
			if got := m.DestOf(m.Dest(d)); got != d {
				t.Errorf("destination %v came back as %v", d, got)
			}
		}
	}
	var keys []EntryKey
	var entries []render.SetEntry
	for _, set := range []string{"KUBE-CLUSTER-IP", "KUBE-6-CLUSTER-IP"} {
		for _, a := range addrs {
			for _, p := range prefixes {
				e := render.SetEntry{Set: set, Addr: a, Protocol: render.UDP, Port: 53, Addr2: a, Net: p}
				if got := m.EntryOf(m.Entry(e)); got != e {
					t.Errorf("set entry %v came back as %v", e, got)
				}
				keys = append(keys, m.Entry(e))
				entries = append(entries, e)
			}
		}
	}
	for i := range keys {
		for j := range keys {
			if (keys[i] == keys[j]) != (entries[i] == entries[j]) {
				t.Errorf("set entries %v and %v: keys equal %v", entries[i], entries[j], keys[i] == keys[j])
			}
		}
	}
}
