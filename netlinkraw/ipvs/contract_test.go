package ipvs_test

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
)

// target is an IPVS implementation the contract runs against.
type target struct {
	// dial returns a connection to a fresh, empty IPVS (a new network
	// namespace); two calls give two independent ones.
	dial func(t *testing.T) *ipvs.Conn
	// schedulers lists the schedulers the implementation must accept.
	schedulers []string
}

var addrComparer = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func svcTCP(addr string, port uint16) ipvs.Service {
	return ipvs.Service{Protocol: ipvs.TCP, Address: mustAddr(addr), Port: port, Scheduler: "rr"}
}

// dumped returns s as a dump reports it: family filled in, the hashed
// flag set, the netmask at full length when left zero.
func dumped(s ipvs.Service) ipvs.Service {
	s.Family = s.Key().Family
	s.Flags |= ipvs.FlagHashed
	if s.Netmask == 0 {
		s.Netmask = 32
		if s.Family == ipvs.IPv6 {
			s.Netmask = 128
		}
	}
	return s
}

func dumpedDest(d ipvs.Destination) ipvs.Destination {
	d.Family = d.Key().Family
	return d
}

func sortServices(s []ipvs.Service) {
	slices.SortFunc(s, func(a, b ipvs.Service) int { return strings.Compare(a.Key().String(), b.Key().String()) })
}

func sortDests(d []ipvs.Destination) {
	slices.SortFunc(d, func(a, b ipvs.Destination) int { return strings.Compare(a.Key().String(), b.Key().String()) })
}

func services(t *testing.T, c *ipvs.Conn) []ipvs.Service {
	t.Helper()
	es, err := c.Services()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]ipvs.Service, 0, len(es))
	for _, e := range es {
		if e.Stats != (ipvs.Stats{}) {
			t.Errorf("fresh service %v has counters %+v", e.Service, e.Stats)
		}
		out = append(out, e.Service)
	}
	sortServices(out)
	return out
}

func dests(t *testing.T, c *ipvs.Conn, s ipvs.Service) []ipvs.Destination {
	t.Helper()
	es, err := c.Destinations(s.Key())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]ipvs.Destination, 0, len(es))
	for _, e := range es {
		if e.ActiveConns != 0 || e.InactiveConns != 0 || e.PersistentConns != 0 {
			t.Errorf("fresh destination %v has connections %+v", e.Destination, e)
		}
		out = append(out, e.Destination)
	}
	sortDests(out)
	return out
}

func apply(t *testing.T, c *ipvs.Conn, ops ...ipvs.Op) {
	t.Helper()
	if err := c.Apply(ops); err != nil {
		t.Fatal(err)
	}
}

func wantErrno(t *testing.T, err error, errno unix.Errno, msg string) {
	t.Helper()
	if !errors.Is(err, errno) {
		t.Fatalf("got error %v, want %v (%s)", err, errno, errno.Error())
	}
	if msg != "" && err.Error() != msg {
		t.Errorf("error message\n got: %s\nwant: %s", err, msg)
	}
}

