package incremental

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
)

func clusterIPService(name, ip string) *client.Service {
	s := &client.Service{Namespace: "ns", Name: name, Type: client.ClusterIP,
		Ports: []client.Port{{Name: "http", Protocol: client.TCP, Port: 80}}}
	s.ClusterIPs.Add(netip.MustParseAddr(ip))
	return s
}

func endpoint(key, ip string) *client.Endpoint {
	e := &client.Endpoint{Key: client.EndpointKey(key), Ready: true, Serving: true, Internal: true, External: true, Local: true,
		PortOverrides: []client.PortOverride{{Name: "http", Protocol: client.TCP, Port: 8080}}}
	e.IPs.Add(netip.MustParseAddr(ip))
	return e
}

// TestSharedObjects: two services share a cluster IP (on other ports) and
// a local backend (the same KUBE-LOOP-BACK entry); removing one keeps what
// the other needs, removing both removes everything.
func TestSharedObjects(t *testing.T) {
	n := newFakeNode(t)
	a, nd := n.parts(t)
	c := New(render.Config{Scheduler: "rr", NodeAddresses: nodeIPs}, a, nd, quiet)
	var stats []dataplane.SyncStats
	c.OnSync = func(s dataplane.SyncStats) { stats = append(stats, s) }
	web := clusterIPService("web", "10.96.0.1")
	api := clusterIPService("api", "10.96.0.1")
	api.Ports[0].Port = 443
	c.SetService(web)
	c.SetService(api)
	c.SetEndpoint(web.Key(), endpoint("e1", "10.244.0.5"))
	c.SetEndpoint(api.Key(), endpoint("e1", "10.244.0.5"))
	c.Sync()
	st := read(t, nd)
	if got := st.Bindings; !slices.Equal(got, []netip.Addr{netip.MustParseAddr("10.96.0.1")}) {
		t.Fatalf("bindings %v", got)
	}
	loop := render.SetEntry{Set: "KUBE-LOOP-BACK", Addr: netip.MustParseAddr("10.244.0.5"), Protocol: render.TCP, Port: 8080, Addr2: netip.MustParseAddr("10.244.0.5")}
	if !slices.Contains(st.Entries, loop) {
		t.Fatalf("no %v in %v", loop, st.Entries)
	}

	c.DeleteService(web.Key())
	c.Sync()
	st = read(t, nd)
	if len(st.Bindings) != 1 || !slices.Contains(st.Entries, loop) || len(st.Servers) != 1 {
		t.Errorf("after deleting one service: bindings %v, servers %v, loop-back kept %v", st.Bindings, st.Servers, slices.Contains(st.Entries, loop))
	}
	if w := stats[len(stats)-1].Writes; w != 3 {
		// Its virtual server (its destination goes with it), its
		// KUBE-CLUSTER-IP entry and its KUBE-PROXYSINKS-VS record;
		// nothing shared.
		t.Errorf("deleting one service wrote %d objects, want 3", w)
	}

	c.DeleteService(api.Key())
	c.Sync()
	st = read(t, nd)
	if len(st.Bindings)+len(st.Entries)+len(st.Servers)+len(st.Dests) != 0 {
		t.Errorf("after deleting both: %+v", st)
	}
	if s, d, b, e := c.Len(); s+d+b+e != 0 {
		t.Errorf("still tracking %d servers, %d destinations, %d bindings, %d entries", s, d, b, e)
	}
}

