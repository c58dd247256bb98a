package conntrack

import (
	"net/netip"
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

// endpoints builds a set of endpoints.
func endpoints(eps ...string) Endpoints {
	s := Endpoints{}
	for _, e := range eps {
		s[netip.MustParseAddrPort(e)] = struct{}{}
	}
	return s
}

// testWant is a service 10.96.0.10:53 (also on load-balancer IP
// 192.0.2.10) served by 10.244.1.5:5353, an IPv6 one, a service
// 10.96.0.30:53 without endpoints, and node port 30053 served by
// 10.244.1.5:5353.
func testWant() *Want {
	dns := endpoints("10.244.1.5:5353")
	return &Want{
		Frontends: map[netip.AddrPort]Endpoints{
			netip.MustParseAddrPort("10.96.0.10:53"): dns,
			netip.MustParseAddrPort("192.0.2.10:53"): dns,
			netip.MustParseAddrPort("[fd00::10]:53"): endpoints("[fd00:244::5]:5353"),
			netip.MustParseAddrPort("10.96.0.30:53"): nil,
		},
		NodePorts: map[uint16]Endpoints{30053: dns},
	}
}

func TestStale(t *testing.T) {
	w := testWant()
	tests := []struct {
		name string
		f    ct.Flow
		want bool
	}{
		{"serving endpoint", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.10:53", "10.244.1.5:5353"), false},
		{"serving endpoint, load-balancer IP", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "192.0.2.10:53", "10.244.1.5:5353"), false},
		{"gone endpoint", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.10:53", "10.244.1.6:5353"), true},
		{"gone endpoint, load-balancer IP", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "192.0.2.10:53", "10.244.1.6:5353"), true},
		{"serving address, other port", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.10:53", "10.244.1.5:53"), true},
		{"not DNAT'd (sent while there was no endpoint)", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.10:53", "10.96.0.10:53"), true},
		{"IPv6 serving", flow(unix.IPPROTO_UDP, "[fd00::1]:40000", "[fd00::10]:53", "[fd00:244::5]:5353"), false},
		{"IPv6 gone", flow(unix.IPPROTO_UDP, "[fd00::1]:40000", "[fd00::10]:53", "[fd00:244::6]:5353"), true},
		{"service without endpoints", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.30:53", "10.96.0.30:53"), true},
		{"other service port", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.10:54", "10.244.1.6:5353"), false},
		{"other address", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.11:53", "10.244.1.6:5353"), false},
		{"to an endpoint directly", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.244.1.6:5353", "10.244.1.6:5353"), false},
		{"node port, serving", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "192.168.1.2:30053", "10.244.1.5:5353"), false},
		{"node port, gone", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "192.168.1.2:30053", "10.244.1.6:5353"), true},
		{"node port, any address", flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "127.0.0.1:30053", "127.0.0.1:30053"), true},
		{"TCP to a frontend", flow(unix.IPPROTO_TCP, "10.0.0.1:40000", "10.96.0.10:53", "10.244.1.6:5353"), false},
		{"SCTP to a node port", flow(unix.IPPROTO_SCTP, "10.0.0.1:40000", "192.168.1.2:30053", "10.244.1.6:5353"), false},
		{"empty flow", ct.Flow{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := w.Stale(tt.f); got != tt.want {
				t.Errorf("Stale(%s / %s) = %v, want %v", tt.f.TupleOrig, tt.f.TupleReply, got, tt.want)
			}
		})
	}
}

func TestEmptyWantNoIO(t *testing.T) {
	var c Conn // a nil connection would panic on any I/O
	n, err := c.ReconcileUDP(false, &Want{Frontends: map[netip.AddrPort]Endpoints{}})
	if diff := cmp.Diff([]any{0, nil}, []any{n, err}); diff != "" {
		t.Errorf("ReconcileUDP(empty) (-want +got):\n%s", diff)
	}
}
