package conntrack

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"
)

// flow builds a conntrack flow from client to service, answered by
// backend (the reply tuple of a DNAT'd or IPVS flow).
func flow(proto uint8, client, service, backend string) ct.Flow {
	c, s, b := netip.MustParseAddrPort(client), netip.MustParseAddrPort(service), netip.MustParseAddrPort(backend)
	return ct.Flow{
		TupleOrig: ct.Tuple{
			IP:    ct.IPTuple{SourceAddress: c.Addr(), DestinationAddress: s.Addr()},
			Proto: ct.ProtoTuple{Protocol: proto, SourcePort: c.Port(), DestinationPort: s.Port()},
		},
		TupleReply: ct.Tuple{
			IP:    ct.IPTuple{SourceAddress: b.Addr(), DestinationAddress: c.Addr()},
			Proto: ct.ProtoTuple{Protocol: proto, SourcePort: b.Port(), DestinationPort: c.Port()},
		},
	}
}

func target(service, backend string) Target {
	return Target{Service: netip.MustParseAddrPort(service), Backend: netip.MustParseAddrPort(backend)}
}

func TestMatch(t *testing.T) {
	targets := []Target{
		target("10.96.0.10:53", "10.244.1.5:5353"),
		target("[fd00::10]:53", "[fd00:244::5]:5353"),
		// An IPv4-mapped address matches the IPv4 flow.
		target("[::ffff:10.96.0.20]:53", "[::ffff:10.244.2.5]:53"),
		// Any backend of 10.96.0.30:53.
		{Service: netip.MustParseAddrPort("10.96.0.30:53")},
	}
	m, err := newMatcher(targets)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		f    ct.Flow
		want bool
	}{
		{"target", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.10:53", "10.244.1.5:5353"), true},
		{"another client of the target", flow(unix.IPPROTO_UDP, "10.0.0.2:1", "10.96.0.10:53", "10.244.1.5:5353"), true},
		{"IPv6 target", flow(unix.IPPROTO_UDP, "[fd00::1]:40000", "[fd00::10]:53", "[fd00:244::5]:5353"), true},
		{"mapped target", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.20:53", "10.244.2.5:53"), true},
		{"TCP", flow(unix.IPPROTO_TCP, "10.0.0.1:40000", "10.96.0.10:53", "10.244.1.5:5353"), false},
		{"SCTP", flow(unix.IPPROTO_SCTP, "10.0.0.1:40000", "10.96.0.10:53", "10.244.1.5:5353"), false},
		{"other backend", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.10:53", "10.244.1.6:5353"), false},
		{"other backend port", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.10:53", "10.244.1.5:53"), false},
		{"other service port", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.10:54", "10.244.1.5:5353"), false},
		{"other service", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.11:53", "10.244.1.5:5353"), false},
		{"to the backend directly", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.244.1.5:5353", "10.244.1.5:5353"), false},
		{"any backend", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.30:53", "10.244.3.5:5353"), true},
		{"any backend, not yet answered", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.30:53", "10.96.0.30:53"), true},
		{"any backend, other port", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.30:54", "10.244.3.5:5353"), false},
		{"any backend, TCP", flow(unix.IPPROTO_TCP, "10.0.0.1:40000", "10.96.0.30:53", "10.244.3.5:5353"), false},
		{"empty flow", ct.Flow{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := m.match(tt.f); got != tt.want {
				t.Errorf("match(%s / %s) = %v, want %v", tt.f.TupleOrig, tt.f.TupleReply, got, tt.want)
			}
		})
	}
}

func TestInvalidTargets(t *testing.T) {
	for _, tgt := range []Target{
		{},
		{Backend: netip.MustParseAddrPort("10.244.1.5:53")},
		{Service: netip.MustParseAddrPort("10.96.0.10:53"), Backend: netip.AddrPortFrom(netip.Addr{}, 53)},
		{Service: netip.MustParseAddrPort("10.96.0.10:53"), Backend: netip.MustParseAddrPort("10.244.1.5:0")},
		{Service: netip.MustParseAddrPort("10.96.0.10:0"), Backend: netip.MustParseAddrPort("10.244.1.5:53")},
	} {
		// No connection is needed: targets are checked before any I/O.
		var c Conn
		n, err := c.FlushUDP([]Target{target("10.96.0.1:53", "10.244.0.1:53"), tgt})
		if err == nil || n != 0 || !strings.Contains(err.Error(), "conntrack: flush UDP flows of "+tgt.String()+": invalid target") {
			t.Errorf("FlushUDP(%v) = %d, %v; want an error naming the target", tgt, n, err)
		}
	}
}

func TestNoTargetsNoIO(t *testing.T) {
	var c Conn // a nil connection would panic on any I/O
	n, err := c.FlushUDP(nil)
	if diff := cmp.Diff([]any{0, nil}, []any{n, err}); diff != "" {
		t.Errorf("FlushUDP(nil) (-want +got):\n%s", diff)
	}
}
