package ipvssink

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// kernelReads is what one step cost on the fakes: the controller's
// whole-kernel reads (Deps.Reader), IPVS send calls (a dump is one), and
// ipset lists.
type kernelReads struct {
	Reads, IPVSSends, SetLists int
}

// TestKernelReads: both IPVS sinks read the whole kernel exactly at their
// first sync (adopt) and at each resync, and never on a change (service or
// endpoint added or removed) or a sync that changes nothing; a read is one
// IPVS dump of the virtual servers, one dump of each one's destinations
// and one list of each set. Both sinks make the same calls at every step.
func TestKernelReads(t *testing.T) {
	const n = 100 // services: 150 virtual servers (every other one a node port)
	all := services(0, n)
	moreEps := func() []*client.ServiceEndpoints {
		out := append([]*client.ServiceEndpoints(nil), all...)
		se := *out[7]
		ep := *se.Endpoints[0]
		ep.Key = "ep-new"
		ep.IPs = client.IPs{}
		ep.IPs.Add(faultNodeIP.Next())
		se.Endpoints = append(se.Endpoints[:len(se.Endpoints):len(se.Endpoints)], &ep)
		out[7] = &se
		return out
	}()
	sets := len(rules.Sets(xtables.IPv4)) + len(rules.Sets(xtables.IPv6))
	steps := []struct {
		name  string
		do    func(t *testing.T, fn *fakeNode, mk Make)
		reads int // whole-kernel reads expected
	}{
		{"first sync, empty kernel", func(_ *testing.T, fn *fakeNode, _ Make) { fn.ctl.Snapshot(snapshot(all)) }, 1},
		{"nothing changed", func(_ *testing.T, fn *fakeNode, _ Make) { fn.ctl.Snapshot(snapshot(all)) }, 0},
		{"endpoint added", func(_ *testing.T, fn *fakeNode, _ Make) { fn.ctl.Snapshot(snapshot(moreEps)) }, 0},
		{"endpoint removed", func(_ *testing.T, fn *fakeNode, _ Make) { fn.ctl.Snapshot(snapshot(all)) }, 0},
		{"service added", func(_ *testing.T, fn *fakeNode, _ Make) {
			fn.ctl.Snapshot(snapshot(append(services(500, 1), all...)))
		}, 0},
		{"service removed", func(_ *testing.T, fn *fakeNode, _ Make) { fn.ctl.Snapshot(snapshot(all)) }, 0},
		{"resync", func(_ *testing.T, fn *fakeNode, _ Make) { fn.ctl.Resync() }, 1},
		{"restart, resync before a snapshot", func(t *testing.T, fn *fakeNode, mk Make) {
			fn.start(t, mk, faultNodeIP)
			fn.ctl.Resync()
		}, 0},
		{"restart, first sync, cluster unchanged", func(_ *testing.T, fn *fakeNode, _ Make) { fn.ctl.Snapshot(snapshot(all)) }, 1},
		{"after restart, nothing changed", func(_ *testing.T, fn *fakeNode, _ Make) { fn.ctl.Snapshot(snapshot(all)) }, 0},
		{"after restart, resync", func(_ *testing.T, fn *fakeNode, _ Make) { fn.ctl.Resync() }, 1},
	}
	got := map[string][]kernelReads{}
	for _, sink := range []struct {
		name string
		mk   Make
	}{{"fullstate", FullState}, {"incremental", Incremental}} {
		fn := newFakeNode(t, sink.mk)
		for _, s := range steps {
			servers := 0
			if svcs, err := fn.node.Kernel.IPVSConn.Services(); err != nil {
				t.Fatal(err)
			} else {
				servers = len(svcs)
			}
			reads, sends, lists, syncs := fn.reads, fn.IPVS.Stats().Sends, fn.Sets.Calls["list"], len(fn.stats)
			s.do(t, fn, sink.mk)
			r := kernelReads{Reads: fn.reads - reads, IPVSSends: fn.IPVS.Stats().Sends - sends, SetLists: fn.Sets.Calls["list"] - lists}
			got[sink.name] = append(got[sink.name], r)
			name := sink.name + ", " + s.name
			for _, st := range fn.stats[syncs:] {
				if st.Err != nil || st.Failed != 0 {
					t.Fatalf("%s: sync failed: %d objects, %v", name, st.Failed, st.Err)
				}
			}
			if r.Reads != s.reads || r.SetLists != s.reads*sets {
				t.Errorf("%s: %d whole-kernel reads, %d ipset lists; want %d and %d", name, r.Reads, r.SetLists, s.reads, s.reads*sets)
			}
			switch {
			case s.reads == 0 && r.IPVSSends > 3:
				t.Errorf("%s: %d IPVS sends with no read (%d virtual servers); want at most 3", name, r.IPVSSends, servers)
			case s.reads == 1 && servers > 0 && r.IPVSSends != 1+servers:
				// An unchanged kernel: the read is all there is.
				t.Errorf("%s: %d IPVS sends; want %d (one dump of the servers, one of each one's destinations)", name, r.IPVSSends, 1+servers)
			}
		}
		if len(fn.stats) == 0 || fn.last().Writes != 0 {
			t.Errorf("%s: the last resync wrote %d objects; want none", sink.name, fn.last().Writes)
		}
	}
	if d := cmp.Diff(got["fullstate"], got["incremental"]); d != "" {
		t.Errorf("kernel calls by step, -fullstate +incremental:\n%s", d)
	}
	for i, s := range steps {
		t.Logf("%-40s %+v", s.name, got["incremental"][i])
	}
}

