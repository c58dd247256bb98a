package udpflows

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/conntrack"
)

// fakeCT is a conntrack table: ReconcileUDP deletes the flows Want.Stale
// names, as host/conntrack.Conn does in the kernel.
type fakeCT struct {
	flows []ct.Flow
	calls []string // "IPv4" or "IPv6", per call
}

func (f *fakeCT) ReconcileUDP(ipv6 bool, w *conntrack.Want) (int, error) {
	f.calls = append(f.calls, family(ipv6))
	n := 0
	f.flows = slices.DeleteFunc(f.flows, func(fl ct.Flow) bool {
		if fl.TupleOrig.IP.DestinationAddress.Is6() != ipv6 || !w.Stale(fl) {
			return false
		}
		n++
		return true
	})
	return n, nil
}

// add adds a UDP flow from client to dst answered by reply.
func (f *fakeCT) add(client, dst, reply string) {
	c, d, r := netip.MustParseAddrPort(client), netip.MustParseAddrPort(dst), netip.MustParseAddrPort(reply)
	f.flows = append(f.flows, ct.Flow{
		TupleOrig:  ct.Tuple{IP: ct.IPTuple{SourceAddress: c.Addr(), DestinationAddress: d.Addr()}, Proto: ct.ProtoTuple{Protocol: unix.IPPROTO_UDP, SourcePort: c.Port(), DestinationPort: d.Port()}},
		TupleReply: ct.Tuple{IP: ct.IPTuple{SourceAddress: r.Addr(), DestinationAddress: c.Addr()}, Proto: ct.ProtoTuple{Protocol: unix.IPPROTO_UDP, SourcePort: r.Port(), DestinationPort: c.Port()}},
	})
}

// list returns the flows as "dst via reply".
func (f *fakeCT) list() []string {
	var out []string
	for _, fl := range f.flows {
		out = append(out, fmt.Sprintf("%s via %s",
			netip.AddrPortFrom(fl.TupleOrig.IP.DestinationAddress, fl.TupleOrig.Proto.DestinationPort),
			netip.AddrPortFrom(fl.TupleReply.IP.SourceAddress, fl.TupleReply.Proto.SourcePort)))
	}
	return out
}

// dns is a UDP service "dns" (cluster IPs 10.96.0.10 and fd00::10,
// load-balancer IP 192.0.2.10, external IP 198.51.100.10, port 53, node
// port 30053, target port 5353) with the given endpoints.
func dns(eps ...*client.Endpoint) *client.ServiceEndpoints {
	return &client.ServiceEndpoints{Service: &client.Service{
		Namespace: "default", Name: "dns", Type: client.LoadBalancer,
		ClusterIPs:      client.IPs{V4: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, V6: []netip.Addr{netip.MustParseAddr("fd00::10")}},
		LoadBalancerIPs: client.IPs{V4: []netip.Addr{netip.MustParseAddr("192.0.2.10")}},
		ExternalIPs:     client.IPs{V4: []netip.Addr{netip.MustParseAddr("198.51.100.10")}},
		Ports: []client.Port{
			{Name: "dns", Protocol: client.UDP, Port: 53, NodePort: 30053},
			{Name: "dns-tcp", Protocol: client.TCP, Port: 53, NodePort: 30054},
		},
	}, Endpoints: eps}
}

// web is a TCP-only service with the given endpoints.
func web(eps ...*client.Endpoint) *client.ServiceEndpoints {
	return &client.ServiceEndpoints{Service: &client.Service{
		Namespace: "default", Name: "web", Type: client.ClusterIP,
		ClusterIPs: client.IPs{V4: []netip.Addr{netip.MustParseAddr("10.96.0.80")}},
		Ports:      []client.Port{{Name: "http", Protocol: client.TCP, Port: 80}},
	}, Endpoints: eps}
}

// ep is an endpoint serving "dns" on 5353 (and "http" on 8080) at the
// given addresses.
func ep(key string, serving bool, addrs ...string) *client.Endpoint {
	e := &client.Endpoint{Key: client.EndpointKey(key), Ready: serving, Serving: serving,
		PortOverrides: []client.PortOverride{{Name: "dns", Protocol: client.UDP, Port: 5353}, {Name: "dns-tcp", Protocol: client.TCP, Port: 5353}, {Name: "http", Protocol: client.TCP, Port: 8080}}}
	for _, a := range addrs {
		e.IPs.Add(netip.MustParseAddr(a))
	}
	return e
}

