//go:build linux

package addrwatch_test

import (
	"context"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/host/addrwatch"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// ip runs ip(8) in the namespace.
func ip(t *testing.T, ns *nstest.NetNS, args ...string) {
	t.Helper()
	ns.MustRun(t, "ip", args...)
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// TestWatchKernel: in a fresh namespace with a veth pair (eth0 the
// node's, vip0 excluded as the IPVS sinks exclude kube-ipvs0), the
// watcher lists the addresses, delivers an address added to eth0 and its
// removal within 2 s each, and delivers nothing for an address added to
// the excluded link.
func TestWatchKernel(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		nstest.Missing(t, "no ip(8): %v", err)
	}
	ns := nstest.New(t)
	ip(t, ns, "link", "add", "eth0", "type", "veth", "peer", "name", "vip0")
	ip(t, ns, "addr", "add", "192.0.2.10/24", "dev", "eth0")
	// No IPv6 link-local address arriving in the middle.
	ip(t, ns, "link", "set", "eth0", "addrgenmode", "none")
	ip(t, ns, "link", "set", "vip0", "addrgenmode", "none")
	ip(t, ns, "link", "set", "eth0", "up")
	ip(t, ns, "link", "set", "vip0", "up")
	w, first, err := addrwatch.Watch(addrwatch.Config{NetNS: ns.FD(), Exclude: []string{"vip0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// lo's 127.0.0.1 and ::1 are the node's too: the caller chooses.
	if d := cmp.Diff(addrs("127.0.0.1", "192.0.2.10", "::1"), first, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("first list (-want +got):\n%s", d)
	}
	got := make(chan []netip.Addr, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, func(a []netip.Addr) { got <- a }, func(err error) { t.Error(err) }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	expect := func(what string, want []netip.Addr) {
		t.Helper()
		start := time.Now()
		select {
		case a := <-got:
			if d := cmp.Diff(want, a, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
				t.Errorf("%s: delivered (-want +got):\n%s", what, d)
			}
			t.Logf("%s: delivered after %s", what, time.Since(start).Round(time.Millisecond))
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: nothing delivered within 2 s", what)
		}
	}
	ip(t, ns, "addr", "add", "10.96.0.1/32", "dev", "vip0")
	ip(t, ns, "addr", "add", "198.51.100.7/24", "dev", "eth0")
	expect("added", addrs("127.0.0.1", "192.0.2.10", "198.51.100.7", "::1"))
	ip(t, ns, "addr", "del", "198.51.100.7/24", "dev", "eth0")
	expect("removed", addrs("127.0.0.1", "192.0.2.10", "::1"))
	ip(t, ns, "addr", "add", "10.96.0.2/32", "dev", "vip0")
	select {
	case a := <-got:
		t.Errorf("an address of the excluded link delivered %v", a)
	case <-time.After(3 * addrwatch.DefaultSettle):
	}
}
