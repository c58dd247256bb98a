package dataplane

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
)

// recorder is a Writer that records operations as strings.
type recorder struct {
	ops   []string
	conns map[netip.AddrPort]uint32 // connection counts Destinations reports
}

func (r *recorder) IPVS(ops []ipvs.Op) []error {
	for _, o := range ops {
		r.ops = append(r.ops, o.String()+ipvsDetail(o))
	}
	return make([]error, len(ops))
}
func (r *recorder) AddEntries(set string, es []ipset.Entry) []error {
	for _, e := range es {
		r.ops = append(r.ops, "add "+set+" "+e.String())
	}
	return make([]error, len(es))
}
func (r *recorder) DelEntries(set string, es []ipset.Entry) []error {
	for _, e := range es {
		r.ops = append(r.ops, "del "+set+" "+e.String())
	}
	return make([]error, len(es))
}
func (r *recorder) Bind(as []netip.Addr) []error {
	for _, a := range as {
		r.ops = append(r.ops, "bind "+a.String())
	}
	return make([]error, len(as))
}
func (r *recorder) Unbind(as []netip.Addr) []error {
	for _, a := range as {
		r.ops = append(r.ops, "unbind "+a.String())
	}
	return make([]error, len(as))
}
func (r *recorder) Destinations(s ipvs.Service) ([]ipvs.DestinationEntry, error) {
	var out []ipvs.DestinationEntry
	for ap, n := range r.conns {
		out = append(out, ipvs.DestinationEntry{Destination: ipvs.Destination{Address: ap.Addr(), Port: ap.Port()}, ActiveConns: n})
	}
	return out, nil
}

var (
	tcpVS  = render.VirtualServer{Protocol: render.TCP, Addr: netip.MustParseAddr("10.96.0.1"), Port: 80}
	udpVS  = render.VirtualServer{Protocol: render.UDP, Addr: netip.MustParseAddr("10.96.0.10"), Port: 53}
	goneVS = render.VirtualServer{Protocol: render.TCP, Addr: netip.MustParseAddr("192.168.1.10"), Port: 30099}
)

func dest(vs render.VirtualServer, addr string, port uint16) Dest {
	return Dest{D: render.Destination{Server: vs, Addr: netip.MustParseAddr(addr), Port: port}, Opts: render.DestOptions{Weight: 1}}
}

func TestApplyOrderAndTermination(t *testing.T) {
	w := &recorder{conns: map[netip.AddrPort]uint32{netip.MustParseAddrPort("10.244.1.1:8080"): 1}}
	a := NewApplier(w)
	res := a.Apply(Plan{
		CreateServers: []Server{{VS: udpVS, Opts: render.ServerOptions{Scheduler: "rr"}}},
		CreateDests:   []Dest{dest(udpVS, "10.244.1.3", 53)},
		Bind:          []netip.Addr{udpVS.Addr},
		AddEntries:    []render.SetEntry{{Set: "KUBE-CLUSTER-IP", Addr: udpVS.Addr, Protocol: render.UDP, Port: 53}},
		DeleteDests:   []Dest{dest(tcpVS, "10.244.1.1", 8080), dest(udpVS, "10.244.1.2", 53)},
		Unbind:        []netip.Addr{netip.MustParseAddr("10.96.0.99")},
		DeleteServers: []Server{{VS: goneVS}},
		DelEntries:    []render.SetEntry{{Set: "KUBE-NODE-PORT-TCP", Protocol: render.TCP, Port: 30099}},
	})
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	// Entries (masquerade marks) are in place before a server can take a
	// connection, and stay until it cannot.
	want := []string{
		"add KUBE-CLUSTER-IP 10.96.0.10,udp:53",
		"create service UDP/10.96.0.10:53 scheduler rr",
		"create destination 10.244.1.3:53 on UDP/10.96.0.10:53 weight 1",
		"bind 10.96.0.10",
		"update destination 10.244.1.1:8080 on TCP/10.96.0.1:80 weight 0",
		"remove destination 10.244.1.2:53 on UDP/10.96.0.10:53",
		"remove service TCP/192.168.1.10:30099",
		"unbind 10.96.0.99",
		"del KUBE-NODE-PORT-TCP tcp:30099",
	}
	if diff := cmp.Diff(want, w.ops); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
	if a.Terminating() != 1 {
		t.Fatalf("%d terminating destinations, want the TCP one", a.Terminating())
	}

	// While it has a connection, Reap keeps it; once it has none, Reap
	// removes it.
	w.ops = nil
	if n, err := a.Reap(); n != 0 || err != nil || len(w.ops) != 0 {
		t.Fatalf("Reap with a live connection: %d, %v, %q", n, err, w.ops)
	}
	w.conns[netip.MustParseAddrPort("10.244.1.1:8080")] = 0
	if n, err := a.Reap(); n != 1 || err != nil {
		t.Fatalf("Reap without connections: %d, %v", n, err)
	}
	if diff := cmp.Diff([]string{"remove destination 10.244.1.1:8080 on TCP/10.96.0.1:80"}, w.ops); diff != "" {
		t.Errorf("reap (-want +got):\n%s", diff)
	}
}

