package incremental

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/diff"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/fullstate"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
)

// randomCluster makes random but valid-looking cluster states from a small
// pool of names and addresses, so that services share cluster IPs,
// external IPs, node ports and endpoint addresses, and change type,
// traffic policies, affinity, scheduler, ports and families.
type randomCluster struct {
	r     *rand.Rand
	slots int
}

func (g *randomCluster) pick(addrs ...string) netip.Addr {
	return netip.MustParseAddr(addrs[g.r.IntN(len(addrs))])
}

func (g *randomCluster) service(i int) *client.ServiceEndpoints {
	r := g.r
	svc := &client.Service{Namespace: "ns", Name: fmt.Sprintf("svc-%02d", i)}
	svc.Type = []client.ServiceType{client.ClusterIP, client.ClusterIP, client.NodePort, client.LoadBalancer}[r.IntN(4)]
	// Cluster IPs from a pool of 6 per family: services share them.
	v4, v6 := r.IntN(4) > 0, r.IntN(3) == 0
	if !v4 && !v6 {
		v4 = true
	}
	if v4 {
		svc.ClusterIPs.Add(netip.AddrFrom4([4]byte{10, 96, 0, byte(1 + r.IntN(6))}))
	}
	if v6 {
		svc.ClusterIPs.Add(netip.MustParseAddr(fmt.Sprintf("fd00:96::%x", 1+r.IntN(6))))
	}
	protos := []client.Protocol{client.TCP, client.TCP, client.UDP, client.SCTP}
	for p := range 1 + r.IntN(2) {
		port := client.Port{Name: fmt.Sprintf("p%d", p), Protocol: protos[r.IntN(len(protos))], Port: []int{80, 443, 53}[r.IntN(3)]}
		if svc.Type != client.ClusterIP {
			port.NodePort = 30000 + r.IntN(4)
		}
		svc.Ports = append(svc.Ports, port)
	}
	if r.IntN(4) == 0 {
		// Not the node's own address: a virtual server there outside the
		// node-port range is one Node.Read cannot see as the sinks' (see
		// dataplane/README.md on ownership).
		svc.ExternalIPs.Add(g.pick("203.0.113.1", "203.0.113.2"))
	}
	if svc.Type == client.LoadBalancer {
		svc.LoadBalancerIPs.Add(g.pick("198.51.100.1", "198.51.100.2"))
		if r.IntN(2) == 0 {
			svc.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("10.0.0.0/8")}[:1+r.IntN(2)]
		}
	}
	svc.ExternalTrafficLocal = svc.Type != client.ClusterIP && r.IntN(3) == 0
	svc.InternalTrafficLocal = r.IntN(5) == 0
	if svc.ExternalTrafficLocal && svc.Type == client.LoadBalancer {
		svc.HealthCheckNodePort = 32000 + r.IntN(2)
	}
	if r.IntN(4) == 0 {
		svc.SessionAffinity = &client.SessionAffinity{TimeoutSeconds: []int{0, 60}[r.IntN(2)]}
	}
	if r.IntN(5) == 0 {
		svc.Annotations = map[string]string{render.SchedulerAnnotation: []string{"wrr", "lc", "nope"}[r.IntN(3)]}
	}
	se := &client.ServiceEndpoints{Service: svc}
	for e := range r.IntN(5) {
		ep := &client.Endpoint{Key: client.EndpointKey(fmt.Sprintf("ep-%d", e)), Local: r.IntN(2) == 0}
		switch r.IntN(5) {
		case 0: // terminating, not serving
		case 1:
			ep.Serving = true // terminating but serving
		default:
			ep.Ready, ep.Serving = true, true
		}
		ep.Internal, ep.External = ep.Ready || ep.Serving, ep.Ready || ep.Serving
		// Endpoint addresses from a pool of 5: services share backends.
		n := byte(1 + r.IntN(5))
		if v4 || r.IntN(3) == 0 {
			ep.IPs.Add(netip.AddrFrom4([4]byte{10, 244, 0, n}))
		}
		if v6 {
			ep.IPs.Add(netip.MustParseAddr(fmt.Sprintf("fd00:244::%x", n)))
		}
		for _, p := range svc.Ports {
			ep.PortOverrides = append(ep.PortOverrides, client.PortOverride{Name: p.Name, Protocol: p.Protocol, Port: 8000 + r.IntN(2)})
		}
		se.Endpoints = append(se.Endpoints, ep)
	}
	return se
}

