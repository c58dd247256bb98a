package ipvssink

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/sinks/runtime"
	"golang.org/x/sys/unix"
)

var faultNodeIP = netip.MustParseAddr("192.168.1.10")

// fakeNode is one fake node (dataplanetest.Node), with a sink controller.
type fakeNode struct {
	*dataplanetest.Node
	node  *dataplane.Node
	ctl   runtime.Controller
	stats []dataplane.SyncStats
	// reads counts the controllers' whole-kernel reads (Deps.Reader).
	reads int
	// binding is how start's kernel makes virtual IPs local.
	binding dataplane.Binding
	// linkOps logs the writes to links, in order: "add route 10.96.0.1".
	linkOps []string
}

// countedReader is the node's reader, counting the reads.
type countedReader struct{ n *fakeNode }

func (r countedReader) Read() (*dataplane.State, error) {
	r.n.reads++
	return r.n.node.Read()
}

func newFakeNode(t testing.TB, mk Make) *fakeNode {
	t.Helper()
	n := &fakeNode{Node: dataplanetest.NewNode(t, nil)}
	n.start(t, mk, faultNodeIP)
	return n
}

// start starts a sink controller on the node, as a (re)started process
// would, serving node ports on addrs.
func (n *fakeNode) start(t testing.TB, mk Make, addrs ...netip.Addr) {
	t.Helper()
	k := n.Kernel(t)
	k.IPVSConn.SetReplyTimeout(100 * time.Millisecond)
	k.Link, k.Binding = orderedLinks{n.Links, &n.linkOps}, n.binding
	n.node = n.Reader(k, addrs...)
	n.ctl = mk(Deps{Render: render.Config{Scheduler: "rr", NodeAddresses: addrs, Families: n.Families},
		Applier: kernelApplier(k), Reader: countedReader{n}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnSync:        func(s dataplane.SyncStats) { n.stats = append(n.stats, s) },
		NodeAddresses: func(a []netip.Addr) { n.node.Cfg.NodeAddresses = a }})
}

// services returns n ClusterIP services (the i-th with a NodePort when i
// is even), each with two endpoints, sorted by key.
func services(from, n int) []*client.ServiceEndpoints {
	var out []*client.ServiceEndpoints
	for i := from; i < from+n; i++ {
		svc := &client.Service{Namespace: "ns", Name: fmt.Sprintf("svc-%04d", i), Type: client.ClusterIP,
			Ports: []client.Port{{Name: "http", Protocol: client.TCP, Port: 80}}}
		if i%2 == 0 {
			svc.Type = client.NodePort
			svc.Ports[0].NodePort = 30000 + i
		}
		svc.ClusterIPs.Add(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}))
		se := &client.ServiceEndpoints{Service: svc}
		for j := 0; j < 2; j++ {
			ep := &client.Endpoint{Key: client.EndpointKey(fmt.Sprintf("ep-%d", j)), Ready: true, Serving: true, Internal: true, External: true,
				PortOverrides: []client.PortOverride{{Name: "http", Protocol: client.TCP, Port: 8080}}}
			ep.IPs.Add(netip.AddrFrom4([4]byte{10, 244, byte(i), byte(j + 1)}))
			se.Endpoints = append(se.Endpoints, ep)
		}
		out = append(out, se)
	}
	return out
}

func snapshot(ses []*client.ServiceEndpoints) *client.Snapshot {
	ses = slices.Clone(ses)
	slices.SortFunc(ses, func(a, b *client.ServiceEndpoints) int { return a.Service.Key().Compare(b.Service.Key()) })
	s := client.NewSnapshot(ses, nil)
	s.Full = true
	return s
}

// state is what the kernel holds of the sink's objects, as sorted lines.
func (n *fakeNode) state(t *testing.T) []string {
	t.Helper()
	st, err := n.node.Read()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for vs, o := range st.Servers {
		out = append(out, fmt.Sprintf("server %s %+v", vs, o))
	}
	for d, o := range st.Dests {
		out = append(out, fmt.Sprintf("dest %s %+v", d, o))
	}
	for _, a := range st.Bindings {
		out = append(out, "bind "+a.String())
	}
	for _, e := range st.Entries {
		out = append(out, "entry "+e.String())
	}
	slices.Sort(out)
	return out
}

func (n *fakeNode) last() dataplane.SyncStats { return n.stats[len(n.stats)-1] }