func TestTerminatingDestinationComesBack(t *testing.T) {
	w := &recorder{conns: map[netip.AddrPort]uint32{netip.MustParseAddrPort("10.244.1.1:8080"): 3}}
	a := NewApplier(w)
	a.Apply(Plan{DeleteDests: []Dest{dest(tcpVS, "10.244.1.1", 8080)}})
	w.ops = nil
	// The endpoint is back before its connections ended: it is still in
	// the kernel, so its weight is restored instead of a failing create.
	a.Apply(Plan{CreateDests: []Dest{dest(tcpVS, "10.244.1.1", 8080)}})
	if diff := cmp.Diff([]string{"update destination 10.244.1.1:8080 on TCP/10.96.0.1:80 weight 1"}, w.ops); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
	if a.Terminating() != 0 {
		t.Error("the destination is still terminating")
	}
}

// failRemove fails the removal of every virtual server.
type failRemove struct{ recorder }

func (f *failRemove) IPVS(ops []ipvs.Op) []error {
	errs := f.recorder.IPVS(ops)
	for i, o := range ops {
		if o.Kind == ipvs.OpRemoveService {
			errs[i] = errors.New("injected")
		}
	}
	return errs
}

// TestUnbindKeptWhileServerStays: when a virtual server fails to be
// removed, its address stays bound and is reported failed (retried with
// it), so the server stays visible as the sink's, and so are the
// destinations that were to go with it; other addresses go.
func TestUnbindKeptWhileServerStays(t *testing.T) {
	w := &failRemove{}
	a := NewApplier(w)
	vs := render.VirtualServer{Protocol: render.TCP, Addr: netip.MustParseAddr("10.96.0.7"), Port: 80}
	other := netip.MustParseAddr("10.96.0.8")
	d := dest(vs, "10.244.1.9", 80)
	res := a.Apply(Plan{DeleteServers: []Server{{VS: vs}}, DeleteDests: []Dest{d}, Unbind: []netip.Addr{vs.Addr, other}})
	if !res.Failed.Dest(d.D) {
		t.Errorf("the destination that was to go with the server is not reported failed: %v", res.Failed)
	}
	if !res.Failed.Binding(vs.Addr) {
		t.Errorf("the address of the server that stayed is not reported failed: %v", res.Failed)
	}
	if res.Failed.Binding(other) {
		t.Errorf("the other address failed: %v", res.Failed.Bindings[other])
	}
	want := []string{"remove service TCP/10.96.0.7:80", "unbind 10.96.0.8"}
	if diff := cmp.Diff(want, w.ops); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
}