// contract is the behaviour every IPVS implementation (the kernel, the
// fake) must show.
func contract(t *testing.T, tg target) {
	t.Run("Info", func(t *testing.T) {
		c := tg.dial(t)
		i, err := c.Info()
		if err != nil {
			t.Fatal(err)
		}
		if i.Version != 0x010201 || i.VersionString() != "1.2.1" {
			t.Errorf("version %#x (%s), want 0x010201", i.Version, i.VersionString())
		}
		if i.ConnTableSize == 0 || i.ConnTableSize&(i.ConnTableSize-1) != 0 {
			t.Errorf("connection table size %d is not a power of two", i.ConnTableSize)
		}
	})

	t.Run("Config", func(t *testing.T) {
		c := tg.dial(t)
		got, err := c.Config()
		if err != nil {
			t.Fatal(err)
		}
		if want := (ipvs.Config{TCP: 900, TCPFin: 120, UDP: 300}); got != want {
			t.Errorf("default timeouts %+v, want %+v", got, want)
		}
		if err := c.SetConfig(ipvs.Config{TCP: 1000, UDP: 30}); err != nil {
			t.Fatal(err)
		}
		got, err = c.Config()
		if err != nil {
			t.Fatal(err)
		}
		if want := (ipvs.Config{TCP: 1000, TCPFin: 120, UDP: 30}); got != want {
			t.Errorf("timeouts %+v after SetConfig, want %+v (zero leaves a timeout unchanged)", got, want)
		}
	})

	t.Run("Services", func(t *testing.T) {
		c := tg.dial(t)
		if got := services(t, c); len(got) != 0 {
			t.Fatalf("fresh namespace has services %v", got)
		}
		persist := svcTCP("10.96.0.20", 443)
		persist.Flags, persist.Timeout, persist.Netmask = ipvs.FlagPersistent, 10800, 24
		persist6 := ipvs.Service{Protocol: ipvs.TCP, Address: mustAddr("fd00::20"), Port: 443, Scheduler: "rr",
			Flags: ipvs.FlagPersistent, Timeout: 300, Netmask: 64}
		sh := ipvs.Service{Protocol: ipvs.UDP, Address: mustAddr("10.96.0.30"), Port: 53, Scheduler: "sh",
			Flags: ipvs.FlagSchedSHFallback | ipvs.FlagSchedSHPort | ipvs.FlagOnePacket}
		want := []ipvs.Service{
			svcTCP("10.96.0.10", 80),
			{Protocol: ipvs.UDP, Address: mustAddr("10.96.0.10"), Port: 53, Scheduler: "wrr"},
			{Protocol: ipvs.SCTP, Address: mustAddr("10.96.0.10"), Port: 9999, Scheduler: "lc"},
			{Family: ipvs.IPv6, Protocol: ipvs.TCP, Address: mustAddr("fd00::10"), Port: 80, Scheduler: "rr"},
			{Protocol: ipvs.UDP, Address: mustAddr("2001:db8::53"), Port: 53, Scheduler: "wlc"},
			{Family: ipvs.IPv4, FWMark: 7, Scheduler: "rr"},
			{Family: ipvs.IPv6, FWMark: 7, Scheduler: "wrr"},
			{Family: ipvs.IPv4, FWMark: 0xffffffff, Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 60, Netmask: 16},
			{Protocol: ipvs.TCP, Address: mustAddr("10.96.0.11"), Port: 80, Scheduler: "none"},
			{Protocol: ipvs.TCP, Address: mustAddr("10.96.0.12"), Port: 0, Scheduler: "rr"},
			persist, persist6, sh,
		}
		var ops []ipvs.Op
		for _, s := range want {
			ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateService, Service: s})
		}
		apply(t, c, ops...)
		exp := make([]ipvs.Service, len(want))
		for i, s := range want {
			exp[i] = dumped(s)
		}
		sortServices(exp)
		if diff := cmp.Diff(exp, services(t, c), addrComparer); diff != "" {
			t.Errorf("dump (-want +got):\n%s", diff)
		}
		for _, s := range want {
			got, err := c.Service(s.Key())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(dumped(s), got.Service, addrComparer); diff != "" {
				t.Errorf("Service(%v) (-want +got):\n%s", s, diff)
			}
		}
	})

	t.Run("Schedulers", func(t *testing.T) {
		c := tg.dial(t)
		var want []ipvs.Service
		for i, name := range tg.schedulers {
			s := svcTCP(fmt.Sprintf("10.96.1.%d", i+1), 80)
			s.Scheduler = name
			t.Logf("scheduler %s", name)
			if err := c.CreateService(s); err != nil {
				t.Errorf("scheduler %s: %v", name, err)
				continue
			}
			want = append(want, dumped(s))
		}
		sortServices(want)
		if diff := cmp.Diff(want, services(t, c), addrComparer); diff != "" {
			t.Errorf("dump (-want +got):\n%s", diff)
		}
		bad := svcTCP("10.96.2.1", 80)
		bad.Scheduler = "nosuchsched"
		wantErrno(t, c.CreateService(bad), unix.ENOENT,
			"ipvs: create service TCP/10.96.2.1:80: no such file or directory (unknown scheduler or persistence engine)")
	})

	t.Run("PersistenceEngine", func(t *testing.T) {
		c := tg.dial(t)
		s := ipvs.Service{Protocol: ipvs.UDP, Address: mustAddr("10.96.0.50"), Port: 5060, Scheduler: "rr",
			Flags: ipvs.FlagPersistent, Timeout: 360, PEName: "sip"}
		if err := c.CreateService(s); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]ipvs.Service{dumped(s)}, services(t, c), addrComparer); diff != "" {
			t.Errorf("dump (-want +got):\n%s", diff)
		}
		s.PEName = ""
		if err := c.UpdateService(s); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]ipvs.Service{dumped(s)}, services(t, c), addrComparer); diff != "" {
			t.Errorf("dump after removing the engine (-want +got):\n%s", diff)
		}
	})

	t.Run("Destinations", func(t *testing.T) {
		c := tg.dial(t)
		s4 := svcTCP("10.96.0.10", 53)
		s6 := ipvs.Service{Protocol: ipvs.UDP, Address: mustAddr("fd00::10"), Port: 53, Scheduler: "wrr"}
		fw := ipvs.Service{Family: ipvs.IPv4, FWMark: 9, Scheduler: "rr"}
		d4 := []ipvs.Destination{
			{Address: mustAddr("10.244.1.5"), Port: 8080, Weight: 1},
			{Address: mustAddr("10.244.1.6"), Port: 8080, Weight: 0},
			{Address: mustAddr("10.244.1.7"), Port: 8080, Weight: 65535},
			{Address: mustAddr("10.244.1.8"), Port: 8080, Weight: 65536},
			{Address: mustAddr("10.244.1.9"), Port: 8080, Weight: 1<<31 - 1, UpperThreshold: 100, LowerThreshold: 10},
			{Address: mustAddr("10.244.1.10"), Port: 8080, Forward: ipvs.DirectRoute, Weight: 5},
			{Address: mustAddr("10.244.1.11"), Port: 8080, Forward: ipvs.Tunnel, Weight: 5},
			{Address: mustAddr("10.244.1.12"), Port: 8080, Forward: ipvs.Tunnel, Weight: 5,
				TunnelType: ipvs.TunnelGUE, TunnelPort: 6080, TunnelFlags: ipvs.TunnelChecksum},
			{Address: mustAddr("10.244.1.13"), Port: 8080, Forward: ipvs.Tunnel, Weight: 5,
				TunnelType: ipvs.TunnelGRE, TunnelFlags: ipvs.TunnelRemoteChecksum},
			{Address: mustAddr("127.0.0.1"), Port: 8080, Forward: ipvs.LocalNode, Weight: 1},
			{Address: mustAddr("10.244.1.5"), Port: 9090, Weight: 2}, // same address, other port
			{Family: ipvs.IPv6, Address: mustAddr("fd00::1:5"), Port: 8080, Forward: ipvs.Tunnel, Weight: 3},
		}
		d6 := []ipvs.Destination{
			{Address: mustAddr("fd00::1:5"), Port: 5353, Weight: 100000},
			{Address: mustAddr("2001:db8::5"), Port: 5353, Weight: 7},
		}
		dfw := []ipvs.Destination{{Address: mustAddr("10.244.2.1"), Port: 0, Forward: ipvs.DirectRoute, Weight: 1}}
		ops := []ipvs.Op{
			{Kind: ipvs.OpCreateService, Service: s4},
			{Kind: ipvs.OpCreateService, Service: s6},
			{Kind: ipvs.OpCreateService, Service: fw},
		}
		for _, set := range []struct {
			s ipvs.Service
			d []ipvs.Destination
		}{{s4, d4}, {s6, d6}, {fw, dfw}} {
			for _, d := range set.d {
				ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateDestination, Service: set.s, Destination: d})
			}
		}
		apply(t, c, ops...)
		for _, set := range []struct {
			s ipvs.Service
			d []ipvs.Destination
		}{{s4, d4}, {s6, d6}, {fw, dfw}} {
			want := make([]ipvs.Destination, len(set.d))
			for i, d := range set.d {
				want[i] = dumpedDest(d)
			}
			sortDests(want)
			if diff := cmp.Diff(want, dests(t, c, set.s), addrComparer); diff != "" {
				t.Errorf("destinations of %v (-want +got):\n%s", set.s, diff)
			}
		}
		// A missing service has no destinations (the kernel answers an
		// empty dump, not an error).
		if got := dests(t, c, svcTCP("10.96.9.9", 1)); len(got) != 0 {
			t.Errorf("destinations of a missing service: %v", got)
		}
	})

	t.Run("Errors", func(t *testing.T) {
		c := tg.dial(t)
		s := svcTCP("10.96.0.10", 53)
		d := ipvs.Destination{Address: mustAddr("10.244.1.5"), Port: 8080, Weight: 1}
		missing := svcTCP("10.96.0.99", 53)
		if err := c.CreateService(s); err != nil {
			t.Fatal(err)
		}
		wantErrno(t, c.CreateService(s), unix.EEXIST, "ipvs: create service TCP/10.96.0.10:53: file exists")
		wantErrno(t, c.UpdateService(missing), unix.ESRCH, "ipvs: update service TCP/10.96.0.99:53: no such process (no such service)")
		wantErrno(t, c.RemoveService(missing), unix.ESRCH, "")
		_, err := c.Service(missing.Key())
		wantErrno(t, err, unix.ESRCH, "ipvs: get service TCP/10.96.0.99:53: no such process (no such service)")
		wantErrno(t, c.CreateDestination(missing, d), unix.ESRCH, "")
		if err := c.CreateDestination(s, d); err != nil {
			t.Fatal(err)
		}
		wantErrno(t, c.CreateDestination(s, d), unix.EEXIST,
			"ipvs: create destination 10.244.1.5:8080 on TCP/10.96.0.10:53: file exists")
		other := ipvs.Destination{Address: mustAddr("10.244.1.6"), Port: 8080}
		wantErrno(t, c.UpdateDestination(s, other), unix.ENOENT,
			"ipvs: update destination 10.244.1.6:8080 on TCP/10.96.0.10:53: no such file or directory (no such destination)")
		wantErrno(t, c.RemoveDestination(s, other), unix.ENOENT, "")
		heavy := ipvs.Destination{Address: mustAddr("10.244.1.7"), Port: 8080, Weight: 1 << 31}
		wantErrno(t, c.CreateDestination(s, heavy), unix.ERANGE, "")
		thresh := ipvs.Destination{Address: mustAddr("10.244.1.7"), Port: 8080, UpperThreshold: 1, LowerThreshold: 2}
		wantErrno(t, c.CreateDestination(s, thresh), unix.ERANGE, "")
		gue := ipvs.Destination{Address: mustAddr("10.244.1.7"), Port: 8080, Forward: ipvs.Tunnel, TunnelType: ipvs.TunnelGUE}
		wantErrno(t, c.CreateDestination(s, gue), unix.EINVAL, "")
		mcast := ipvs.Destination{Address: mustAddr("224.0.0.1"), Port: 8080}
		wantErrno(t, c.CreateDestination(s, mcast), unix.EINVAL, "")
		mixed := ipvs.Destination{Address: mustAddr("fd00::5"), Port: 8080} // masquerade across families
		wantErrno(t, c.CreateDestination(s, mixed), unix.EINVAL, "")
		// Refused before sending.
		wantErrno(t, c.CreateService(ipvs.Service{Address: mustAddr("fd00::1"), Scheduler: "rr", Netmask: 129}), unix.EINVAL, "")
		wantErrno(t, c.CreateService(ipvs.Service{FWMark: 1, Scheduler: "rr"}), unix.EINVAL, "")
		wantErrno(t, c.CreateService(ipvs.Service{Scheduler: "rr"}), unix.EINVAL, "")
		wantErrno(t, c.CreateService(ipvs.Service{Address: mustAddr("10.0.0.1"), Scheduler: "sixteen-letters!"}), unix.EINVAL, "")
		// Nothing of that changed the state.
		if diff := cmp.Diff([]ipvs.Service{dumped(s)}, services(t, c), addrComparer); diff != "" {
			t.Errorf("services (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]ipvs.Destination{dumpedDest(d)}, dests(t, c, s), addrComparer); diff != "" {
			t.Errorf("destinations (-want +got):\n%s", diff)
		}
	})

	t.Run("Update", func(t *testing.T) {
		c := tg.dial(t)
		s := svcTCP("10.96.0.10", 80)
		s.Flags = ipvs.FlagOnePacket
		d := ipvs.Destination{Address: mustAddr("10.244.1.5"), Port: 8080, Weight: 1}
		apply(t, c, ipvs.Op{Kind: ipvs.OpCreateService, Service: s}, ipvs.Op{Kind: ipvs.OpCreateDestination, Service: s, Destination: d})
		s.Scheduler, s.Flags, s.Timeout, s.Netmask = "wlc", ipvs.FlagPersistent, 600, 16
		d.Weight, d.Forward, d.UpperThreshold = 70000, ipvs.DirectRoute, 50
		apply(t, c, ipvs.Op{Kind: ipvs.OpUpdateService, Service: s}, ipvs.Op{Kind: ipvs.OpUpdateDestination, Service: s, Destination: d})
		if diff := cmp.Diff([]ipvs.Service{dumped(s)}, services(t, c), addrComparer); diff != "" {
			t.Errorf("services (-want +got; flags are replaced, not merged):\n%s", diff)
		}
		if diff := cmp.Diff([]ipvs.Destination{dumpedDest(d)}, dests(t, c, s), addrComparer); diff != "" {
			t.Errorf("destinations (-want +got):\n%s", diff)
		}
	})

	t.Run("Remove", func(t *testing.T) {
		c := tg.dial(t)
		a, b := svcTCP("10.96.0.10", 80), svcTCP("10.96.0.11", 80)
		d1 := ipvs.Destination{Address: mustAddr("10.244.1.5"), Port: 8080, Weight: 1}
		d2 := ipvs.Destination{Address: mustAddr("10.244.1.6"), Port: 8080, Weight: 1}
		apply(t, c,
			ipvs.Op{Kind: ipvs.OpCreateService, Service: a}, ipvs.Op{Kind: ipvs.OpCreateService, Service: b},
			ipvs.Op{Kind: ipvs.OpCreateDestination, Service: a, Destination: d1},
			ipvs.Op{Kind: ipvs.OpCreateDestination, Service: a, Destination: d2})
		apply(t, c, ipvs.Op{Kind: ipvs.OpRemoveDestination, Service: a, Destination: ipvs.Destination{Address: d1.Address, Port: d1.Port}},
			ipvs.Op{Kind: ipvs.OpRemoveService, Service: ipvs.Service{Protocol: ipvs.TCP, Address: b.Address, Port: b.Port}})
		if diff := cmp.Diff([]ipvs.Service{dumped(a)}, services(t, c), addrComparer); diff != "" {
			t.Errorf("services (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]ipvs.Destination{dumpedDest(d2)}, dests(t, c, a), addrComparer); diff != "" {
			t.Errorf("destinations (-want +got):\n%s", diff)
		}
	})

	t.Run("FlushAndZero", func(t *testing.T) {
		c := tg.dial(t)
		a := svcTCP("10.96.0.10", 80)
		apply(t, c, ipvs.Op{Kind: ipvs.OpCreateService, Service: a},
			ipvs.Op{Kind: ipvs.OpCreateService, Service: ipvs.Service{Family: ipvs.IPv6, FWMark: 3, Scheduler: "rr"}},
			ipvs.Op{Kind: ipvs.OpCreateDestination, Service: a, Destination: ipvs.Destination{Address: mustAddr("10.244.1.5"), Port: 1, Weight: 1}})
		if err := c.Zero(a.Key()); err != nil {
			t.Error(err)
		}
		if err := c.ZeroAll(); err != nil {
			t.Error(err)
		}
		wantErrno(t, c.Zero(svcTCP("10.96.0.99", 80).Key()), unix.ESRCH, "")
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := services(t, c); len(got) != 0 {
			t.Errorf("services after flush: %v", got)
		}
	})

	t.Run("BatchWithFailures", func(t *testing.T) {
		c := tg.dial(t)
		batchWithFailures(t, c)
	})

	t.Run("Dump10000", func(t *testing.T) {
		c := tg.dial(t)
		var ops []ipvs.Op
		var want []ipvs.Service
		for i := range 10000 {
			s := ipvs.Service{Protocol: ipvs.TCP, Address: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Scheduler: "rr"}
			if i%2 == 1 {
				s.Address = netip.AddrFrom16([16]byte{0: 0xfd, 14: byte(i >> 8), 15: byte(i)})
			}
			ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateService, Service: s})
			want = append(want, dumped(s))
		}
		apply(t, c, ops...)
		sortServices(want)
		before := c.Counters()
		got := services(t, c)
		after := c.Counters()
		if diff := cmp.Diff(want, got, addrComparer); diff != "" {
			t.Errorf("dump of 10,000 services (-want +got):\n%s", diff)
		}
		t.Logf("dump of %d services: %d recvmsg, %d bytes", len(got), after.Recvmsg-before.Recvmsg, after.BytesReceived-before.BytesReceived)
	})

	t.Run("Namespaces", func(t *testing.T) {
		a, b := tg.dial(t), tg.dial(t)
		s := svcTCP("10.96.0.10", 80)
		if err := a.CreateService(s); err != nil {
			t.Fatal(err)
		}
		if got := services(t, b); len(got) != 0 {
			t.Errorf("the other namespace sees %v", got)
		}
		if got := services(t, a); len(got) != 1 {
			t.Errorf("own namespace sees %v", got)
		}
		// The same service can exist in both.
		if err := b.CreateService(s); err != nil {
			t.Errorf("create in the other namespace: %v", err)
		}
	})
}

