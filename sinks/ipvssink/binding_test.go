package ipvssink

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
)

// orderedLinks logs every write to the links it wraps.
type orderedLinks struct {
	*dataplanetest.Links
	log *[]string
}

func (o orderedLinks) record(op string, as []netip.Addr) {
	for _, a := range as {
		*o.log = append(*o.log, op+" "+a.String())
	}
}

func (o orderedLinks) AddAddresses(name string, as []netip.Addr) error {
	o.record("add address", as)
	return o.Links.AddAddresses(name, as)
}

func (o orderedLinks) DelAddresses(name string, as []netip.Addr) error {
	o.record("del address", as)
	return o.Links.DelAddresses(name, as)
}

func (o orderedLinks) AddLocalRoutes(name string, as []netip.Addr) error {
	o.record("add route", as)
	return o.Links.AddLocalRoutes(name, as)
}

func (o orderedLinks) DelLocalRoutes(name string, as []netip.Addr) error {
	o.record("del route", as)
	return o.Links.DelLocalRoutes(name, as)
}

// TestVIPBindingSwitch: under --ipvs-vip-binding=routes each IPv4 virtual
// IP gets a local route and no address, IPv6 ones stay addresses; a restart
// with the cluster unchanged writes nothing; a restart with the other
// binding makes every IPv4 virtual IP local the new way first and only
// then removes the old way's, so that none is ever unreachable; and back.
func TestVIPBindingSwitch(t *testing.T) {
	for _, sink := range []struct {
		name string
		mk   Make
	}{{"fullstate", FullState}, {"incremental", Incremental}} {
		t.Run(sink.name, func(t *testing.T) {
			ses := services(0, 5)
			dual := nodePort("dual", "10.96.9.9", 30099)
			dual.Service.ClusterIPs.Add(netip.MustParseAddr("fd00:96::9"))
			ses = append(ses, dual)
			v4 := []string{"10.96.0.0", "10.96.0.1", "10.96.0.2", "10.96.0.3", "10.96.0.4", "10.96.9.9"}
			v6 := []string{"fd00:96::9"}

			n := newFakeNode(t, sink.mk) // addresses, the default
			sync := func(b dataplane.Binding) dataplane.SyncStats {
				t.Helper()
				n.binding, n.linkOps = b, nil
				n.start(t, sink.mk, faultNodeIP)
				n.ctl.Snapshot(snapshot(ses))
				st := n.last()
				if st.Err != nil {
					t.Fatalf("sync with %s: %v", b, st.Err)
				}
				return st
			}
			check := func(b dataplane.Binding, wantAddrs, wantRoutes []string) {
				t.Helper()
				addrs, _ := n.Links.Addresses("kube-ipvs0")
				routes, _ := n.Links.LocalRoutes(dataplane.RouteLink)
				if d := cmp.Diff(wantAddrs, strs(addrs)); d != "" {
					t.Errorf("%s: addresses -want +got:\n%s", b, d)
				}
				if d := cmp.Diff(wantRoutes, strs(routes)); d != "" {
					t.Errorf("%s: local routes -want +got:\n%s", b, d)
				}
			}
			sync(dataplane.BindAddresses)
			check(dataplane.BindAddresses, append(slices.Clone(v4), v6...), []string{})

			sync(dataplane.BindRoutes)
			check(dataplane.BindRoutes, v6, v4)
			if i, j := lastIndex(n.linkOps, "add route"), firstIndex(n.linkOps, "del address"); i < 0 || j < 0 || i > j {
				t.Errorf("switching to routes, the link writes were %v: want every route added before any address is removed", n.linkOps)
			}
			if got := len(n.linkOps); got != 2*len(v4) {
				t.Errorf("switching to routes made %d link writes, want %d: %v", got, 2*len(v4), n.linkOps)
			}

			if st := sync(dataplane.BindRoutes); st.Writes != 0 || len(n.linkOps) != 0 {
				t.Errorf("restart with routes, cluster unchanged: %d writes %v, want none", st.Writes, n.linkOps)
			}
			check(dataplane.BindRoutes, v6, v4)
			// Every virtual server is still the sink's under routes: a
			// removed service's are removed, with its route.
			n.ctl.Snapshot(snapshot(ses[1:]))
			if err := n.last().Err; err != nil {
				t.Fatal(err)
			}
			check(dataplane.BindRoutes, v6, v4[1:])
			if got := n.ipvsServers(t); slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "10.96.0.0:") }) {
				t.Errorf("servers %v after the service on 10.96.0.0 was removed", got)
			}

			sync(dataplane.BindAddresses)
			check(dataplane.BindAddresses, append(slices.Clone(v4), v6...), []string{})
			if i, j := lastIndex(n.linkOps, "add address"), firstIndex(n.linkOps, "del route"); i < 0 || j < 0 || i > j {
				t.Errorf("switching back to addresses, the link writes were %v: want every address added before any route is removed", n.linkOps)
			}
		})
	}
}

func strs(as []netip.Addr) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

func firstIndex(ops []string, prefix string) int {
	return slices.IndexFunc(ops, func(s string) bool { return strings.HasPrefix(s, prefix+" ") })
}

func lastIndex(ops []string, prefix string) int {
	for i := len(ops) - 1; i >= 0; i-- {
		if strings.HasPrefix(ops[i], prefix+" ") {
			return i
		}
	}
	return -1
}