// TestRecordKeptWhileServerStays: the record of a virtual server
// (KUBE-PROXYSINKS-VS) is removed only once the server is: while its
// removal fails the record stays, reported failed, so the server stays the
// sink's whatever its address becomes; other records go.
func TestRecordKeptWhileServerStays(t *testing.T) {
	w := &failRemove{}
	a := NewApplier(w)
	vs := render.VirtualServer{Protocol: render.TCP, Addr: netip.MustParseAddr("192.168.1.10"), Port: 40000}
	rec := render.SetEntry{Set: rules.SetVirtualServers, Addr: vs.Addr, Protocol: vs.Protocol, Port: vs.Port}
	other := render.SetEntry{Set: rules.SetVirtualServers, Addr: netip.MustParseAddr("10.96.0.9"), Protocol: render.TCP, Port: 80}
	res := a.Apply(Plan{DeleteServers: []Server{{VS: vs}}, DelEntries: []render.SetEntry{rec, other}})
	if !res.Failed.Entry(rec) {
		t.Errorf("the record of the server that stayed is not reported failed: %v", res.Failed)
	}
	want := []string{"remove service TCP/192.168.1.10:40000", "del KUBE-PROXYSINKS-VS 10.96.0.9,tcp:80"}
	if diff := cmp.Diff(want, w.ops); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
}

// overlapWriter is a recorder whose destination writes wait for a Bind
// call to start (or give up after a while), and whose bindings fail for
// one address.
type overlapWriter struct {
	recorder
	mu      sync.Mutex
	bound   chan struct{} // closed by the first Bind
	waited  bool          // a destination write saw the Bind start
	failing netip.Addr
}

func (o *overlapWriter) IPVS(ops []ipvs.Op) []error {
	if len(ops) > 0 && ops[0].Kind == ipvs.OpCreateDestination {
		select {
		case <-o.bound:
			o.mu.Lock()
			o.waited = true
			o.mu.Unlock()
		case <-time.After(2 * time.Second):
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.recorder.IPVS(ops)
}

func (o *overlapWriter) Bind(as []netip.Addr) []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case <-o.bound:
	default:
		close(o.bound)
	}
	errs := o.recorder.Bind(as)
	for i, a := range as {
		if a == o.failing {
			errs[i] = errors.New("injected")
		}
	}
	return errs
}

// TestOverlap: with Overlap the bindings are made while the destinations
// are written (the destination write waits for the Bind to start), never
// before the servers are in, the entries before the servers, and all
// before any removal; a binding's
// failure is reported for its address. Without Overlap the same plan is
// written in sequence.
func TestOverlap(t *testing.T) {
	vs2 := render.VirtualServer{Protocol: render.TCP, Addr: netip.MustParseAddr("10.96.0.11"), Port: 80}
	plan := Plan{
		CreateServers: []Server{{VS: udpVS, Opts: render.ServerOptions{Scheduler: "rr"}}, {VS: vs2, Opts: render.ServerOptions{Scheduler: "rr"}}},
		CreateDests:   []Dest{dest(udpVS, "10.244.1.3", 53), dest(vs2, "10.244.1.4", 8080)},
		Bind:          []netip.Addr{udpVS.Addr, vs2.Addr},
		Unbind:        []netip.Addr{netip.MustParseAddr("10.96.0.99")},
		AddEntries:    []render.SetEntry{{Set: "KUBE-CLUSTER-IP", Addr: vs2.Addr, Protocol: render.TCP, Port: 80}},
	}
	for _, overlap := range []bool{false, true} {
		w := &overlapWriter{bound: make(chan struct{}), failing: vs2.Addr}
		a := NewApplier(w)
		a.Overlap = overlap
		res := a.Apply(plan)
		if w.waited != overlap {
			t.Errorf("overlap %v: a destination write saw the bindings start: %v", overlap, w.waited)
		}
		if !res.Failed.Binding(vs2.Addr) || res.Failed.Len() != 1 {
			t.Errorf("overlap %v: failures %v, want the binding of %s alone", overlap, res.Failed, vs2.Addr)
		}
		if res.Writes != 8 {
			t.Errorf("overlap %v: %d writes, want 8", overlap, res.Writes)
		}
		servers := []string{
			"add KUBE-CLUSTER-IP 10.96.0.11,tcp:80",
			"create service UDP/10.96.0.10:53 scheduler rr",
			"create service TCP/10.96.0.11:80 scheduler rr",
		}
		if diff := cmp.Diff(servers, w.ops[:3]); diff != "" {
			t.Errorf("overlap %v: the entries, then the servers, are not written first (-want +got):\n%s", overlap, diff)
		}
		if got := w.ops[len(w.ops)-1]; got != "unbind 10.96.0.99" {
			t.Errorf("overlap %v: last operation %q, want the removal", overlap, got)
		}
		if !overlap {
			want := append(servers,
				"create destination 10.244.1.3:53 on UDP/10.96.0.10:53 weight 1",
				"create destination 10.244.1.4:8080 on TCP/10.96.0.11:80 weight 1",
				"bind 10.96.0.10", "bind 10.96.0.11", "unbind 10.96.0.99")
			if diff := cmp.Diff(want, w.ops); diff != "" {
				t.Errorf("in sequence (-want +got):\n%s", diff)
			}
		}
	}
}