// snap builds a snapshot of the services whose changes are ch.
func snap(ch []client.Change, ses ...*client.ServiceEndpoints) *client.Snapshot {
	slices.SortFunc(ses, func(a, b *client.ServiceEndpoints) int { return a.Service.Key().Compare(b.Service.Key()) })
	return client.NewSnapshot(ses, ch)
}

func changed(se *client.ServiceEndpoints) []client.Change {
	return []client.Change{{Key: se.Service.Key(), Service: se}}
}

func aps(ss ...string) conntrack.Endpoints {
	out := conntrack.Endpoints{}
	for _, s := range ss {
		out[netip.MustParseAddrPort(s)] = struct{}{}
	}
	return out
}

func TestWant(t *testing.T) {
	s := snap(nil, dns(ep("a", true, "10.244.1.5", "fd00:244::5"), ep("b", false, "10.244.1.6"), ep("c", true, "10.244.1.7")),
		web(ep("w", true, "10.244.2.1")))
	serving := aps("10.244.1.5:5353", "10.244.1.7:5353")
	want4 := &conntrack.Want{
		Frontends: map[netip.AddrPort]conntrack.Endpoints{
			netip.MustParseAddrPort("10.96.0.10:53"):    serving,
			netip.MustParseAddrPort("192.0.2.10:53"):    serving,
			netip.MustParseAddrPort("198.51.100.10:53"): serving,
		},
		NodePorts: map[uint16]conntrack.Endpoints{30053: serving},
	}
	if diff := cmp.Diff(want4, Want(s, false)); diff != "" {
		t.Errorf("Want(IPv4) (-want +got):\n%s", diff)
	}
	serving6 := aps("[fd00:244::5]:5353")
	want6 := &conntrack.Want{
		Frontends: map[netip.AddrPort]conntrack.Endpoints{netip.MustParseAddrPort("[fd00::10]:53"): serving6},
		NodePorts: map[uint16]conntrack.Endpoints{30053: serving6},
	}
	if diff := cmp.Diff(want6, Want(s, true)); diff != "" {
		t.Errorf("Want(IPv6) (-want +got):\n%s", diff)
	}
	// No serving endpoint: the frontends stay, with none; the node port
	// is left out.
	none := &conntrack.Want{
		Frontends: map[netip.AddrPort]conntrack.Endpoints{
			netip.MustParseAddrPort("10.96.0.10:53"):    {},
			netip.MustParseAddrPort("192.0.2.10:53"):    {},
			netip.MustParseAddrPort("198.51.100.10:53"): {},
		},
		NodePorts: map[uint16]conntrack.Endpoints{},
	}
	if diff := cmp.Diff(none, Want(snap(nil, dns(ep("b", false, "10.244.1.6"))), false)); diff != "" {
		t.Errorf("Want(IPv4) without a serving endpoint (-want +got):\n%s", diff)
	}
}

