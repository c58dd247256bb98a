package fullstate

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset/ipsettest"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs/ipvstest"
)

// node is one fake node: IPVS, ipsets and the dummy link.
type node struct {
	ipvs   *ipvstest.Kernel
	ipsets *ipsettest.Fake
	links  *dataplanetest.Links
}

func newNode(t *testing.T, opts ...ipvstest.Option) *node {
	n := &node{ipvs: ipvstest.New(opts...), ipsets: ipsettest.New(), links: dataplanetest.NewLinks()}
	if err := dataplane.CreateSets(n.ipsets, []xtables.Family{xtables.IPv4, xtables.IPv6}, 1024, 65536); err != nil {
		t.Fatal(err)
	}
	return n
}

var nodeIP = netip.MustParseAddr("192.168.1.10")

// controller starts a sink on the node, as a (re)started process would.
func (n *node) controller(t *testing.T) (*Controller, *[]SyncStats) {
	conn, err := n.ipvs.Conn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	k := &dataplane.Kernel{IPVSConn: conn, IPSet: n.ipsets, Link: n.links, Dummy: "kube-ipvs0"}
	nd := &dataplane.Node{Kernel: k, Cfg: dataplane.NodeConfig{Families: []xtables.Family{xtables.IPv4, xtables.IPv6}, NodeAddresses: []netip.Addr{nodeIP}}}
	c := NewController(render.Config{Scheduler: "rr", NodeAddresses: []netip.Addr{nodeIP}}, dataplane.NewApplier(k), nd, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var stats []SyncStats
	c.OnSync = func(s SyncStats) { stats = append(stats, s) }
	return c, &stats
}

// cluster builds n ClusterIP services with eps endpoints each, plus one
// NodePort service.
func cluster(n, eps int) []*client.ServiceEndpoints {
	var out []*client.ServiceEndpoints
	for i := 0; i < n; i++ {
		se := &client.ServiceEndpoints{Service: &client.Service{
			Namespace: "ns", Name: fmt.Sprintf("svc-%04d", i), Type: client.ClusterIP,
			Ports: []client.Port{{Name: "http", Protocol: client.TCP, Port: 80}},
		}}
		se.Service.ClusterIPs.Add(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}))
		for j := 0; j < eps; j++ {
			ep := &client.Endpoint{Key: client.EndpointKey(fmt.Sprintf("ep-%d", j)), Ready: true, Serving: true, Internal: true, External: true,
				PortOverrides: []client.PortOverride{{Name: "http", Protocol: client.TCP, Port: 8080}}}
			ep.IPs.Add(netip.AddrFrom4([4]byte{10, 244, byte(i), byte(j + 1)}))
			se.Endpoints = append(se.Endpoints, ep)
		}
		out = append(out, se)
	}
	np := &client.ServiceEndpoints{Service: &client.Service{Namespace: "ns", Name: "nodeport", Type: client.NodePort,
		Ports: []client.Port{{Name: "dns", Protocol: client.UDP, Port: 53, NodePort: 30053}}}}
	np.Service.ClusterIPs.Add(netip.MustParseAddr("10.97.0.1"))
	return append(out, np)
}

func feed(c *Controller, snapshot []*client.ServiceEndpoints) {
	ch := make(chan *client.ServiceEndpoints)
	go func() {
		for _, se := range snapshot {
			ch <- se
		}
		close(ch)
	}()
	c.Callback(ch)
}

func last(stats *[]SyncStats) SyncStats { return (*stats)[len(*stats)-1] }

func (n *node) dests(t *testing.T, vs string) []string {
	conn, _ := n.ipvs.Conn()
	defer conn.Close()
	svcs, err := conn.Services()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs {
		if s.Service.Address.String()+":"+fmt.Sprint(s.Service.Port) == vs {
			ds, err := conn.Destinations(s.Service.Key())
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, d := range ds {
				out = append(out, fmt.Sprintf("%s:%d w%d", d.Destination.Address, d.Destination.Port, d.Destination.Weight))
			}
			slices.Sort(out)
			return out
		}
	}
	return nil
}

func TestSyncWritesOnlyChanges(t *testing.T) {
	n := newNode(t)
	c, stats := n.controller(t)
	snap := cluster(20, 3)
	feed(c, snap)
	st := last(stats)
	// 21 servers + 60 destinations + NodePort server; 21 bindings; entries:
	// 21 cluster IP + 21 IPVS-IPS + 1 node port, and 22 records of the
	// servers (KUBE-PROXYSINKS-VS).
	if st.Err != nil || st.Writes != 22+60+21+43+22 {
		t.Fatalf("initial sync: %+v", st)
	}
	if got := n.links.Len(); got != 21 {
		t.Errorf("%d addresses bound, want 21", got)
	}
	if _, entries, _ := n.ipsets.List("KUBE-NODE-PORT-UDP"); len(entries) != 1 || entries[0].Port != 30053 {
		t.Errorf("KUBE-NODE-PORT-UDP holds %v", entries)
	}

	feed(c, snap)
	if st := last(stats); st.Writes != 0 || st.Err != nil {
		t.Fatalf("no-change sync made %d writes (%v)", st.Writes, st.Err)
	}

	// One endpoint more: exactly one destination write.
	ep := *snap[3].Endpoints[0]
	ep.Key = "ep-new"
	ep.IPs = client.IPs{}
	ep.IPs.Add(netip.MustParseAddr("10.244.3.99"))
	snap[3].Endpoints = append(snap[3].Endpoints, &ep)
	feed(c, snap)
	if st := last(stats); st.Writes != 1 || st.Err != nil {
		t.Fatalf("one new endpoint made %d writes (%v)", st.Writes, st.Err)
	}
	if got := n.dests(t, "10.96.0.3:80"); !slices.Contains(got, "10.244.3.99:8080 w1") {
		t.Errorf("new destination missing: %v", got)
	}

	// Removing it quiesces it (TCP weight 0) and, as the fake kernel has
	// no connections, reaps it in the same sync: two writes.
	snap[3].Endpoints = snap[3].Endpoints[:3]
	feed(c, snap)
	if st := last(stats); st.Writes != 2 {
		t.Errorf("removing a TCP endpoint made %d writes, want weight 0 then removal", st.Writes)
	}
	if got := n.dests(t, "10.96.0.3:80"); len(got) != 3 {
		t.Errorf("terminated destination not removed: %v", got)
	}

	// Deleting a service removes its server, binding and entries.
	feed(c, append(snap[:5:5], snap[6:]...))
	if got := n.dests(t, "10.96.0.5:80"); got != nil {
		t.Errorf("deleted service's destinations still there: %v", got)
	}
	if n.links.Has(netip.MustParseAddr("10.96.0.5")) {
		t.Error("deleted service's address still bound")
	}
}

