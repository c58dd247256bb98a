package iptables

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// nsRunner runs the iptables tools inside a test's namespace.
func nsRunner(ns *nstest.NetNS) rules.Runner {
	return func(name string, args []string, stdin []byte) ([]byte, error) {
		var out []byte
		err := ns.Do(func() error {
			var err error
			out, err = rules.Exec(name, args, stdin)
			return err
		})
		return out, err
	}
}

// kernelProxier returns a Proxier for both families working in a fresh
// namespace with the given backend.
func kernelProxier(t *testing.T, b rules.Backend, mod func(*Config)) (*Proxier, *nstest.NetNS) {
	t.Helper()
	nstest.LookPath(t, b.Command(rules.IPv4, "restore"))
	nstest.LookPath(t, b.Command(rules.IPv6, "restore"))
	ns := nstest.New(t)
	cfg := Config{IPv4: true, IPv6: true, MasqueradeBit: 14, Backend: b, Run: nsRunner(ns),
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/48")},
		NodeIPs:      []netip.Addr{netip.MustParseAddr("192.168.50.2")}}
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewProxier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, ns
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
	for _, b := range []rules.Backend{rules.NFT, rules.Legacy} {
		for _, large := range []bool{false, true} {
			name := string(b)
			if large {
				name += "/large-cluster"
			}
			t.Run(name, func(t *testing.T) {
				p, _ := kernelProxier(t, b, func(c *Config) { c.LocalhostNodePorts = large })
				if large {
					p.largeAt = 0
				}
				specs := broad()
				st, err := p.Snapshot(snapshot(specs...))
				if err != nil {
					t.Fatal(err)
				}
				if !st.Full || st.Restores == 0 {
					t.Fatalf("first sync: %+v, want a full sync that writes", st)
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
