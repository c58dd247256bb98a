package objects

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
)

// mapStore is a Store over a map.
type mapStore[K comparable, V any] map[K]V

func (m mapStore[K, V]) Each(f func(K, V)) {
	for k, v := range m {
		f(k, v)
	}
}
func (m mapStore[K, V]) Forget(k K)     { delete(m, k) }
func (m mapStore[K, V]) Adopt(k K, v V) { m[k] = v }

// TestReconcileWritten: what the kernel lost is forgotten and what it
// holds besides is adopted, except the objects written since the read
// began (State.Written) and the destinations of a virtual server written
// then: they stay as the stores have them.
func TestReconcileWritten(t *testing.T) {
	vs := func(ip string) render.VirtualServer {
		return render.VirtualServer{Protocol: render.TCP, Addr: netip.MustParseAddr(ip), Port: 80}
	}
	d := func(v render.VirtualServer, ip string) render.Destination {
		return render.Destination{Server: v, Addr: netip.MustParseAddr(ip), Port: 8080}
	}
	kept, gone, fresh := vs("10.96.0.1"), vs("10.96.0.2"), vs("10.96.0.3")
	lost, extra := d(kept, "10.244.0.1"), d(kept, "10.244.0.2")
	lostNew, extraOld := d(kept, "10.244.0.3"), d(kept, "10.244.0.4")
	underGone := d(gone, "10.244.0.5")
	entry := render.SetEntry{Set: "KUBE-CLUSTER-IP", Addr: kept.Addr, Protocol: render.TCP, Port: 80}
	addr := netip.MustParseAddr("10.96.0.9")
	one := render.DestOptions{Weight: 1}

	for _, tc := range []struct {
		name    string
		written dataplane.Written
		servers []render.VirtualServer
		dests   []render.Destination
		binds   int
		entries int
	}{
		{name: "no writes", servers: []render.VirtualServer{kept, gone},
			dests: []render.Destination{extra, extraOld, underGone}},
		{name: "written meanwhile",
			// lostNew was created after the read, extraOld removed after
			// it, the server gone (with its destination) and fresh
			// created, the entry and the binding written.
			written: dataplane.Written{
				Servers:  map[render.VirtualServer]bool{gone: true, fresh: true},
				Dests:    map[render.Destination]bool{lostNew: true, extraOld: true},
				Bindings: map[netip.Addr]bool{addr: true},
				Entries:  map[render.SetEntry]bool{entry: true},
			},
			servers: []render.VirtualServer{kept, fresh},
			dests:   []render.Destination{extra, lostNew},
			binds:   1, entries: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var k Keys
			servers := mapStore[ServerKey, render.ServerOptions]{k.Server(kept): {}, k.Server(fresh): {}}
			dests := mapStore[DestKey, render.DestOptions]{k.Dest(lost): one, k.Dest(lostNew): one}
			bindings := mapStore[AddrKey, struct{}]{k.Addr(addr): {}}
			entries := mapStore[EntryKey, struct{}]{k.Entry(entry): {}}
			st := &dataplane.State{
				Servers: map[render.VirtualServer]render.ServerOptions{kept: {}, gone: {}},
				Dests:   map[render.Destination]render.DestOptions{extra: one, extraOld: one, underGone: one},
			}
			st.Written = tc.written
			k.Reconcile(Stores{Servers: servers, Dests: dests, Bindings: bindings, Entries: entries}, st, nil)
			var gotServers []render.VirtualServer
			for key := range servers {
				gotServers = append(gotServers, k.ServerOf(key))
			}
			var gotDests []render.Destination
			for key := range dests {
				gotDests = append(gotDests, k.DestOf(key))
			}
			sortBy := cmp.Transformer("sorted", func(l []render.VirtualServer) map[render.VirtualServer]bool {
				m := map[render.VirtualServer]bool{}
				for _, v := range l {
					m[v] = true
				}
				return m
			})
			sortDests := cmp.Transformer("sortedDests", func(l []render.Destination) map[render.Destination]bool {
				m := map[render.Destination]bool{}
				for _, v := range l {
					m[v] = true
				}
				return m
			})
			eq := cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
			if diff := cmp.Diff(tc.servers, gotServers, sortBy, eq); diff != "" {
				t.Errorf("servers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.dests, gotDests, sortDests, eq); diff != "" {
				t.Errorf("destinations (-want +got):\n%s", diff)
			}
			if len(bindings) != tc.binds || len(entries) != tc.entries {
				t.Errorf("%d bindings and %d entries, want %d and %d", len(bindings), len(entries), tc.binds, tc.entries)
			}
		})
	}
}