// staticReader returns one state, read once: a resync over it costs the
// controller's work only, no kernel's.
type staticReader struct{ st *dataplane.State }

func (r staticReader) Read() (*dataplane.State, error) { return r.st, nil }

// BenchmarkResync: one resync of an unchanged kernel holding 1,000
// services x 10 endpoints, by each IPVS sink: over the fakes (the read's
// IPVS sends per resync; the fake kernel's work is in the time) and over a
// state read beforehand (the controller's own work).
func BenchmarkResync(b *testing.B) {
	const n, eps = 1000, 10
	all := services(0, n)
	for i, se := range all {
		base := se.Endpoints[0]
		se.Endpoints = nil
		for j := range eps {
			ep := *base
			ep.Key = client.EndpointKey(fmt.Sprintf("ep-%d", j))
			ep.IPs = client.IPs{}
			ep.IPs.Add(netip.AddrFrom4([4]byte{10, byte(128 + j), byte(i >> 8), byte(i)}))
			se.Endpoints = append(se.Endpoints, &ep)
		}
	}
	snap := snapshot(all)
	for _, sink := range []struct {
		name string
		mk   Make
	}{{"fullstate", FullState}, {"incremental", Incremental}} {
		b.Run("fake-kernel/"+sink.name, func(b *testing.B) {
			fn := newFakeNode(b, sink.mk)
			fn.ctl.Snapshot(snap)
			sends := fn.IPVS.Stats().Sends
			b.ResetTimer()
			for range b.N {
				if st := fn.ctl.Resync(); st.Err != nil || st.Writes != 0 {
					b.Fatalf("resync: %d writes, err %v; want none", st.Writes, st.Err)
				}
			}
			b.ReportMetric(float64(fn.IPVS.Stats().Sends-sends)/float64(b.N), "ipvs-sends/op")
		})
		b.Run("controller-only/"+sink.name, func(b *testing.B) {
			fn := newFakeNode(b, sink.mk)
			fn.ctl.Snapshot(snap)
			st, err := fn.node.Read()
			if err != nil {
				b.Fatal(err)
			}
			ctl := staticController(fn, sink.mk, st, nil)
			ctl.Snapshot(snap)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if st := ctl.Resync(); st.Err != nil || st.Writes != 0 {
					b.Fatalf("resync: %d writes, err %v; want none", st.Writes, st.Err)
				}
			}
		})
		// A restart with the cluster unchanged: adopt the state, render
		// every service, write nothing.
		b.Run("restart-controller-only/"+sink.name, func(b *testing.B) {
			fn := newFakeNode(b, sink.mk)
			fn.ctl.Snapshot(snap)
			st, err := fn.node.Read()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				var last dataplane.SyncStats
				ctl := staticController(fn, sink.mk, st, func(s dataplane.SyncStats) { last = s })
				ctl.Snapshot(snap)
				if last.Err != nil || last.Writes != 0 {
					b.Fatalf("restart: %d writes, err %v; want none", last.Writes, last.Err)
				}
			}
		})
	}
}

// staticController is a controller of mk on fn's kernel that reads st.
// onSync, when set, gets every sync's stats.
func staticController(fn *fakeNode, mk Make, st *dataplane.State, onSync func(dataplane.SyncStats)) runtime.Controller {
	fams := []xtables.Family{xtables.IPv4, xtables.IPv6}
	return mk(Deps{Render: render.Config{Scheduler: "rr", NodeAddresses: []netip.Addr{faultNodeIP}, Families: fams},
		Applier: kernelApplier(fn.node.Kernel), Reader: staticReader{st}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), OnSync: onSync})
}