func TestRestartMakesNoWrites(t *testing.T) {
	n := newNode(t)
	c, _ := n.controller(t)
	snap := cluster(10, 2)
	feed(c, snap)

	// A new process on the same node, same cluster: nothing to write.
	c2, stats := n.controller(t)
	feed(c2, snap)
	if st := last(stats); st.Writes != 0 || st.Err != nil {
		t.Fatalf("restart sync made %d writes (%v)", st.Writes, st.Err)
	}
}

func TestForeignObjectsUntouched(t *testing.T) {
	n := newNode(t)
	conn, _ := n.ipvs.Conn()
	defer conn.Close()
	// keepalived's service on the node address, outside the node-port range.
	foreign := ipvs.Service{Family: ipvs.IPv4, Protocol: ipvs.TCP, Address: nodeIP, Port: 443, Scheduler: "wlc", Netmask: 32}
	if err := conn.CreateService(foreign); err != nil {
		t.Fatal(err)
	}
	if err := n.ipsets.Create(ipset.Set{Name: "OTHER", Type: ipset.HashIP, Family: ipset.INET}); err != nil {
		t.Fatal(err)
	}
	c, _ := n.controller(t)
	feed(c, cluster(2, 1))
	feed(c, nil) // every service gone
	svcs, err := conn.Services()
	if err != nil {
		t.Fatal(err)
	}
	if len(svcs) != 1 || svcs[0].Service.Port != 443 {
		t.Fatalf("services left: %+v, want only the foreign one", svcs)
	}
	if _, _, err := n.ipsets.List("OTHER"); err != nil {
		t.Errorf("foreign set: %v", err)
	}
}

func TestDriftIsRepaired(t *testing.T) {
	n := newNode(t)
	c, stats := n.controller(t)
	snap := cluster(3, 2)
	feed(c, snap)
	conn, _ := n.ipvs.Conn()
	defer conn.Close()
	// Someone deletes a destination with ipvsadm, and binds a stray address.
	vs := ipvs.Service{Family: ipvs.IPv4, Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.1"), Port: 80}
	if err := conn.RemoveDestination(vs, ipvs.Destination{Address: netip.MustParseAddr("10.244.1.1"), Port: 8080}); err != nil {
		t.Fatal(err)
	}
	n.links.AddAddresses("kube-ipvs0", []netip.Addr{netip.MustParseAddr("10.96.9.9")})
	st := c.Resync()
	if st.Err != nil || st.Writes != 2 {
		t.Fatalf("resync: %+v, want 2 writes (destination back, stray address gone)", st)
	}
	if got := n.dests(t, "10.96.0.1:80"); len(got) != 2 {
		t.Errorf("destinations after repair: %v", got)
	}
	if n.links.Has(netip.MustParseAddr("10.96.9.9")) {
		t.Error("stray address on the dummy link survived the resync")
	}
	feed(c, snap)
	if st := last(stats); st.Writes != 0 {
		t.Errorf("sync after repair made %d writes", st.Writes)
	}
}

func TestFailedObjectsAreRetried(t *testing.T) {
	// A kernel without the mh scheduler: the annotated service fails.
	n := newNode(t, ipvstest.WithSchedulers("rr", "wrr", "sh"))
	c, stats := n.controller(t)
	snap := cluster(3, 1)
	snap[1].Service.Annotations = map[string]string{render.SchedulerAnnotation: "mh"}
	feed(c, snap)
	st := last(stats)
	if st.Failed != 2 || st.Err == nil { // the server and its destination
		t.Fatalf("first sync: failed=%d err=%v, want 2 failures", st.Failed, st.Err)
	}
	if !strings.Contains(st.Err.Error(), "10.96.0.1:80") {
		t.Errorf("error does not name the failed server: %v", st.Err)
	}
	// The others are in place; the failed ones are tried again, not lost.
	if got := n.dests(t, "10.96.0.2:80"); len(got) != 1 {
		t.Errorf("healthy service not programmed: %v", got)
	}
	feed(c, snap)
	if st := last(stats); st.Writes != 2 || st.Failed != 2 {
		t.Fatalf("second sync: writes=%d failed=%d, want the 2 failed objects retried", st.Writes, st.Failed)
	}
}