// step changes a few services of the tracker: added, replaced, removed,
// or only an endpoint changed.
func (g *randomCluster) step(tr *client.Tracker) {
	if g.r.IntN(25) == 0 {
		// Now and then the whole cluster goes.
		for i := range g.slots {
			tr.Set(client.ServiceKey{Namespace: "ns", Name: fmt.Sprintf("svc-%02d", i)}, nil)
		}
		return
	}
	for range 1 + g.r.IntN(4) {
		i := g.r.IntN(g.slots)
		k := client.ServiceKey{Namespace: "ns", Name: fmt.Sprintf("svc-%02d", i)}
		old := tr.Get(k)
		switch x := g.r.IntN(10); {
		case x < 2:
			tr.Set(k, nil)
		case x < 5 && old != nil && len(old.Endpoints) > 0:
			// One endpoint changes (conditions, locality, address).
			se := &client.ServiceEndpoints{Service: old.Service, Endpoints: append([]*client.Endpoint(nil), old.Endpoints...)}
			j := g.r.IntN(len(se.Endpoints))
			ep := *se.Endpoints[j]
			ep.Ready, ep.Local = !ep.Ready, g.r.IntN(2) == 0
			ep.Serving, ep.Internal, ep.External = ep.Ready, ep.Ready, ep.Ready
			if g.r.IntN(2) == 0 {
				ep.IPs = client.IPs{}
				ep.IPs.Add(netip.AddrFrom4([4]byte{10, 244, 1, byte(1 + g.r.IntN(5))}))
			}
			se.Endpoints[j] = &ep
			tr.Set(k, se)
		default:
			tr.Set(k, g.service(i))
		}
	}
}

// testNode is a node the equivalence test programs: fake or real kernel.
type testNode interface {
	// parts returns, as a (re)started process builds them, the applier
	// (through the node's failing writer) and the reader.
	parts(t testing.TB) (*dataplane.Applier, *dataplane.Node)
	failer() *failing
	// drift removes a bound address and a destination and binds a stray
	// address, as an operator's hand would.
	drift(t *testing.T)
	// tools returns what the kernel's own tools show, normalized ("" for
	// fakes).
	tools(t *testing.T) string
}

// TestEquivalence drives the full-state and the incremental sink with the
// same random sequences of cluster states, with failures injected in the
// middle of batches (the same objects fail for both), restarts and drift,
// and requires the identical kernel state after every step; after a step
// with no failure, the state must also be exactly the rendered cluster.
// On fakes; TestEquivalenceKernel runs it on the real kernel.
func TestEquivalence(t *testing.T) {
	seeds, steps := 40, 60
	if testing.Short() {
		seeds = 8
	}
	runEquivalence(t, seeds, steps, func(t *testing.T) testNode { return newFakeNode(t) })
}