// TestRestartRetryOneWrite: a restarted controller adopts the kernel and
// writes nothing for the same services; a failed write is retried at the
// next sync; one endpoint added is one write.
func TestRestartRetryOneWrite(t *testing.T) {
	n := newFakeNode(t)
	cfg := render.Config{Scheduler: "rr", NodeAddresses: nodeIPs}
	web := clusterIPService("web", "10.96.0.1")
	feed := func(c *Controller) {
		c.SetService(web)
		c.SetEndpoint(web.Key(), endpoint("e1", "10.244.0.5"))
		c.Sync()
	}
	a, nd := n.parts(t)
	c := New(cfg, a, nd, quiet)
	var stats []dataplane.SyncStats
	c.OnSync = func(s dataplane.SyncStats) { stats = append(stats, s) }
	feed(c)
	want := read(t, nd)

	a, nd = n.parts(t)
	c = New(cfg, a, nd, quiet)
	c.OnSync = func(s dataplane.SyncStats) { stats = append(stats, s) }
	feed(c)
	if w := stats[len(stats)-1].Writes; w != 0 {
		t.Errorf("restart with the same services wrote %d objects, want 0", w)
	}

	// The new endpoint's destination fails once, then goes in.
	n.fail.pick = func(what string) bool { return strings.HasPrefix(what, "ipvs create destination 10.244.0.6:8080 ") }
	c.SetEndpoint(web.Key(), endpoint("e2", "10.244.0.6"))
	c.Sync()
	n.fail.pick = nil
	if s := stats[len(stats)-1]; s.Failed != 1 {
		t.Fatalf("the injected failure did not happen: %+v", s)
	}
	c.Sync()
	if s := stats[len(stats)-1]; s.Failed != 0 || s.Writes != 1 {
		t.Errorf("retry: %+v, want 1 write", s)
	}
	got := read(t, nd)
	d := render.Destination{Server: render.VirtualServer{Protocol: render.TCP, Addr: netip.MustParseAddr("10.96.0.1"), Port: 80}, Addr: netip.MustParseAddr("10.244.0.6"), Port: 8080}
	if _, ok := got.Dests[d]; !ok {
		t.Errorf("the retried destination is missing: %v", got.Dests)
	}
	delete(got.Dests, d)
	// The loop-back entry of the new local endpoint went in at the first try.
	got.Entries = slices.DeleteFunc(got.Entries, func(e render.SetEntry) bool { return e.Addr == d.Addr })
	if diff := stateDiff(want, got); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

// TestEndpointsBeforeService: endpoints set before their service are kept
// and programmed once the service comes.
func TestEndpointsBeforeService(t *testing.T) {
	n := newFakeNode(t)
	a, nd := n.parts(t)
	c := New(render.Config{Scheduler: "rr", NodeAddresses: nodeIPs}, a, nd, quiet)
	web := clusterIPService("web", "10.96.0.1")
	c.SetEndpoint(web.Key(), endpoint("e1", "10.244.0.5"))
	c.Sync()
	if st := read(t, nd); len(st.Servers) != 0 {
		t.Fatalf("servers without a service: %v", st.Servers)
	}
	c.SetService(web)
	c.Sync()
	if st := read(t, nd); len(st.Dests) != 1 {
		t.Errorf("destinations once the service came: %v, want the endpoint's", st.Dests)
	}
}

// TestEmptyThenFullAgain: after every service is gone, the records start
// afresh for the next ones (a first-sync path again).
func TestEmptyThenFullAgain(t *testing.T) {
	n := newFakeNode(t)
	a, nd := n.parts(t)
	c := New(render.Config{Scheduler: "rr", NodeAddresses: nodeIPs}, a, nd, quiet)
	for round := range 3 {
		for i, ip := range []string{"10.96.0.1", "10.96.0.2", "10.96.0.3"} {
			svc := clusterIPService(fmt.Sprint("web-", i), ip)
			c.SetService(svc)
			c.SetEndpoint(svc.Key(), endpoint("e1", fmt.Sprintf("10.244.0.%d", i+1)))
		}
		c.Sync()
		if st := read(t, nd); len(st.Servers) != 3 || len(st.Dests) != 3 {
			t.Fatalf("round %d: %d servers, %d destinations, want 3 and 3", round, len(st.Servers), len(st.Dests))
		}
		for i := range 3 {
			c.DeleteService(client.ServiceKey{Namespace: "ns", Name: fmt.Sprint("web-", i)})
		}
		c.Sync()
		if st := read(t, nd); len(st.Servers)+len(st.Dests)+len(st.Bindings)+len(st.Entries) != 0 {
			t.Fatalf("round %d: left %+v", round, st)
		}
	}
}

// TestServiceNumbersReused: services come and go under new names (a
// cluster's churn); the numbers of the deleted ones are reused, so the
// controller's per-service records do not grow, and the kernel holds
// exactly the services that exist, shared objects included.
func TestServiceNumbersReused(t *testing.T) {
	n := newFakeNode(t)
	a, nd := n.parts(t)
	cfg := render.Config{Scheduler: "rr", NodeAddresses: nodeIPs}
	c := New(cfg, a, nd, quiet)
	// "keep" shares its cluster IP with every churned service.
	keep := &client.ServiceEndpoints{Service: clusterIPService("keep", "10.96.0.1"), Endpoints: []*client.Endpoint{endpoint("e1", "10.244.0.1")}}
	keep.Service.Ports[0].Port = 443
	c.SetService(keep.Service)
	c.SetEndpoint(keep.Service.Key(), keep.Endpoints[0])
	for round := range 20 {
		cur := &client.ServiceEndpoints{Service: clusterIPService(fmt.Sprint("churn-", round), "10.96.0.1"),
			Endpoints: []*client.Endpoint{endpoint("e1", fmt.Sprintf("10.244.1.%d", round+1))}}
		c.SetService(cur.Service)
		c.SetEndpoint(cur.Service.Key(), cur.Endpoints[0])
		if round > 0 {
			c.DeleteService(client.ServiceKey{Namespace: "ns", Name: fmt.Sprint("churn-", round-1)})
		}
		c.Sync()
		if d := stateDiff(wantState([]*client.ServiceEndpoints{cur, keep}, cfg), read(t, nd)); d != "" {
			t.Fatalf("round %d: kernel (-want +got):\n%s", round, d)
		}
	}
	// keep, the current service, and the one deleted in the last sync
	// (its number freed as that sync rendered it).
	if got := len(c.names); got > 3 {
		t.Errorf("%d service numbers after 20 services came and went, want at most 3", got)
	}
}

// logLines is an io.Writer for a slog handler: every line written, and
// how many syncs had been reported (OnSync) when it was.
type logLines struct {
	reported *int
	lines    []string
	at       []int
}

func (l *logLines) Write(p []byte) (int, error) {
	l.lines = append(l.lines, string(p))
	l.at = append(l.at, *l.reported)
	return len(p), nil
}

// TestReportBeforeLog: a sync is reported (OnSync: the metrics of the time
// until the kernel is programmed) before its log line is written, and an
// endpoint removed and reaped in the same sync is one line naming both
// writes and the reap, not a line of its own inside the sync.
func TestReportBeforeLog(t *testing.T) {
	n := newFakeNode(t)
	a, nd := n.parts(t)
	var reported int
	out := &logLines{reported: &reported}
	c := New(render.Config{Scheduler: "rr", NodeAddresses: nodeIPs}, a, nd, slog.New(slog.NewTextHandler(out, nil)))
	var last dataplane.SyncStats
	c.OnSync = func(s dataplane.SyncStats) { reported++; last = s }
	web := clusterIPService("web", "10.96.0.1")
	c.SetService(web)
	c.SetEndpoint(web.Key(), endpoint("e1", "10.244.0.5"))
	c.SetEndpoint(web.Key(), endpoint("e2", "10.244.0.6"))
	c.Sync()
	c.DeleteEndpoint(web.Key(), "e2")
	c.Sync()
	// Weight 0, the endpoint's KUBE-LOOP-BACK entry removed, then the
	// reap's removal (the fake destination has no connections).
	if last.Writes != 3 || last.Reaped != 1 || last.Err != nil {
		t.Fatalf("the removal's sync: %d writes, %d reaped, want 3 and 1: %v", last.Writes, last.Reaped, last.Err)
	}
	if got := len(read(t, nd).Dests); got != 1 {
		t.Errorf("the kernel holds %d destinations, want 1", got)
	}
	want := []int{1, 2} // each line after its own sync's report
	if !slices.Equal(out.at, want) {
		t.Errorf("log lines written after %v reports, want %v:\n%s", out.at, want, strings.Join(out.lines, ""))
	}
	if l := out.lines[len(out.lines)-1]; !strings.Contains(l, "writes=3 reaped=1") {
		t.Errorf("the removal's log line %q does not name its writes and the reap", l)
	}
}