// batchWithFailures applies 10,000 operations, some failing in the middle,
// and checks that exactly those fail and the rest are applied.
func batchWithFailures(t *testing.T, c *ipvs.Conn) {
	const nsvc, ndest = 1000, 9
	var ops []ipvs.Op
	want := map[ipvs.ServiceKey][]ipvs.Destination{}
	var order []ipvs.Service
	fails := map[int]unix.Errno{}
	for i := range nsvc {
		s := ipvs.Service{Protocol: ipvs.TCP, Address: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Scheduler: "rr"}
		if i%250 == 7 {
			// A service created twice: the second create fails.
			fails[len(ops)+1] = unix.EEXIST
			ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateService, Service: s}, ipvs.Op{Kind: ipvs.OpCreateService, Service: s})
		} else {
			ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateService, Service: s})
		}
		order = append(order, s)
		want[s.Key()] = nil
		for j := range ndest - 1 {
			d := ipvs.Destination{Address: netip.AddrFrom4([4]byte{10, 244, byte(i >> 4), byte(i<<4 | j)}), Port: 8080, Weight: uint32(j + 1)}
			switch {
			case i%100 == 42 && j == 3:
				d.Weight = 1 << 31 // out of range
				fails[len(ops)] = unix.ERANGE
			case i%100 == 43 && j == 4:
				// A destination on a service that does not exist.
				ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateDestination, Service: svcTCP("10.97.0.1", 1), Destination: d})
				fails[len(ops)-1] = unix.ESRCH
				want[s.Key()] = append(want[s.Key()], dumpedDest(d))
			default:
				want[s.Key()] = append(want[s.Key()], dumpedDest(d))
			}
			ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateDestination, Service: s, Destination: d})
			if i%100 == 44 && j == 5 {
				// The same destination twice.
				fails[len(ops)] = unix.EEXIST
				ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateDestination, Service: s, Destination: d})
			}
		}
	}
	for len(ops) < 10000 {
		s := order[len(ops)%nsvc]
		d := ipvs.Destination{Address: netip.AddrFrom4([4]byte{10, 245, byte(len(ops) >> 8), byte(len(ops))}), Port: 80, Weight: 1}
		ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateDestination, Service: s, Destination: d})
		want[s.Key()] = append(want[s.Key()], dumpedDest(d))
	}
	before := c.Counters()
	err := c.Apply(ops)
	after := c.Counters()
	var be *ipvs.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("Apply returned %v, want a *ipvs.BatchError", err)
	}
	if be.Failed != len(fails) || len(be.Errors) != len(ops) {
		t.Errorf("%d of %d failed, want %d of %d", be.Failed, len(be.Errors), len(fails), len(ops))
	}
	for i, e := range be.Errors {
		errno, ok := fails[i]
		switch {
		case !ok && e != nil:
			t.Errorf("operation %d (%v) failed: %v", i, ops[i], e)
		case ok && !errors.Is(e, errno):
			t.Errorf("operation %d (%v): got %v, want %v", i, ops[i], e, errno)
		case ok:
			var oe *ipvs.Error
			if !errors.As(e, &oe) || oe.Index != i || !strings.Contains(e.Error(), ops[i].String()) {
				t.Errorf("operation %d: error %q does not name %q at index %d", i, e, ops[i].String(), i)
			}
		}
	}
	if !errors.Is(err, unix.EEXIST) || !errors.Is(err, unix.ESRCH) {
		t.Errorf("errors.Is does not see into the batch error %v", err)
	}
	sends, recvs := after.Sendmsg-before.Sendmsg, after.Recvmsg-before.Recvmsg
	t.Logf("%d operations, %d failed: %d sendmsg, %d recvmsg, %d messages sent", len(ops), be.Failed, sends, recvs, after.MessagesSent-before.MessagesSent)
	if sends > uint64(len(ops)/100) {
		t.Errorf("%d sendmsg for %d operations: not batched", sends, len(ops))
	}
	if recvs > sends+uint64(len(fails))+2 {
		t.Errorf("%d recvmsg for %d sendmsg and %d failures: ACKs requested per message?", recvs, sends, len(fails))
	}
	// Everything else was applied.
	var wantSvcs []ipvs.Service
	for _, s := range order {
		wantSvcs = append(wantSvcs, dumped(s))
	}
	sortServices(wantSvcs)
	if diff := cmp.Diff(wantSvcs, services(t, c), addrComparer); diff != "" {
		t.Fatalf("services (-want +got):\n%s", diff)
	}
	for _, s := range order {
		w := want[s.Key()]
		sortDests(w)
		if diff := cmp.Diff(w, dests(t, c, s), addrComparer); diff != "" {
			t.Fatalf("destinations of %v (-want +got):\n%s", s, diff)
		}
	}
}
