package link_test

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/link"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// TestLocalRoutesKernel adds, lists and deletes 1,000 IPv4 local routes
// through a veth link (standing in for the dummy, which the
// build machines' kernel lacks; TestLocalRoutesDummyKernel runs on
// kube-ipvs0 in the VM), and checks them with iproute2.
func TestLocalRoutesKernel(t *testing.T) {
	c, ns := dial(t)
	veth(t, ns, "vips0")
	exerciseRoutes(t, c, ns, "vips0", 1000)
}

// TestLocalRoutesDummyKernel is TestLocalRoutesKernel on kube-ipvs0 (down,
// as the sinks leave it). Runs in the VM; skipped where dummy links are
// missing.
func TestLocalRoutesDummyKernel(t *testing.T) {
	c, ns := dial(t)
	dummy(t, c)
	exerciseRoutes(t, c, ns, link.DefaultDummy, 1000)
}

func exerciseRoutes(t *testing.T, c *link.Conn, ns *nstest.NetNS, name string, n int) {
	t.Helper()
	ops := vipOps{"local route", c.AddLocalRoutes, c.DelLocalRoutes, c.LocalRoutes}
	// IPv4 only: see TestLocalRouteIPv6NeedsLinkUp.
	exercise(t, ops, name, vips(n)[:n], func() {
		// iproute2 sees them as local routes of our protocol, and no
		// address.
		out := ns.MustRun(t, "ip", "-4", "route", "show", "table", "local", "proto", "156", "dev", name)
		if lines := strings.Count(out, "\n"); lines != n || !strings.Contains(out, "local 10.96.0.1 scope host src 10.96.0.1") {
			t.Errorf("ip route show table local proto 156: %d lines, want %d, with 10.96.0.1's:\n%.300s", lines, n, out)
		}
		if addrs, err := c.Addresses(name); err != nil || len(withoutLinkLocal(addrs)) != 0 {
			t.Errorf("Addresses(%s) = %v, %v; want none", name, addrs, err)
		}
	})
}

