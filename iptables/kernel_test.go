package iptables

import (
	"slices"

	"github.com/proxysinks/proxysinks/client"
	"net/netip"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// kernelProxier returns a Proxier for both families working in a fresh
// namespace with the given backend.
func kernelProxier(t *testing.T, b xtables.Backend, mod func(*Config)) (*Proxier, *nstest.NetNS) {
	t.Helper()
	nstest.LookPath(t, b.Command(xtables.IPv4, "restore"))
	nstest.LookPath(t, b.Command(xtables.IPv6, "restore"))
	ns := nstest.New(t)
	return proxierIn(t, ns, b, mod), ns
}

// proxierIn returns a Proxier for both families working in ns with the
// given backend (a second one stands for the sink restarted).
func proxierIn(t *testing.T, ns *nstest.NetNS, b xtables.Backend, mod func(*Config)) *Proxier {
	t.Helper()
	cfg := Config{IPv4: true, IPv6: true, MasqueradeBit: 14, Backend: b, Run: xtables.ExecWith(ns.Do), Generation: nsGeneration(ns),
		Local:   xtables.LocalTraffic{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/48")}},
		NodeIPs: []netip.Addr{netip.MustParseAddr("192.168.50.2")}}
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewProxier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func saveAll(t *testing.T, p *Proxier) string {
	t.Helper()
	var b strings.Builder
	for _, f := range p.fams {
		for _, tb := range tables {
			out, err := p.run(f.backend.Command(f.fc.fam, "save"), []string{"-t", tb}, nil)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(out)
		}
	}
	return b.String()
}

// TestKernelRoundTrip: what the Proxier renders is exactly what
// iptables-save prints back, on both backends and families: a resync right
// after the first sync finds nothing to write.
func TestKernelRoundTrip(t *testing.T) {
	for _, b := range []xtables.Backend{xtables.NFT, xtables.Legacy} {
		for _, mode := range []string{"", "large-cluster", "bounded"} {
			large, bound := mode == "large-cluster", 0
			if mode == "bounded" {
				// Transactions of about 10 rules: the top-level chains
				// are filled progressively, service by service.
				bound = 10
			}
			name := string(b)
			if mode != "" {
				name += "/" + mode
			}
			t.Run(name, func(t *testing.T) {
				// CompareEvery 1: the resync reads the kernel back, the
				// nf_tables generation notwithstanding.
				p, _ := kernelProxier(t, b, func(c *Config) {
					c.LocalhostNodePorts, c.MaxRestoreRules, c.CompareEvery = large, bound, 1
				})
				if large {
					p.largeAt = 0
				}
				specs := broad()
				st, err := p.Snapshot(snapshot(specs...))
				if err != nil {
					t.Fatal(err)
				}
				if !st.Full || st.Restores == 0 || bound > 0 && st.Restores < 5 {
					t.Fatalf("first sync: %+v, want a full sync that writes (in several restores when bounded)", st)
				}
				if p.fams[0].large != large {
					t.Fatalf("large-cluster mode %v, want %v", p.fams[0].large, large)
				}
				st, err = p.Resync()
				if err != nil {
					t.Fatal(err)
				}
				if st.Restores != 0 {
					t.Fatalf("resync after the first sync wrote %+v; kernel:\n%s\nwould write:\n%s", st, saveAll(t, p), pendingWrites(t, p))
				}
			})
		}
	}
}

// pendingWrites returns what a resync would write now, without writing it.
func pendingWrites(t *testing.T, p *Proxier) string {
	t.Helper()
	var b strings.Builder
	// Always compare, and leave what the Proxier knows of the kernel as
	// it was: nothing is written.
	gen := p.gen
	p.gen.read = nil
	defer func() { p.gen = gen }()
	run := p.run
	p.run = func(name string, args []string, stdin []byte) ([]byte, error) {
		if strings.HasSuffix(name, "-restore") {
			b.WriteString("# " + name + "\n")
			b.Write(stdin)
			return nil, nil
		}
		return run(name, args, stdin)
	}
	defer func() { p.run = run }()
	if _, err := p.Resync(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestKernelPartialSyncs drives a sequence of changes through partial
// syncs; after each one the kernel must hold exactly what a full sync of
// the same state holds (a resync finds nothing to write, so no stale chain
// or rule is left and nothing is missing).
func TestKernelPartialSyncs(t *testing.T) {
	for _, b := range []xtables.Backend{xtables.NFT, xtables.Legacy} {
		t.Run(string(b), func(t *testing.T) {
			p, _ := kernelProxier(t, b, nil)
			specs := broad()
			s := snapshot(specs...)
			if _, err := p.Snapshot(s); err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				name string
				edit func([]svcSpec) []svcSpec
			}{
				{"endpoint removed", func(l []svcSpec) []svcSpec { l[1].eps = l[1].eps[:2]; return l }},
				{"endpoint added", func(l []svcSpec) []svcSpec {
					l[0].eps = append(l[0].eps, ep{ip: "10.244.3.6", remote: true})
					return l
				}},
				{"service removed", func(l []svcSpec) []svcSpec { return slices.Delete(l, 2, 3) }},
				{"service added", func(l []svcSpec) []svcSpec {
					return append(l, svcSpec{name: "new", typ: client.NodePort, clusterIPs: []string{"10.96.1.1", "fd00:96::1:1"},
						ports: []client.Port{withNodePort(tcp("a", 80, 80), 31001), withNodePort(udp("b", 81, 81), 31002)},
						eps:   []ep{{ip: "10.244.1.20"}, {ip: "fd00:244:1::20"}}})
				}},
				{"last endpoints gone", func(l []svcSpec) []svcSpec { l[0].eps = nil; return l }},
				{"endpoints back", func(l []svcSpec) []svcSpec { l[0].eps = []ep{{ip: "10.244.1.5"}}; return l }},
				{"eTP Local and source ranges dropped", func(l []svcSpec) []svcSpec {
					for i := range l {
						if l[i].name == "lb-local" {
							l[i].eLocal, l[i].ranges, l[i].hcNodePort = false, nil, 0
						}
					}
					return l
				}},
				{"affinity on", func(l []svcSpec) []svcSpec { l[1].affinity = 60; return l }},
				{"everything removed", func(l []svcSpec) []svcSpec { return nil }},
				{"everything back", func([]svcSpec) []svcSpec { return broad() }},
			}
			for _, step := range steps {
				specs = step.edit(slices.Clone(specs))
				s = next(s, specs...)
				st, err := p.Snapshot(s)
				if err != nil {
					t.Fatalf("%s: %v", step.name, err)
				}
				if st.Full || st.Restores < 1 || st.Restores > 2 {
					t.Fatalf("%s: %+v, want one partial restore per family", step.name, st)
				}
				if w := pendingWrites(t, p); w != "" {
					t.Fatalf("%s: the kernel differs from a full sync of the same state; a resync would write:\n%s", step.name, w)
				}
			}
		})
	}
}

// TestKernelPartialFailureRecovers: a partial sync that the kernel rejects
// (someone deleted a rule it must delete) is counted, and the next sync is
// a full one that repairs the state.
func TestKernelPartialFailureRecovers(t *testing.T) {
	p, ns := kernelProxier(t, xtables.NFT, nil)
	specs := broad()
	s := snapshot(specs...)
	if _, err := p.Snapshot(s); err != nil {
		t.Fatal(err)
	}
	// Drift: the cluster-IP rule of default/aff disappears.
	ns.MustRun(t, "iptables-nft", "-t", "nat", "-D", "KUBE-SERVICES", "-d", "10.96.0.50/32", "-p", "tcp",
		"-m", "comment", "--comment", "default/aff cluster IP", "-m", "tcp", "--dport", "80", "-j", ServiceChain("default/aff", "tcp"))
	// Removing the service makes a partial sync delete that rule: rejected.
	var kept []svcSpec
	for _, sp := range specs {
		if sp.name != "aff" {
			kept = append(kept, sp)
		}
	}
	s = next(s, kept...)
	st, err := p.Snapshot(s)
	if err == nil || st.PartialFailures != 1 || st.Failures != 1 {
		t.Fatalf("partial sync over drift: %+v, %v; want one failed partial restore", st, err)
	}
	st, err = p.Snapshot(next(s, kept...))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Full {
		t.Errorf("the sync after a failed partial one was not full: %+v", st)
	}
	if w := pendingWrites(t, p); w != "" {
		t.Errorf("after the full sync the kernel still differs; a resync would write:\n%s", w)
	}
	if tot := p.Totals(); tot.PartialFailures != 1 {
		t.Errorf("totals %+v, want one partial failure", tot)
	}
}
