package ipvssink

import (
	"testing"

	"github.com/proxysinks/proxysinks/client"
)

// TestServiceBackAfterEmpty: a service removed (the node left with no
// service) and added again is programmed again by both sinks.
func TestServiceBackAfterEmpty(t *testing.T) {
	for _, sink := range []struct {
		name string
		mk   Make
	}{{"fullstate", FullState}, {"incremental", Incremental}} {
		t.Run(sink.name, func(t *testing.T) {
			n := newFakeNode(t, sink.mk)
			one := []*client.ServiceEndpoints{nodePort("chg", "10.96.0.21", 30084)}
			n.ctl.Snapshot(snapshot(one))
			n.ctl.Snapshot(snapshot(nil))
			n.ctl.Snapshot(snapshot(one))
			if err := n.last().Err; err != nil {
				t.Fatal(err)
			}
			if got := n.ipvsServers(t); len(got) != 2 {
				t.Errorf("servers %v, want the cluster IP and the node port", got)
			}
		})
	}
}