// TestLocalRouteTraffic: an address with a local route is the node's: a
// socket binds it and a connection to it is answered, as for a bound
// address; without the route, the bind fails.
func TestLocalRouteTraffic(t *testing.T) {
	c, ns := dial(t)
	veth(t, ns, "vips0")
	vip := netip.MustParseAddr("10.96.0.10")
	listen := func() (net.Listener, error) {
		var l net.Listener
		err := ns.Do(func() (err error) { l, err = net.Listen("tcp4", vip.String()+":8080"); return err })
		return l, err
	}
	if _, err := listen(); !errors.Is(err, unix.EADDRNOTAVAIL) {
		t.Fatalf("listen on %v before its route = %v, want EADDRNOTAVAIL", vip, err)
	}
	if err := c.AddLocalRoutes("vips0", []netip.Addr{vip}); err != nil {
		t.Fatal(err)
	}
	l, err := listen()
	if err != nil {
		t.Fatalf("listen on %v with its local route: %v", vip, err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err == nil {
			conn.Write([]byte("hello from " + conn.LocalAddr().String()))
			conn.Close()
		}
	}()
	var answer []byte
	err = ns.Do(func() error {
		conn, err := net.Dial("tcp4", vip.String()+":8080")
		if err != nil {
			return err
		}
		defer conn.Close()
		// The node's connections to the address come from it (the route's
		// preferred source), as they do from a bound address.
		if src := conn.LocalAddr().(*net.TCPAddr).IP.String(); src != vip.String() {
			t.Errorf("connection to %v from %s, want from %v", vip, src, vip)
		}
		answer = make([]byte, 64)
		n, err := conn.Read(answer)
		answer = answer[:n]
		return err
	})
	if err != nil || string(answer) != "hello from 10.96.0.10:8080" {
		t.Fatalf("connect to %v: %q, %v", vip, answer, err)
	}
}

// TestLocalRoutesOnlyOurs: the kernel's local route of an address and a
// local route of another protocol on the same link are neither listed nor
// deleted.
func TestLocalRoutesOnlyOurs(t *testing.T) {
	c, ns := dial(t)
	veth(t, ns, "vips0")
	ns.MustRun(t, "ip", "addr", "add", "10.96.0.1/32", "dev", "vips0")
	ns.MustRun(t, "ip", "route", "add", "local", "10.96.0.2", "dev", "vips0", "table", "local", "proto", "static")
	ours := []netip.Addr{netip.MustParseAddr("10.96.0.3")}
	if err := c.AddLocalRoutes("vips0", ours); err != nil {
		t.Fatal(err)
	}
	// Ours too, but through another link.
	if err := c.AddLocalRoutes("lo", []netip.Addr{netip.MustParseAddr("10.96.0.4")}); err != nil {
		t.Fatal(err)
	}
	got, err := c.LocalRoutes("vips0")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(ours, got, cmpAddr); d != "" {
		t.Errorf("LocalRoutes -want +got:\n%s", d)
	}
	if err := c.DelLocalRoutes("vips0", []netip.Addr{netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("10.96.0.2"), ours[0]}); err != nil {
		t.Fatal(err)
	}
	out := ns.MustRun(t, "ip", "route", "show", "table", "local", "dev", "vips0")
	if !strings.Contains(out, "local 10.96.0.1 proto kernel") || !strings.Contains(out, "local 10.96.0.2 proto static") || strings.Contains(out, "10.96.0.3") {
		t.Errorf("after DelLocalRoutes, table local on vips0:\n%s\nwant 10.96.0.1 (kernel) and 10.96.0.2 (static) only", out)
	}
}

func TestLocalRouteErrors(t *testing.T) {
	c, _ := dial(t)
	if err := c.AddLocalRoutes("nope0", vips(1)); !errors.Is(err, unix.ENODEV) {
		t.Errorf("AddLocalRoutes on a missing link = %v, want ENODEV", err)
	}
	if _, err := c.LocalRoutes("nope0"); !errors.Is(err, unix.ENODEV) {
		t.Errorf("LocalRoutes on a missing link = %v, want ENODEV", err)
	}
	err := c.AddLocalRoutes("lo", []netip.Addr{{}})
	if err == nil || err.Error() != "link: add local route invalid IP on lo: not a plain IP address" {
		t.Errorf("AddLocalRoutes of a zero address = %v", err)
	}
}

// TestLocalRouteIPv6NeedsLinkUp: the kernel refuses an IPv6 local route
// through a link that is down (ENETDOWN), as kube-ipvs0 is: the sinks keep
// binding IPv6 virtual IPs as addresses. The refusal names the address,
// and the IPv4 routes of the same batch are added.
func TestLocalRouteIPv6NeedsLinkUp(t *testing.T) {
	c, ns := dial(t)
	veth(t, ns, "vips0")
	v4, v6 := netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("fd00:96::1")
	err := c.AddLocalRoutes("vips0", []netip.Addr{v4, v6})
	var le *link.Error
	if !errors.As(err, &le) || le.Addr != v6 || !errors.Is(err, unix.ENETDOWN) {
		t.Fatalf("AddLocalRoutes of %v on a down link = %v, want ENETDOWN naming it", v6, err)
	}
	got, err := c.LocalRoutes("vips0")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]netip.Addr{v4}, got, cmpAddr); d != "" {
		t.Errorf("LocalRoutes -want +got:\n%s", d)
	}
}

// TestLocalRouteBesideAddress: the local route of a bound address does not
// keep ours out (same key, another route), and ours stays when the address
// goes: its link losing its last IPv4 address makes the kernel flush every
// route through that link, which is why the sinks' routes go through lo.
func TestLocalRouteBesideAddress(t *testing.T) {
	c, ns := dial(t)
	veth(t, ns, "vips0")
	ns.MustRun(t, "ip", "addr", "add", "10.96.0.1/32", "dev", "vips0")
	ns.MustRun(t, "ip", "route", "add", "local", "10.96.0.2", "dev", "vips0", "table", "local", "proto", "static")
	if err := c.AddLocalRoutes("lo", []netip.Addr{netip.MustParseAddr("10.96.0.1")}); err != nil {
		t.Fatal(err)
	}
	ns.MustRun(t, "ip", "addr", "del", "10.96.0.1/32", "dev", "vips0")
	out := ns.MustRun(t, "ip", "route", "show", "table", "local")
	if !strings.Contains(out, "local 10.96.0.1 dev lo proto 156") {
		t.Errorf("after the address was removed, table local:\n%s\nwant our route of 10.96.0.1", out)
	}
	if strings.Contains(out, "10.96.0.2") {
		t.Errorf("after vips0 lost its last address, table local still has its static route:\n%s", out)
	}
}
