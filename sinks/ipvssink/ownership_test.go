package ipvssink

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
)

// ipvsServers lists every virtual server in the fake kernel as
// "TCP/addr:port", sorted.
func (n *fakeNode) ipvsServers(t *testing.T) []string {
	t.Helper()
	conn, err := n.IPVS.Conn()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	svcs, err := conn.Services()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range svcs {
		out = append(out, "TCP/"+netip.AddrPortFrom(s.Service.Address, s.Service.Port).String())
	}
	slices.Sort(out)
	return out
}

func nodePort(name string, clusterIP string, port int) *client.ServiceEndpoints {
	svc := &client.Service{Namespace: "ns", Name: name, Type: client.NodePort,
		Ports: []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, NodePort: port}}}
	svc.ClusterIPs.Add(netip.MustParseAddr(clusterIP))
	return &client.ServiceEndpoints{Service: svc}
}

// TestOwnershipRecorded: what a sink created it finds and removes after a
// restart, whatever its address has become since (a node port outside
// 30000-32767, a node port on an address that is no longer the node's),
// and a virtual server it did not create is never touched.
func TestOwnershipRecorded(t *testing.T) {
	former := netip.MustParseAddr("192.168.2.10")
	foreign := ipvs.Service{Family: ipvs.IPv4, Protocol: ipvs.TCP, Address: faultNodeIP, Port: 443, Scheduler: "wlc"}
	for _, sink := range []struct {
		name string
		mk   Make
	}{{"fullstate", FullState}, {"incremental", Incremental}} {
		t.Run(sink.name, func(t *testing.T) {
			n := newFakeNode(t, sink.mk)
			conn, err := n.IPVS.Conn()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if err := conn.CreateService(foreign); err != nil {
				t.Fatal(err)
			}
			n.start(t, sink.mk, faultNodeIP, former)
			n.ctl.Snapshot(snapshot([]*client.ServiceEndpoints{nodePort("high", "10.96.0.1", 40000), nodePort("low", "10.96.0.2", 30080)}))
			if err := n.last().Err; err != nil {
				t.Fatal(err)
			}
			want := []string{"TCP/10.96.0.1:80", "TCP/10.96.0.2:80", "TCP/192.168.1.10:30080", "TCP/192.168.1.10:40000",
				"TCP/192.168.1.10:443", "TCP/192.168.2.10:30080", "TCP/192.168.2.10:40000"}
			if got := n.ipvsServers(t); !slices.Equal(got, want) {
				t.Fatalf("after the first sync: %v, want %v", got, want)
			}

			// Restarted without the former address: its node ports go.
			n.start(t, sink.mk, faultNodeIP)
			n.ctl.Snapshot(snapshot([]*client.ServiceEndpoints{nodePort("high", "10.96.0.1", 40000), nodePort("low", "10.96.0.2", 30080)}))
			if err := n.last().Err; err != nil {
				t.Fatal(err)
			}
			want = []string{"TCP/10.96.0.1:80", "TCP/10.96.0.2:80", "TCP/192.168.1.10:30080", "TCP/192.168.1.10:40000", "TCP/192.168.1.10:443"}
			if got := n.ipvsServers(t); !slices.Equal(got, want) {
				t.Errorf("after a restart without %s: %v, want %v", former, got, want)
			}

			// Restarted with every service gone: all the sink's go, and
			// only they, with no error (no "file exists").
			n.start(t, sink.mk, faultNodeIP)
			n.ctl.Snapshot(snapshot(nil))
			if err := n.last().Err; err != nil {
				t.Fatal(err)
			}
			if r := n.ctl.Resync(); r.Err != nil || r.Writes != 0 {
				t.Errorf("resync after removal: %d writes, err %v", r.Writes, r.Err)
			}
			if got := n.ipvsServers(t); !slices.Equal(got, []string{"TCP/192.168.1.10:443"}) {
				t.Errorf("with every service gone: %v, want only the foreign TCP/192.168.1.10:443", got)
			}
			for _, name := range []string{"KUBE-PROXYSINKS-VS", "KUBE-6-PROXYSINKS-VS"} {
				if _, entries, err := n.Sets.List(name); err != nil || len(entries) != 0 {
					t.Errorf("%s: %d entries left (%v)", name, len(entries), err)
				}
			}
		})
	}
}