func runEquivalence(t *testing.T, seeds, steps int, newNode func(*testing.T) testNode) {
	cfg := render.Config{Scheduler: "rr", NodeAddresses: nodeIPs}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			g := &randomCluster{r: rand.New(rand.NewPCG(uint64(seed), 7)), slots: 10}
			full, incr := newNode(t), newNode(t)
			fa, fnode := full.parts(t)
			ia, inode := incr.parts(t)
			fctl := fullstate.NewController(cfg, fa, fnode, quiet)
			ictl := New(cfg, ia, inode, quiet)
			ev := diff.NewEvents(ictl)
			tr := client.NewTracker()
			var fstats, istats []dataplane.SyncStats
			fctl.OnSync = func(s dataplane.SyncStats) { fstats = append(fstats, s) }
			ictl.OnSync = func(s dataplane.SyncStats) { istats = append(istats, s) }
			compare := func(step int, what string) {
				t.Helper()
				if d := stateDiff(read(t, fnode), read(t, inode)); d != "" {
					t.Fatalf("step %d%s: kernels differ (-full-state +incremental):\n%s", step, what, d)
				}
				// The kernel's tools (slow to run in the emulated VM) after
				// every fifth step and every resync, drift and restart.
				if step%5 != 4 && what == "" {
					return
				}
				if ft, it := full.tools(t), incr.tools(t); ft != it {
					t.Fatalf("step %d%s: the kernel tools show different states:\nfull-state:\n%s\nincremental:\n%s", step, what, ft, it)
				}
			}
			for step := range steps {
				g.step(tr)
				failures := step%3 == 1
				snap := tr.Snapshot()
				if failures {
					pick := pickOneIn(uint64(seed*1000+step), 4)
					full.failer().pick, incr.failer().pick = pick, pick
				}
				fctl.Snapshot(snap)
				ev.Apply(snap)
				full.failer().pick, incr.failer().pick = nil, nil
				compare(step, "")
				if fw, iw := fstats[len(fstats)-1].Writes, istats[len(istats)-1].Writes; fw != iw {
					t.Errorf("step %d: full-state wrote %d objects, incremental %d", step, fw, iw)
				}
				if !failures {
					if d := stateDiff(wantState(snap.Services(), cfg), read(t, inode)); d != "" {
						t.Fatalf("step %d: kernel is not the rendered cluster (-want +got):\n%s", step, d)
					}
				}
				switch step % 10 {
				case 2:
					// A resync whose read is taken while the next change
					// is applied (the runtime's split resync; with odd
					// seeds the read is over before it, the stalest a read
					// can be): finishing it undoes nothing of the change
					// and writes nothing, the kernel having no drift.
					fread, iread := fctl.StartResync(), ictl.StartResync()
					var ffinish, ifinish func() dataplane.SyncStats
					readDone := make(chan struct{})
					readBoth := func() { ffinish, ifinish = fread(), iread(); close(readDone) }
					if seed%2 == 0 {
						go readBoth()
					} else {
						readBoth()
					}
					g.step(tr)
					snap = tr.Snapshot()
					fctl.Snapshot(snap)
					ev.Apply(snap)
					<-readDone
					for sink, finish := range map[string]func() dataplane.SyncStats{"full-state": ffinish, "incremental": ifinish} {
						if st := finish(); st.Writes != 0 || st.Err != nil {
							t.Errorf("step %d: %s sink: a resync read beside a change wrote %d objects, error %v, after it", step, sink, st.Writes, st.Err)
						}
					}
					if d := stateDiff(wantState(snap.Services(), cfg), read(t, inode)); d != "" {
						t.Fatalf("step %d: kernel is not the rendered cluster after a resync read beside a change (-want +got):\n%s", step, d)
					}
					compare(step, " after a resync read beside a change")
				case 4:
					// Both repair the failures of the last step on resync.
					fctl.Resync()
					ictl.Resync()
					compare(step, " after resync")
				case 7:
					full.drift(t)
					incr.drift(t)
					// The first resync binds the address again; servers on
					// it were hidden from that read, so the destination
					// removed there comes back at the second.
					// The first split, as the runtime runs it.
					fctl.StartResync()()()
					ictl.StartResync()()()
					fctl.Resync()
					ictl.Resync()
					want := wantState(snap.Services(), cfg)
					if d := stateDiff(want, read(t, fnode)); d != "" {
						t.Fatalf("step %d: full-state sink: drift not repaired (-want +got):\n%s", step, d)
					}
					if d := stateDiff(want, read(t, inode)); d != "" {
						t.Fatalf("step %d: incremental sink: drift not repaired (-want +got):\n%s", step, d)
					}
					compare(step, " after drift")
				case 9:
					// Restart both on the same kernels: no writes.
					fa, fnode = full.parts(t)
					ia, inode = incr.parts(t)
					fctl = fullstate.NewController(cfg, fa, fnode, quiet)
					ictl = New(cfg, ia, inode, quiet)
					fctl.OnSync = func(s dataplane.SyncStats) { fstats = append(fstats, s) }
					ictl.OnSync = func(s dataplane.SyncStats) { istats = append(istats, s) }
					ev = diff.NewEvents(ictl)
					fctl.Snapshot(tr.Snapshot())
					ev.Apply(fullSnapshot(tr))
					if fw, iw := fstats[len(fstats)-1].Writes, istats[len(istats)-1].Writes; (fw != 0 || iw != 0) && !failures {
						t.Errorf("step %d: restarted sinks wrote %d (full-state) and %d (incremental) objects, want 0", step, fw, iw)
					}
					compare(step, " after restart")
				}
			}
		})
	}
}

// fullSnapshot is the tracker's state as a source's first snapshot after a
// restart: every service is a change.
func fullSnapshot(tr *client.Tracker) *client.Snapshot {
	s := tr.Snapshot()
	var cs []client.Change
	for se := range s.All() {
		cs = append(cs, client.Change{Key: se.Service.Key(), Service: se})
	}
	return client.NewSnapshot(s.Services(), cs)
}

// driftOn removes the first bound address and the first destination of
// the first virtual server with one, and binds a stray address.
func driftOn(t *testing.T, links dataplane.Links, conn *ipvs.Conn) {
	t.Helper()
	if as, _ := links.Addresses("kube-ipvs0"); len(as) > 0 {
		if err := links.DelAddresses("kube-ipvs0", as[:1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := links.AddAddresses("kube-ipvs0", []netip.Addr{netip.MustParseAddr("10.99.99.99")}); err != nil {
		t.Fatal(err)
	}
	svcs, err := conn.Services()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs {
		ds, err := conn.Destinations(s.Service.Key())
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) > 0 {
			if err := conn.Apply([]ipvs.Op{{Kind: ipvs.OpRemoveDestination, Service: s.Service, Destination: ds[0].Destination}}); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
}
