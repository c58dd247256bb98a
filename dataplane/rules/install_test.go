package rules

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// kernelSetup makes a namespace with every kube-proxy ipset of the family
// (the rules refer to them) and returns its runner.
func kernelSetup(t *testing.T, f xtables.Family, b xtables.Backend) (*nstest.NetNS, xtables.Runner) {
	t.Helper()
	nstest.LookPath(t, "ipset")
	nstest.LookPath(t, b.Command(f, "restore"))
	ns := nstest.New(t)
	for _, s := range Sets(f) {
		args := []string{"create", s, SetType(s)}
		if SetType(s) == "bitmap:port" {
			args = append(args, "range", "0-65535")
		} else if f == xtables.IPv6 {
			args = append(args, "family", "inet6")
		}
		ns.MustRun(t, "ipset", args...)
	}
	return ns, xtables.ExecWith(ns.Do)
}

func save(t *testing.T, run xtables.Runner, f xtables.Family, b xtables.Backend, table string) string {
	t.Helper()
	out, err := run(b.Command(f, "save"), []string{"-t", table}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// ours returns the lines of a save output that belong to our chains or jump
// to them, in order.
func ours(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "-A KUBE-") || strings.HasPrefix(l, ":KUBE-") || (strings.HasPrefix(l, "-A ") && strings.Contains(l, "-j KUBE-")) {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestEnsureKernel(t *testing.T) {
	configs := map[string]Config{
		"default":        {MasqueradeBit: 14, RandomFully: true},
		"masquerade-all": {MasqueradeBit: 14, MasqueradeAll: true},
		"cluster-cidr": {MasqueradeBit: 5, Local: xtables.LocalTraffic{CIDRs: []netip.Prefix{
			netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")}}},
		"bridge":           {MasqueradeBit: 14, Local: xtables.LocalTraffic{Interface: "cbr0"}},
		"interface-prefix": {MasqueradeBit: 14, Local: xtables.LocalTraffic{Interface: "veth+"}},
	}
	if nstest.InVM() {
		// Under emulation every exec costs a lot: the VM checks each backend
		// and family on its kernel, the host runs the whole matrix.
		configs = map[string]Config{"default": configs["default"]}
	}
	for _, b := range []xtables.Backend{xtables.NFT, xtables.Legacy} {
		for _, f := range []xtables.Family{xtables.IPv4, xtables.IPv6} {
			for name, cfg := range configs {
				t.Run(fmt.Sprintf("%s/%s/%s", b, f, name), func(t *testing.T) {
					_, run := kernelSetup(t, f, b)
					// Someone else's rules, which must survive.
					foreign := "*nat\n:FOREIGN - [0:0]\n-A FOREIGN -p tcp -j RETURN\n-A PREROUTING -p udp -j FOREIGN\nCOMMIT\n"
					if _, err := run(b.Command(f, "restore"), []string{"--noflush"}, []byte(foreign)); err != nil {
						t.Fatal(err)
					}

					in := &Installer{Backend: b, Run: run}
					rs := Build(cfg, f)
					changed, err := in.Ensure(rs)
					if err != nil {
						t.Fatal(err)
					}
					if !changed || in.Writes != 1 {
						t.Fatalf("first Ensure: changed=%v writes=%d, want true and 1", changed, in.Writes)
					}
					// A second Ensure finds everything in place: no write.
					if changed, err := in.Ensure(rs); err != nil || changed || in.Writes != 1 {
						t.Fatalf("second Ensure: changed=%v err=%v writes=%d, want no write", changed, err, in.Writes)
					}
					nat := save(t, run, f, b, "nat")
					for _, keep := range []string{"-A FOREIGN -p tcp -j RETURN", "-A PREROUTING -p udp -j FOREIGN"} {
						if !strings.Contains(nat, keep) {
							t.Errorf("foreign rule %q lost:\n%s", keep, nat)
						}
					}
					// Our jump comes first in PREROUTING.
					if i, j := strings.Index(nat, "-A PREROUTING -m comment"), strings.Index(nat, "-A PREROUTING -p udp"); i < 0 || i > j {
						t.Errorf("jump to KUBE-SERVICES not first in PREROUTING:\n%s", nat)
					}

					// Drift: a rule deleted by hand is restored.
					before := ours(nat)
					if _, err := run(b.Command(f, "restore"), []string{"--noflush"}, []byte("*nat\n-D KUBE-SERVICES 1\n-D OUTPUT 1\nCOMMIT\n")); err != nil {
						t.Fatal(err)
					}
					if changed, err := in.Ensure(rs); err != nil || !changed {
						t.Fatalf("Ensure after drift: changed=%v err=%v, want a rewrite", changed, err)
					}
					if diff := cmp.Diff(before, ours(save(t, run, f, b, "nat"))); diff != "" {
						t.Errorf("rules after repair differ (-before +after):\n%s", diff)
					}

					// Remove leaves only the foreign rules.
					if err := in.Remove(rs); err != nil {
						t.Fatal(err)
					}
					for _, table := range []string{"nat", "filter"} {
						if left := ours(save(t, run, f, b, table)); len(left) != 0 {
							t.Errorf("Remove left in %s: %q", table, left)
						}
					}
					if nat := save(t, run, f, b, "nat"); !strings.Contains(nat, "-A PREROUTING -p udp -j FOREIGN") {
						t.Errorf("Remove touched a foreign rule:\n%s", nat)
					}
				})
			}
		}
	}
}

// TestIPVSFilterTraffic sends real connections through KUBE-IPVS-FILTER: a
// bound service address answers on its service port and rejects every other
// port, even one with a listener.
func TestIPVSFilterTraffic(t *testing.T) {
	ns, run := kernelSetup(t, xtables.IPv4, xtables.NFT)
	in := &Installer{Backend: xtables.NFT, Run: run}
	if _, err := in.Ensure(Build(Config{MasqueradeBit: 14}, xtables.IPv4)); err != nil {
		t.Fatal(err)
	}
	ns.MustRun(t, "ip", "addr", "add", "10.96.0.1/32", "dev", "lo")
	ns.MustRun(t, "ipset", "add", SetIPVSIPs, "10.96.0.1")
	ns.MustRun(t, "ipset", "add", SetClusterIP, "10.96.0.1,tcp:80")
	err := ns.Do(func() error {
		for _, port := range []string{"80", "81"} {
			ln, err := net.Listen("tcp", "10.96.0.1:"+port)
			if err != nil {
				return err
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Write([]byte("ok"))
					c.Close()
				}
			}()
		}
		if err := dialRead("10.96.0.1:80"); err != nil {
			return fmt.Errorf("service port: %w", err)
		}
		if err := dialRead("10.96.0.1:81"); !errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("non-service port on a service address: got %v, want connection refused", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func dialRead(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil {
		return err
	}
	if !bytes.Equal(buf, []byte("ok")) {
		return fmt.Errorf("read %q", buf)
	}
	return nil
}
