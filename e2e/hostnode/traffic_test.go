package hostnode

import (
	"net"
	"time"

	"github.com/proxysinks/proxysinks/e2e/netexec"
	"net/netip"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/conntrack"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/iptables"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

func ap(a string, port int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr(a), uint16(port))
}

// names returns the set of pods that answered n requests.
func names(t *testing.T, ns *nstest.NetNS, proto string, addr netip.AddrPort, n int) map[string]int {
	t.Helper()
	out := map[string]int{}
	for range n {
		out[mustGet(t, ns, proto, addr).Name]++
	}
	return out
}

func newProxier(t *testing.T, n *network) *iptables.Proxier {
	t.Helper()
	ct, err := conntrack.Dial(&conntrack.Config{NetNS: n.node.FD()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ct.Close() })
	p, err := iptables.NewProxier(iptables.Config{
		IPv4: true, IPv6: true, MasqueradeBit: 14,
		ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/32")},
		NodeIPs:      []netip.Addr{nodeA, nodeA6},
		Run:          runner(n.node),
		// Resyncs skip reading the tables while the node namespace's
		// nf_tables generation stands still (drift-repaired moves it).
		Generation: func() (uint32, error) { return xtables.NFTGeneration(n.node.FD()) },
		Conntrack:  ct,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func save(t *testing.T, n *network, b xtables.Backend, table string) string {
	t.Helper()
	out, err := runner(n.node)(b.Command(xtables.IPv4, "save"), []string{"-t", table}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestTraffic drives the Proxier on node A through the node e2e cases
// with real traffic.
func TestTraffic(t *testing.T) {
	n := newNetwork(t)
	pod0, pod1, pod2 := n.pods[0], n.pods[1], n.pods[2]
	sctp := nstest.InVM() || n.pods[0].ns.Do(func() error { return probeSCTP() }) == nil

	// A foreign chain and rule that must survive everything.
	must(t, n.node, "iptables", "-t", "nat", "-N", "FOREIGN")
	must(t, n.node, "iptables", "-t", "nat", "-A", "FOREIGN", "-s", "203.0.113.99", "-j", "RETURN")
	must(t, n.node, "iptables", "-t", "nat", "-I", "PREROUTING", "-j", "FOREIGN")

	basicPorts := []client.Port{tcp("tcp", 80, 8080), proto(client.UDP, "udp", 80, 8080)}
	if sctp {
		basicPorts = append(basicPorts, proto(client.SCTP, "sctp", 80, 8080))
	}
	services := []svc{
		{name: "basic", ips: []string{"10.96.0.10", "fd00:96::10"}, ports: basicPorts, pods: []*pod{pod0, pod1, pod2}},
		{name: "multiport", ips: []string{"10.96.0.11"}, ports: []client.Port{tcp("a", 80, 8080), tcp("b", 81, 8081)}, pods: []*pod{pod1}},
		{name: "nodeport", typ: client.NodePort, ips: []string{"10.96.0.12"}, ports: []client.Port{nodePort(tcp("", 80, 8080), 30080)}, pods: []*pod{pod2}},
		{name: "etp-local", typ: client.NodePort, eLocal: true, ips: []string{"10.96.0.13"}, ports: []client.Port{nodePort(tcp("", 80, 8080), 30081)}, pods: []*pod{pod0, pod2}},
		{name: "affinity", affinity: true, ips: []string{"10.96.0.14"}, ports: []client.Port{tcp("", 80, 8080)}, pods: []*pod{pod0, pod1, pod2}},
		{name: "external", ips: []string{"10.96.0.15"}, ext: []string{"198.51.100.7"}, ports: []client.Port{tcp("", 80, 8080)}, pods: []*pod{pod1}},
		{name: "lb-allowed", typ: client.LoadBalancer, ips: []string{"10.96.0.16"}, lb: []string{"192.0.2.10"}, ranges: []string{"192.168.50.10/32"},
			ports: []client.Port{nodePort(tcp("", 80, 8080), 30082)}, pods: []*pod{pod1}},
		{name: "lb-denied", typ: client.LoadBalancer, ips: []string{"10.96.0.17"}, lb: []string{"192.0.2.11"}, ranges: []string{"10.0.0.0/8"},
			ports: []client.Port{nodePort(tcp("", 80, 8080), 30083)}, pods: []*pod{pod1}},
		{name: "itp-local", iLocal: true, ips: []string{"10.96.0.18"}, ports: []client.Port{tcp("", 80, 8080)}, pods: []*pod{pod0, pod2}},
		{name: "hairpin", ips: []string{"10.96.0.19"}, ports: []client.Port{tcp("", 80, 8080)}, pods: []*pod{pod0}},
		{name: "empty", ips: []string{"10.96.0.20"}, ports: []client.Port{tcp("", 80, 8080)}},
	}
	var st state
	p := newProxier(t, n)
	if _, err := p.Snapshot(st.snapshot(services...)); err != nil {
		t.Fatal(err)
	}
	backend := p.Backends()[0]

	t.Run("basic", func(t *testing.T) {
		for _, proto := range []string{"tcp", "udp"} {
			got := names(t, pod1.ns, proto, ap("10.96.0.10", 80), 30)
			if len(got) != 3 {
				t.Errorf("%s: answers %v, want all three pods", proto, got)
			}
		}
		// From the node itself (OUTPUT) and over IPv6.
		if r := mustGet(t, n.node, "tcp", ap("10.96.0.10", 80)); !strings.HasPrefix(r.Name, "pod") {
			t.Errorf("from the node: %v", r)
		}
		got := names(t, pod1.ns, "tcp", ap("fd00:96::10", 80), 20)
		if got["pod2"] > 0 || len(got) != 2 {
			t.Errorf("IPv6: answers %v, want pod0 and pod1 (the pods with an IPv6 address)", got)
		}
	})
	t.Run("sctp", func(t *testing.T) {
		if !sctp {
			t.Skip("missing: SCTP in this kernel")
		}
		if r := mustGet(t, pod1.ns, "sctp", ap("10.96.0.10", 80)); !strings.HasPrefix(r.Name, "pod") {
			t.Errorf("sctp: %v", r)
		}
	})
	t.Run("multiport", func(t *testing.T) {
		for _, port := range []int{80, 81} {
			if r := mustGet(t, pod0.ns, "tcp", ap("10.96.0.11", port)); r.Name != "pod1" {
				t.Errorf("port %d: %v", port, r)
			}
		}
	})
	t.Run("nodeport-from-outside", func(t *testing.T) {
		r := mustGet(t, n.client, "tcp", netip.AddrPortFrom(nodeA, 30080))
		if r.Name != "pod2" || r.Client.Addr() != nodeAtoB {
			t.Errorf("got %s from %s, want pod2 seeing the node's address %s (masqueraded)", r.Name, r.Client, nodeAtoB)
		}
	})
	t.Run("etp-local-keeps-client-address", func(t *testing.T) {
		for range 10 {
			r := mustGet(t, n.client, "tcp", netip.AddrPortFrom(nodeA, 30081))
			if r.Name != "pod0" || r.Client.Addr() != clientAddr {
				t.Fatalf("got %s from %s, want the local pod0 seeing the client %s", r.Name, r.Client, clientAddr)
			}
		}
	})
	t.Run("session-affinity", func(t *testing.T) {
		if got := names(t, pod1.ns, "tcp", ap("10.96.0.14", 80), 15); len(got) != 1 {
			t.Errorf("answers %v, want one pod", got)
		}
	})
	t.Run("external-ip", func(t *testing.T) {
		if r := mustGet(t, n.client, "tcp", ap("198.51.100.7", 80)); r.Name != "pod1" {
			t.Errorf("got %v", r)
		}
	})
	t.Run("lb-source-ranges", func(t *testing.T) {
		if r := mustGet(t, n.client, "tcp", ap("192.0.2.10", 80)); r.Name != "pod1" {
			t.Errorf("allowed range: got %v", r)
		}
		mustFail(t, n.client, "tcp", ap("192.0.2.11", 80))
	})
	t.Run("itp-local", func(t *testing.T) {
		if got := names(t, pod1.ns, "tcp", ap("10.96.0.18", 80), 10); len(got) != 1 || got["pod0"] != 10 {
			t.Errorf("answers %v, want the local pod0 only", got)
		}
	})
	t.Run("hairpin", func(t *testing.T) {
		r := mustGet(t, pod0.ns, "tcp", ap("10.96.0.19", 80))
		if r.Name != "pod0" || r.Client.Addr() == pod0.ip {
			t.Errorf("got %s from %s, want pod0 seeing a masqueraded source", r.Name, r.Client)
		}
	})
	t.Run("no-endpoints-rejected", func(t *testing.T) {
		_, err := get(pod0.ns, "tcp", ap("10.96.0.20", 80), 2e9)
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("got %v, want connection refused (REJECT)", err)
		}
	})
	t.Run("endpoint-removal", func(t *testing.T) {
		services[0].pods = []*pod{pod0, pod2}
		stats, err := p.Snapshot(st.snapshot(services...))
		if err != nil {
			t.Fatal(err)
		}
		if stats.Full {
			t.Errorf("endpoint removal made a full sync: %+v", stats)
		}
		if got := names(t, pod0.ns, "tcp", ap("10.96.0.10", 80), 20); got["pod1"] > 0 {
			t.Errorf("answers %v after pod1 was removed", got)
		}
	})
	t.Run("udp-stale-conntrack-flushed", func(t *testing.T) {
		// One client address and port: without the flush, conntrack keeps
		// sending it to the removed (still running) pod.
		src := netip.AddrPortFrom(pod1.ip, 40000)
		first := udpFrom(t, pod1.ns, src, ap("10.96.0.10", 80))
		var keep []*pod
		for _, q := range []*pod{pod0, pod1, pod2} {
			if q.name != first {
				keep = append(keep, q)
			}
		}
		services[0].pods = keep
		stats, err := p.Snapshot(st.snapshot(services...))
		if err != nil {
			t.Fatal(err)
		}
		if stats.ConntrackFlushed == 0 {
			t.Errorf("removing %s flushed no conntrack entry: %+v", first, stats)
		}
		if got := udpFrom(t, pod1.ns, src, ap("10.96.0.10", 80)); got == first {
			t.Errorf("the same UDP client still reaches the removed endpoint %s", first)
		}
	})
	t.Run("restart-writes-nothing", func(t *testing.T) {
		q := newProxier(t, n)
		stats, err := q.Snapshot(st.prev)
		if err != nil {
			t.Fatal(err)
		}
		if !stats.Full || stats.Restores != 0 {
			t.Errorf("a restarted proxier with an unchanged cluster wrote: %+v", stats)
		}
	})
	t.Run("drift-repaired", func(t *testing.T) {
		must(t, n.node, "iptables", "-t", "nat", "-F", iptables.ServiceChain("default/multiport:a", "tcp"))
		must(t, n.node, "iptables", "-t", "nat", "-D", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")
		mustFail(t, n.client, "tcp", ap("10.96.0.15", 80))
		stats, err := p.Resync()
		if err != nil {
			t.Fatal(err)
		}
		if stats.Restores == 0 {
			t.Fatal("resync did not repair the drift")
		}
		if r := mustGet(t, pod0.ns, "tcp", ap("10.96.0.11", 80)); r.Name != "pod1" {
			t.Errorf("after repair: %v", r)
		}
		if r := mustGet(t, n.client, "tcp", ap("198.51.100.7", 80)); r.Name != "pod1" {
			t.Errorf("after repair, from outside: %v", r)
		}
	})
	t.Run("foreign-rules-untouched", func(t *testing.T) {
		nat := save(t, n, backend, "nat")
		for _, want := range []string{":FOREIGN - ", "-A FOREIGN -s 203.0.113.99/32 -j RETURN", "-A PREROUTING -j FOREIGN"} {
			if !strings.Contains(nat, want) {
				t.Errorf("foreign %q gone:\n%s", want, nat)
			}
		}
	})
	t.Run("cleanup", func(t *testing.T) {
		if err := iptables.CleanupLeftovers(runner(n.node)); err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"nat", "filter", "mangle"} {
			out := save(t, n, backend, table)
			if strings.Contains(out, "KUBE-") {
				t.Errorf("%s still has KUBE- rules or chains:\n%s", table, out)
			}
			if table == "nat" && !strings.Contains(out, "-A PREROUTING -j FOREIGN") {
				t.Errorf("cleanup removed a foreign rule:\n%s", out)
			}
		}
	})
}

// udpFrom sends one UDP request from a fixed source address and port and
// returns the name of the pod that answered.
func udpFrom(t *testing.T, ns *nstest.NetNS, src, dst netip.AddrPort) string {
	t.Helper()
	var name string
	err := ns.Do(func() error {
		c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(src), net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("hello\n")); err != nil {
			return err
		}
		buf := make([]byte, 256)
		k, err := c.Read(buf)
		if err != nil {
			return err
		}
		r, err := netexec.ParseReply(string(buf[:k]))
		name = r.Name
		return err
	})
	if err != nil {
		t.Fatalf("udp %s -> %s: %v", src, dst, err)
	}
	return name
}