// TestReconcile follows a UDP service through the cases kube-proxy's
// reconciler handles, with a fake conntrack table.
func TestReconcile(t *testing.T) {
	f := &fakeCT{}
	reg := prometheus.NewRegistry()
	r, err := New(f, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	step := func(name string, s *client.Snapshot, ok bool, wantCalls int, wantFlows []string) {
		t.Helper()
		f.calls = nil
		r.HandedOver(s)
		r.Synced(ok)
		if len(f.calls) != wantCalls {
			t.Errorf("%s: %d reconciles (%v), want %d", name, len(f.calls), f.calls, wantCalls)
		}
		if diff := cmp.Diff(wantFlows, f.list()); diff != "" {
			t.Errorf("%s: flows (-want +got):\n%s", name, diff)
		}
	}
	// The first snapshot: dns has no endpoint; a client's datagrams to it
	// and to its node port were answered by nothing.
	f.add("10.0.0.1:40000", "10.96.0.10:53", "10.96.0.10:53")
	f.add("10.0.0.1:40001", "192.168.1.2:30053", "192.168.1.2:30053")
	f.add("10.0.0.1:40002", "10.96.0.80:80", "10.96.0.80:80") // not a UDP service's
	noEndpoint := []string{"10.96.0.10:53 via 10.96.0.10:53", "192.168.1.2:30053 via 192.168.1.2:30053", "10.96.0.80:80 via 10.96.0.80:80"}
	s0 := snap(changed(dns()), dns(), web())
	// No endpoint changed (a service without endpoints is no change).
	step("no endpoints", s0, true, 0, noEndpoint)
	// A TCP service's endpoints change: nothing to reconcile.
	s1 := snap(changed(web(ep("w", true, "10.244.2.1"))), dns(), web(ep("w", true, "10.244.2.1")))
	step("TCP service change", s1, true, 0, noEndpoint)
	// The first endpoint arrives, but the sync fails: the reconcile
	// waits for a sync that programs it.
	a := ep("a", true, "10.244.1.5")
	s2 := snap(changed(dns(a)), dns(a), web(ep("w", true, "10.244.2.1")))
	step("first endpoint, sync failed", s2, false, 0, noEndpoint)
	// The next sync succeeds: the flows to the frontend and to the node
	// port that nothing answered are deleted.
	step("first endpoint, synced", s2, true, 2, []string{"10.96.0.80:80 via 10.96.0.80:80"})
	// The client's new flows reach a; b arrives; a is removed while a
	// client still sends.
	f.add("10.0.0.1:40000", "10.96.0.10:53", "10.244.1.5:5353")
	f.add("10.0.0.1:40001", "192.168.1.2:30053", "10.244.1.5:5353")
	f.add("10.0.0.1:40003", "198.51.100.10:53", "10.244.1.5:5353")
	b := ep("b", true, "10.244.1.6")
	s3 := snap(changed(dns(a, b)), dns(a, b), web(ep("w", true, "10.244.2.1")))
	flowsToA := []string{"10.96.0.80:80 via 10.96.0.80:80", "10.96.0.10:53 via 10.244.1.5:5353", "192.168.1.2:30053 via 10.244.1.5:5353", "198.51.100.10:53 via 10.244.1.5:5353"}
	step("second endpoint", s3, true, 2, flowsToA)
	// A snapshot without changes (a resync's): nothing to reconcile.
	step("no change", snap(nil, dns(a, b), web(ep("w", true, "10.244.2.1"))), true, 0, flowsToA)
	// a goes: its flows, through every frontend and the node port, go.
	s4 := snap(changed(dns(b)), dns(b), web(ep("w", true, "10.244.2.1")))
	step("endpoint removed", s4, true, 2, flowsToA[:1])
	// A full snapshot (changes unknown) in which b stops serving.
	f.add("10.0.0.1:40000", "10.96.0.10:53", "10.244.1.6:5353")
	s5 := snap(nil, dns(ep("b", false, "10.244.1.6")), web(ep("w", true, "10.244.2.1")))
	s5.Full = true
	step("full snapshot, endpoint not serving", s5, true, 2, flowsToA[:1])
	// The service goes: a change, but no service is left to match.
	f.add("10.0.0.1:40000", "10.96.0.10:53", "10.244.1.6:5353")
	s6 := snap([]client.Change{{Key: client.ServiceKey{Namespace: "default", Name: "dns"}}}, web(ep("w", true, "10.244.2.1")))
	step("service deleted", s6, true, 2, append(flowsToA[:1:1], "10.96.0.10:53 via 10.244.1.6:5353"))

	for fam, want := range map[string]float64{"IPv4": 2 + 3 + 1, "IPv6": 0} {
		if got := testutil.ToFloat64(r.deleted.WithLabelValues(fam)); got != want {
			t.Errorf("kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family=%q} = %v, want %v", fam, got, want)
		}
	}
	if n := testutil.CollectAndCount(r.duration, "kubeproxy_conntrack_reconciler_sync_duration_seconds"); n != 2 {
		t.Errorf("%d duration series, want one per family", n)
	}
	if n, err := testutil.GatherAndCount(reg, "kubeproxy_conntrack_reconciler_sync_duration_seconds", "kubeproxy_conntrack_reconciler_deleted_entries_total"); err != nil || n != 4 {
		t.Errorf("registry holds %d reconciler series (%v), want 4", n, err)
	}
}