// TestTrack: a recording holds every object Apply and Reap wrote or tried
// (by kind), and nothing from before it started or after
// it stopped; a second Track replaces the first.
func TestTrack(t *testing.T) {
	w := &recorder{conns: map[netip.AddrPort]uint32{}}
	a := NewApplier(w)
	before := dest(tcpVS, "10.244.1.9", 8080)
	a.Apply(Plan{CreateDests: []Dest{before}})

	stop := a.Track()
	gone := dest(tcpVS, "10.244.1.1", 8080)
	entry := render.SetEntry{Set: "KUBE-CLUSTER-IP", Addr: udpVS.Addr, Protocol: render.UDP, Port: 53}
	a.Apply(Plan{
		CreateServers: []Server{{VS: udpVS, Opts: render.ServerOptions{Scheduler: "rr"}}},
		CreateDests:   []Dest{dest(udpVS, "10.244.1.3", 53)},
		Bind:          []netip.Addr{udpVS.Addr},
		AddEntries:    []render.SetEntry{entry},
		DeleteDests:   []Dest{gone},
		Unbind:        []netip.Addr{netip.MustParseAddr("10.96.0.99")},
		DeleteServers: []Server{{VS: goneVS}},
	})
	w.conns[netip.MustParseAddrPort("10.244.1.1:8080")] = 0
	if n, err := a.Reap(); n != 1 || err != nil {
		t.Fatalf("Reap: %d, %v", n, err)
	}
	got := stop()
	a.Apply(Plan{CreateDests: []Dest{dest(tcpVS, "10.244.1.8", 8080)}})
	want := Written{
		Servers:  map[render.VirtualServer]bool{udpVS: true, goneVS: true},
		Dests:    map[render.Destination]bool{dest(udpVS, "10.244.1.3", 53).D: true, gone.D: true},
		Bindings: map[netip.Addr]bool{udpVS.Addr: true, netip.MustParseAddr("10.96.0.99"): true},
		Entries:  map[render.SetEntry]bool{entry: true},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}

	first := a.Track()
	second := a.Track()
	a.Apply(Plan{Bind: []netip.Addr{tcpVS.Addr}})
	if got := first(); got.Len() != 0 {
		t.Errorf("a replaced recording kept growing: %v", got)
	}
	if got := second(); !got.Binding(tcpVS.Addr) || got.Len() != 1 {
		t.Errorf("the second recording holds %v, want the binding of %s", got, tcpVS.Addr)
	}
}
