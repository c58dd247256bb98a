package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// bound returns the VIPs bound as addresses on kube-ipvs0, and those with
// a local route of the sinks' protocol (156, through lo), as iproute2
// lists them.
func (c *cluster) bound() (addrs, routes []string) {
	c.t.Helper()
	for _, l := range strings.Split(c.node.MustRun(c.t, "ip", "-o", "-4", "addr", "show", "dev", "kube-ipvs0"), "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[2] == "inet" {
			addrs = append(addrs, strings.TrimSuffix(f[3], "/32"))
		}
	}
	for _, l := range strings.Split(c.node.MustRun(c.t, "ip", "-4", "route", "show", "table", "local", "proto", "156", "dev", "lo"), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "local" {
			routes = append(routes, f[1])
		}
	}
	return addrs, routes
}

// expectBound waits until want is bound the way binding names (addresses
// or routes) and nothing the other way. Other VIPs may be bound too (the
// real API's kubernetes service).
func (c *cluster) expectBound(binding string, want ...string) {
	c.t.Helper()
	c.eventually(20*time.Second, func() error {
		addrs, routes := c.bound()
		got, other := addrs, routes
		if binding == "routes" {
			got, other = routes, addrs
		}
		missing := slices.DeleteFunc(slices.Clone(want), func(a string) bool { return slices.Contains(got, a) })
		if len(missing) != 0 || len(other) != 0 {
			return fmt.Errorf("kube-ipvs0 addresses %v, local routes %v; want %v as %s, none the other way", addrs, routes, want, binding)
		}
		return nil
	})
}

// arpAnswered reports whether the node answers an ARP request for ip from
// the external client on its link (busybox arping).
func arpAnswered(t *testing.T, from *nstest.NetNS, ip string) bool {
	t.Helper()
	out, _ := from.Run("arping", "-c", "1", "-w", "1", "-I", "eth0", ip)
	switch {
	case strings.Contains(out, "Received 1 response"):
		return true
	case strings.Contains(out, "Received 0 response"):
		return false
	}
	t.Fatalf("arping %s: unexpected output:\n%s", ip, out)
	return false
}

// TestVIPBindingSwitch: --ipvs-vip-binding=routes serves cluster and
// external IPs as the address binding does (the same traffic, the same
// ARP answers with and without --ipvs-strict-arp); a sink restarted from
// one binding to the other makes every VIP local the new way before
// removing the old, so that no request fails across the switch; a restart
// with nothing changed writes nothing; a route deleted by hand comes back.
func TestVIPBindingSwitch(t *testing.T) {
	requireIPVS(t)
	c := newCluster(t)
	a := c.addPod("pod-a", 8080)
	client := c.addPod("client")
	c.write(nodeManifest, svc{name: "web", typ: "ClusterIP", clusterIP: "10.96.0.23", ports: web, externalIPs: []string{"203.0.113.11"}}.yaml(),
		slice("web", web, ep{ip: a.ip.String(), ready: true}))
	vips := []string{"10.96.0.23", "203.0.113.11"}
	serve := func() {
		t.Helper()
		c.expectFrom(client.ns, "tcp", ap("10.96.0.23:80"), "pod-a")
		c.expectFrom(c.ext, "tcp", ap("203.0.113.11:80"), "pod-a")
	}
	c.startSink("--ipvs-vip-binding=addresses")
	c.synced()
	serve()
	c.expectBound("addresses", vips...)
	answered := arpAnswered(t, c.ext, "10.96.0.23")
	if !answered {
		t.Error("ARP for a VIP bound as an address not answered (arp_ignore 0): the check below would prove nothing")
	}

	// Requests all through the switch.
	stop := c.keepRequesting(target{client.ns, ap("10.96.0.23:80")}, target{c.ext, ap("203.0.113.11:80")})
	c.stopSink()
	c.startSink("--ipvs-vip-binding=routes")
	c.synced()
	c.expectBound("routes", vips...)
	time.Sleep(300 * time.Millisecond)
	if ok, failed := stop(); failed != 0 || ok == 0 {
		t.Errorf("switching to routes, %d requests failed and %d succeeded; want no failure", failed, ok)
	}
	serve()
	if got := arpAnswered(t, c.ext, "10.96.0.23"); got != answered {
		t.Errorf("ARP for a VIP answered %v with routes, %v with addresses", got, answered)
	}

	// Restarted unchanged: nothing written.
	c.stopSink()
	c.startSink("--ipvs-vip-binding=routes")
	c.expectNoWrites()
	c.expectBound("routes", vips...)

	// Drift: the route deleted by hand is back within a sync period.
	c.node.MustRun(t, "ip", "route", "del", "local", "10.96.0.23", "dev", "lo", "table", "local", "proto", "156")
	c.expectBound("routes", vips...)
	serve()

	// With strict ARP, neither binding answers ARP for a VIP.
	c.stopSink()
	c.startSink("--ipvs-vip-binding=routes", "--ipvs-strict-arp")
	c.synced()
	serve()
	strict := arpAnswered(t, c.ext, "10.96.0.23")
	c.stopSink()
	c.startSink("--ipvs-vip-binding=addresses", "--ipvs-strict-arp")
	c.synced()
	c.expectBound("addresses", vips...)
	serve()
	if got := arpAnswered(t, c.ext, "10.96.0.23"); got || strict {
		t.Errorf("with strict ARP, ARP for a VIP answered %v with addresses, %v with routes; want neither", got, strict)
	}
}

// synced waits for the sink's first sync: until then the kernel shows
// what the previous sink left.
func (c *cluster) synced() {
	c.t.Helper()
	c.eventually(30*time.Second, func() error {
		if last, err := c.metric("kubeproxy_sync_proxy_rules_last_timestamp_seconds"); err != nil || last == 0 {
			return fmt.Errorf("no sync yet")
		}
		return nil
	})
}

// expectNoWrites waits for the sink's first sync and checks it wrote
// nothing to the kernel.
func (c *cluster) expectNoWrites() {
	c.t.Helper()
	c.synced()
	if total, err := c.metric("proxysinks_kernel_operations_total"); err != nil || total != 0 {
		c.t.Errorf("restarted sink: kernel operations total %v (%v), want 0", total, err)
	}
}
