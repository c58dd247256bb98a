package ipvssink

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// TestNodePortsFollowAddresses: both IPVS sinks serve a NodePort on an
// address the node gains and stop serving it on one it loses, from the
// next sync of the same snapshot (runtime.NodePortsSetter, as the
// runtime hands a change); a restart on the unchanged node writes
// nothing.
func TestNodePortsFollowAddresses(t *testing.T) {
	second := netip.MustParseAddr("192.168.1.11")
	for _, sink := range []struct {
		name string
		mk   Make
	}{{"fullstate", FullState}, {"incremental", Incremental}} {
		t.Run(sink.name, func(t *testing.T) {
			n := newFakeNode(t, sink.mk)
			snap := snapshot([]*client.ServiceEndpoints{nodePort("web", "10.96.0.30", 30090), nodePort("db", "10.96.0.31", 30091)})
			n.ctl.Snapshot(snap)
			step := func(what string, addrs []netip.Addr, want []string) {
				t.Helper()
				n.ctl.(runtime.NodePortsSetter).SetNodePorts(runtime.NodePorts{Addrs: addrs})
				n.ctl.Snapshot(snap)
				if err := n.last().Err; err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if d := cmp.Diff(want, n.ipvsServers(t)); d != "" {
					t.Errorf("%s: virtual servers (-want +got):\n%s", what, d)
				}
			}
			step("address added", []netip.Addr{faultNodeIP, second}, []string{"TCP/10.96.0.30:80", "TCP/10.96.0.31:80",
				"TCP/192.168.1.10:30090", "TCP/192.168.1.10:30091", "TCP/192.168.1.11:30090", "TCP/192.168.1.11:30091"})
			step("address removed", []netip.Addr{second}, []string{"TCP/10.96.0.30:80", "TCP/10.96.0.31:80",
				"TCP/192.168.1.11:30090", "TCP/192.168.1.11:30091"})
			if st := n.ctl.Resync(); st.Err != nil || st.Writes != 0 {
				t.Errorf("resync after the change: %d writes, %v; want none", st.Writes, st.Err)
			}
			want := n.state(t)
			n.start(t, sink.mk, second)
			n.ctl.Snapshot(snap)
			if st := n.last(); st.Err != nil || st.Writes != 0 {
				t.Errorf("restart on the unchanged node: %d writes, %v; want none", st.Writes, st.Err)
			}
			if d := cmp.Diff(want, n.state(t)); d != "" {
				t.Errorf("state after the restart (-before +after):\n%s", d)
			}
		})
	}
}