// TestFaultsConverge: with a fault injected in the kernel's answers while
// the cluster changes, each IPVS sink reports the sync failed in part;
// once the fault clears, one resync leaves the kernel exactly as a
// faultless sync does, writing no more objects than failed, and the next
// resync writes nothing.
func TestFaultsConverge(t *testing.T) {
	before, after := services(0, 20), append(services(0, 15), services(100, 10)...)
	faults := []struct {
		name string
		// inject arms the fault; readFault is true when it hits the
		// resync's read rather than the sync's writes.
		inject    func(n *fakeNode)
		readFault bool
	}{
		{"IPVS error on the 7th operation", func(n *fakeNode) { n.IPVS.FailNth(7, unix.ENOMEM) }, false},
		{"IPVS reply lost", func(n *fakeNode) { n.IPVS.DropReplies(1) }, false},
		{"IPVS reply late", func(n *fakeNode) { n.IPVS.DelayReplies(1, 300*time.Millisecond) }, false},
		{"IPVS ENOBUFS", func(n *fakeNode) { n.IPVS.FailReceives(1, unix.ENOBUFS) }, false},
		{"ipset error on the 3rd entry", func(n *fakeNode) { n.Sets.FailNth(3, unix.ENOMEM) }, false},
		{"ipset reply lost", func(n *fakeNode) { n.Sets.DropReplies(1) }, false},
		{"ipset ENOBUFS", func(n *fakeNode) { n.Sets.FailReceives(1, unix.ENOBUFS) }, false},
		{"IPVS dump interrupted past every retry", func(n *fakeNode) { n.IPVS.InterruptDumps(100) }, true},
		{"ipset dump interrupted past every retry", func(n *fakeNode) { n.Sets.InterruptDumps(100) }, true},
	}
	for _, sink := range []struct {
		name string
		mk   Make
	}{{"fullstate", FullState}, {"incremental", Incremental}} {
		want := newFakeNode(t, sink.mk)
		want.ctl.Snapshot(snapshot(after))
		if err := want.last().Err; err != nil {
			t.Fatalf("%s: faultless sync: %v", sink.name, err)
		}
		wantState := want.state(t)
		for _, f := range faults {
			t.Run(sink.name+"/"+f.name, func(t *testing.T) {
				n := newFakeNode(t, sink.mk)
				n.ctl.Snapshot(snapshot(before))
				if err := n.last().Err; err != nil {
					t.Fatalf("first sync: %v", err)
				}
				var failed int
				if f.readFault {
					n.ctl.Snapshot(snapshot(after))
					f.inject(n)
					if st := n.ctl.Resync(); st.Err == nil {
						t.Fatalf("resync with the fault: no error (stats %+v)", st)
					}
				} else {
					f.inject(n)
					n.ctl.Snapshot(snapshot(after))
					st := n.last()
					// An object the kernel refused alone is quarantined
					// (the sync programmed the rest); a batch that failed
					// whole fails the sync.
					if st.Failed == 0 || st.Err == nil && len(st.Quarantined) == 0 {
						t.Fatalf("sync with the fault: err %v, %d failed, %d quarantined; want the failure reported", st.Err, st.Failed, len(st.Quarantined))
					}
					if strings.Contains(f.name, " error on ") && (st.Err != nil || len(st.Quarantined) == 0) {
						t.Fatalf("sync with one object refused: err %v, quarantined %v; want it quarantined, the sync not failed", st.Err, st.Quarantined)
					}
					failed = st.Failed
				}
				n.IPVS.ClearFaults()
				n.Sets.ClearFaults()
				st := n.ctl.Resync()
				if st.Err != nil {
					t.Fatalf("resync after the fault cleared: %v", st.Err)
				}
				// A kernel error leaves exactly the failed objects
				// unwritten; a lost or failed reply leaves the outcome
				// unknown, and the resync's read shows what is left.
				exact := strings.Contains(f.name, " error on ")
				if !f.readFault && (st.Writes > failed || exact && st.Writes != failed) {
					t.Errorf("resync after the fault wrote %d objects; %d failed", st.Writes, failed)
				}
				if d := cmp.Diff(wantState, n.state(t)); d != "" {
					t.Errorf("kernel after one resync -faultless +got:\n%s", d)
				}
				if st := n.ctl.Resync(); st.Err != nil || st.Writes != 0 {
					t.Errorf("second resync: %d writes, err %v; want none", st.Writes, st.Err)
				}
			})
		}
	}
}
