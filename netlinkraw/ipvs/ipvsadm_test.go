package ipvs_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// The cross-check with ipvsadm, a client nobody here wrote, both ways.

func sortedLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// TestIPVSADMSaveKernel: what this package creates, ipvsadm -Sn prints as
// expected.
func TestIPVSADMSaveKernel(t *testing.T) {
	nstest.LookPath(t, "ipvsadm")
	c, ns := dialKernelNS(t)
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	tcp := ipvs.Service{Protocol: ipvs.TCP, Address: a("10.96.0.10"), Port: 53, Scheduler: "rr"}
	persist := ipvs.Service{Protocol: ipvs.TCP, Address: a("10.96.0.20"), Port: 443, Scheduler: "wlc", Flags: ipvs.FlagPersistent, Timeout: 10800, Netmask: 24}
	udp6 := ipvs.Service{Protocol: ipvs.UDP, Address: a("fd00::10"), Port: 53, Scheduler: "wrr", Flags: ipvs.FlagPersistent, Timeout: 600, Netmask: 64}
	sh := ipvs.Service{Protocol: ipvs.UDP, Address: a("10.96.0.30"), Port: 53, Scheduler: "sh", Flags: ipvs.FlagOnePacket | ipvs.FlagSchedSHFallback | ipvs.FlagSchedSHPort}
	sctp := ipvs.Service{Protocol: ipvs.SCTP, Address: a("10.96.0.40"), Port: 36412, Scheduler: "lc"}
	fw4 := ipvs.Service{Family: ipvs.IPv4, FWMark: 7, Scheduler: "rr"}
	fw6 := ipvs.Service{Family: ipvs.IPv6, FWMark: 8, Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 300}
	d := func(addr string, port uint16, w uint32, f ipvs.ForwardMethod) ipvs.Destination {
		return ipvs.Destination{Address: a(addr), Port: port, Weight: w, Forward: f}
	}
	ops := []ipvs.Op{}
	for _, s := range []ipvs.Service{tcp, persist, udp6, sh, sctp, fw4, fw6} {
		ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateService, Service: s})
	}
	for _, sd := range []struct {
		s ipvs.Service
		d ipvs.Destination
	}{
		{tcp, d("10.244.1.5", 8080, 1, ipvs.Masquerade)},
		{tcp, d("10.244.1.6", 8080, 70000, ipvs.Masquerade)},
		{persist, d("10.244.2.5", 443, 0, ipvs.DirectRoute)},
		{udp6, d("fd00::1:5", 5353, 3, ipvs.Masquerade)},
		{sh, d("10.244.3.5", 53, 1<<31-1, ipvs.Masquerade)},
		{sctp, d("10.244.4.5", 36412, 2, ipvs.Tunnel)},
		{fw4, d("10.244.5.5", 0, 1, ipvs.DirectRoute)},
		{fw6, d("fd00::5:5", 0, 4, ipvs.DirectRoute)},
	} {
		ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateDestination, Service: sd.s, Destination: sd.d})
	}
	apply(t, c, ops...)
	got := sortedLines(ns.MustRun(t, "ipvsadm", "-Sn"))
	want := sortedLines(`
-A -t 10.96.0.10:53 -s rr
-a -t 10.96.0.10:53 -r 10.244.1.5:8080 -m -w 1
-a -t 10.96.0.10:53 -r 10.244.1.6:8080 -m -w 70000
-A -t 10.96.0.20:443 -s wlc -p 10800 -M 255.255.255.0
-a -t 10.96.0.20:443 -r 10.244.2.5:443 -g -w 0
-A -u [fd00::10]:53 -s wrr -p 600 -M 64
-a -u [fd00::10]:53 -r [fd00::1:5]:5353 -m -w 3
-A -u 10.96.0.30:53 -s sh -o -b sh-fallback,sh-port
-a -u 10.96.0.30:53 -r 10.244.3.5:53 -m -w 2147483647
-A --sctp-service 10.96.0.40:36412 -s lc
-a --sctp-service 10.96.0.40:36412 -r 10.244.4.5:36412 -i -w 2 --tun-type ipip
-A -f 7 -s rr
-a -f 7 -r 10.244.5.5:0 -g -w 1
-A -f 8 -6 -s rr -p 300
-a -f 8 -6 -r [fd00::5:5]:0 -g -w 4
`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ipvsadm -Sn (-want +got):\n%s", diff)
	}
}

// TestIPVSADMRestoreKernel: what ipvsadm -R loads, this package reads back
// exactly.
func TestIPVSADMRestoreKernel(t *testing.T) {
	nstest.LookPath(t, "ipvsadm")
	c, ns := dialKernelNS(t)
	rules := `-A -t 10.96.0.10:80 -s wrr
-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 70000 -x 100 -y 10
-a -t 10.96.0.10:80 -r 10.244.1.6:8080 -m -w 0
-A -u [fd00::10]:53 -s sh -b sh-port -p 600 -M 64 -o
-a -u [fd00::10]:53 -r [fd00::1:5]:5353 -m -w 3
-A -f 9 -s rr -p 300 -M 255.255.255.0
-a -f 9 -r 10.244.2.1:0 -g -w 1
-A --sctp-service 10.96.0.30:36412 -s lc
-a --sctp-service 10.96.0.30:36412 -r 10.244.3.1:36412 -i -w 2
`
	file := filepath.Join(t.TempDir(), "rules")
	if err := os.WriteFile(file, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	ns.MustRun(t, "sh", "-c", "ipvsadm -R < "+file)
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	type svcDests struct {
		s ipvs.Service
		d []ipvs.Destination
	}
	want := []svcDests{{
		ipvs.Service{Family: ipvs.IPv4, Protocol: ipvs.TCP, Address: a("10.96.0.10"), Port: 80, Scheduler: "wrr", Flags: ipvs.FlagHashed, Netmask: 32},
		[]ipvs.Destination{
			{Family: ipvs.IPv4, Address: a("10.244.1.5"), Port: 8080, Weight: 70000, UpperThreshold: 100, LowerThreshold: 10},
			{Family: ipvs.IPv4, Address: a("10.244.1.6"), Port: 8080, Weight: 0},
		},
	}, {
		ipvs.Service{Family: ipvs.IPv6, Protocol: ipvs.UDP, Address: a("fd00::10"), Port: 53, Scheduler: "sh",
			Flags: ipvs.FlagHashed | ipvs.FlagPersistent | ipvs.FlagSchedSHPort | ipvs.FlagOnePacket, Timeout: 600, Netmask: 64},
		[]ipvs.Destination{{Family: ipvs.IPv6, Address: a("fd00::1:5"), Port: 5353, Weight: 3}},
	}, {
		ipvs.Service{Family: ipvs.IPv4, FWMark: 9, Scheduler: "rr", Flags: ipvs.FlagHashed | ipvs.FlagPersistent, Timeout: 300, Netmask: 24},
		[]ipvs.Destination{{Family: ipvs.IPv4, Address: a("10.244.2.1"), Port: 0, Forward: ipvs.DirectRoute, Weight: 1}},
	}, {
		ipvs.Service{Family: ipvs.IPv4, Protocol: ipvs.SCTP, Address: a("10.96.0.30"), Port: 36412, Scheduler: "lc", Flags: ipvs.FlagHashed, Netmask: 32},
		[]ipvs.Destination{{Family: ipvs.IPv4, Address: a("10.244.3.1"), Port: 36412, Forward: ipvs.Tunnel, Weight: 2}},
	}}
	var wantSvcs []ipvs.Service
	for _, w := range want {
		wantSvcs = append(wantSvcs, w.s)
	}
	sortServices(wantSvcs)
	if diff := cmp.Diff(wantSvcs, services(t, c), addrComparer); diff != "" {
		t.Errorf("services loaded by ipvsadm -R (-want +got):\n%s", diff)
	}
	for _, w := range want {
		sortDests(w.d)
		if diff := cmp.Diff(w.d, dests(t, c, w.s), addrComparer); diff != "" {
			t.Errorf("destinations of %v (-want +got):\n%s", w.s, diff)
		}
	}
}
