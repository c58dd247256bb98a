package node

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/e2e/netexec"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// Endpoint removal: new connections stop going there, an open TCP
// connection survives (graceful termination), and with an IPVS sink the
// destination is removed once the connection ends.
func caseEndpointRemovalGraceful(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 8080)
	b := c.addPod("pod-b", 8080)
	client := c.addPod("client")
	c.write(nodeManifest, svc{name: "web", typ: "ClusterIP", clusterIP: "10.96.0.19", ports: web}.yaml(),
		slice("web", web, ep{ip: a.ip.String(), ready: true}))
	c.startSink()
	c.expectFrom(client.ns, "tcp", ap("10.96.0.19:80"), "pod-a")

	var conn net.Conn
	if err := client.ns.Do(func() error {
		var err error
		conn, err = net.DialTimeout("tcp", "10.96.0.19:80", 2*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	ask := func() (string, error) {
		conn.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := io.WriteString(conn, "hello\n"); err != nil {
			return "", err
		}
		line, err := r.ReadString('\n')
		return strings.Fields(line + " ")[0], err
	}
	if name, err := ask(); err != nil || name != "pod-a" {
		t.Fatalf("open connection: %q, %v", name, err)
	}

	c.write(nodeManifest, svc{name: "web", typ: "ClusterIP", clusterIP: "10.96.0.19", ports: web}.yaml(),
		slice("web", web, ep{ip: b.ip.String(), ready: true}))
	c.expectFrom(client.ns, "tcp", ap("10.96.0.19:80"), "pod-b")
	for i := 0; i < 5; i++ {
		if name := c.expectFrom(client.ns, "tcp", ap("10.96.0.19:80"), "pod-a", "pod-b").Name; name != "pod-b" {
			t.Fatalf("new connection went to the removed endpoint")
		}
	}
	if name, err := ask(); err != nil || name != "pod-a" {
		t.Fatalf("the open connection did not survive the endpoint's removal: %q, %v", name, err)
	}
	if sinkKernel() != IPVS {
		return // iptables: conntrack keeps the open connection's NAT; no destination to watch
	}
	out := c.node.MustRun(t, "ipvsadm", "-Ln", "-t", "10.96.0.19:80")
	if !strings.Contains(out, a.ip.String()+":8080") {
		t.Errorf("the terminating destination is gone while a connection is open:\n%s", out)
	}
	if !strings.Contains(out, a.ip.String()+":8080              Masq    0") {
		t.Errorf("the terminating destination does not have weight 0:\n%s", out)
	}
	// Closing with a reset ends the connection at once (a FIN would leave
	// IPVS's TIME_WAIT entry for two minutes, which it also waits out).
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
	c.eventually(60*time.Second, func() error {
		out := c.node.MustRun(t, "ipvsadm", "-Ln", "-t", "10.96.0.19:80")
		if strings.Contains(out, a.ip.String()+":8080") {
			return fmt.Errorf("terminated destination still there:\n%s", out)
		}
		return nil
	})
}

// Terminating endpoints: one still serving gets no new connection while a
// ready endpoint exists, yet (IPVS sinks) keeps its KUBE-LOOP-BACK entry
// (kube-proxy lists every endpoint on the node there), and serves alone
// once it is the last (kube-proxy's fallback to serving terminating
// endpoints). In the real-API mode the pod is deleted gracefully and the
// controller marks it terminating.
func caseTerminatingEndpoints(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 8080)
	b := c.addPod("pod-b", 8080)
	client := c.addPod("client")
	s := svc{name: "term", typ: "ClusterIP", clusterIP: "10.96.0.26", ports: web}.yaml()
	vip := ap("10.96.0.26:80")
	c.write(nodeManifest, s, slice("term", web, ep{ip: a.ip.String(), ready: true}, ep{ip: b.ip.String(), ready: true}))
	c.startSink()
	c.expectFrom(client.ns, "tcp", vip, "pod-a")

	c.write(nodeManifest, s, slice("term", web, ep{ip: a.ip.String(), terminating: true}, ep{ip: b.ip.String(), ready: true}))
	c.eventually(20*time.Second, func() error {
		for i := 0; i < 10; i++ {
			r, err := c.get(client.ns, "tcp", vip)
			if err != nil {
				return err
			}
			if r.Name != "pod-b" {
				return fmt.Errorf("new connection %d answered by %s, want pod-b only", i, r.Name)
			}
		}
		return nil
	})
	loop := a.ip.String() + ",tcp:8080," + a.ip.String()
	if sinkKernel() == IPVS { // iptables has no KUBE-LOOP-BACK set
		if out := c.node.MustRun(t, "ipset", "list", "KUBE-LOOP-BACK"); !strings.Contains(out, loop) {
			t.Errorf("KUBE-LOOP-BACK lacks the terminating local endpoint's %s:\n%s", loop, out)
		}
	}

	c.write(nodeManifest, s, slice("term", web, ep{ip: a.ip.String(), terminating: true}))
	for i := 0; i < 5; i++ {
		c.expectFrom(client.ns, "tcp", vip, "pod-a")
	}
}

// externalTrafficPolicy=Local without an endpoint on this node: the
// cluster IP serves the cluster endpoints (the endpoint "on node-2" is a
// pod of this test's bridge, so it answers). As kube-proxy's IPVS mode,
// an IPVS sink's node port gets the cluster endpoints too, so a pod on
// the node still reaches the service through it; as kube-proxy's
// iptables mode, the iptables sink drops external traffic to it, and so
// does the nftables sink (its no-endpoint-nodeports drop verdict, as
// kube-proxy's nftables mode).
func caseExternalTrafficLocalNoLocalEndpoint(t *testing.T) {
	c := newCluster(t)
	ports := []port{{"http", "TCP", 80, 8080, 30085}}
	b := c.addPod("pod-b", 8080)
	client := c.addPod("client")
	c.write(nodeManifest, svc{name: "remote", typ: "NodePort", clusterIP: "10.96.0.27", ports: ports, etpLocal: true}.yaml(),
		slice("remote", ports, ep{ip: b.ip.String(), ready: true, node: "node-2"}))
	c.startSink()
	c.expectFrom(client.ns, "tcp", ap("10.96.0.27:80"), "pod-b")
	if sinkKernel() != IPVS {
		// kube-proxy's iptables mode drops external traffic to a node
		// port with eTP=Local and no local endpoint.
		c.expectNoAnswer(c.ext, "tcp", ap("192.168.1.10:30085"))
		return
	}
	c.expectFrom(client.ns, "tcp", ap("192.168.1.10:30085"), "pod-b")
	out := c.node.MustRun(t, "ipvsadm", "-Ln", "-t", "192.168.1.10:30085")
	if !strings.Contains(out, b.ip.String()+":8080") {
		t.Errorf("the node port has not the cluster endpoint:\n%s", out)
	}
}

// Several endpoints share the load: over TCP and UDP every one of three
// pods answers a client pod; the node itself (with a default route, as a
// real node has) reaches the cluster IP too.
func caseBalanced(t *testing.T) {
	c := newCluster(t)
	ports := []port{{"tcp", "TCP", 80, 8080, 0}, {"udp", "UDP", 80, 8080, 0}}
	a, b, d := c.addPod("pod-a", 8080), c.addPod("pod-b", 8080), c.addPod("pod-c", 8080)
	client := c.addPod("client")
	c.write(nodeManifest, svc{name: "spread", typ: "ClusterIP", clusterIP: "10.96.0.28", ports: ports}.yaml(),
		slice("spread", ports, ep{ip: a.ip.String(), ready: true}, ep{ip: b.ip.String(), ready: true}, ep{ip: d.ip.String(), ready: true}))
	c.defaultRoute()
	c.startSink()
	vip := ap("10.96.0.28:80")
	for _, proto := range []string{"tcp", "udp"} {
		c.expectFrom(client.ns, proto, vip, "pod-a", "pod-b", "pod-c")
		got := map[string]int{}
		for range 30 {
			r, err := c.get(client.ns, proto, vip)
			if err != nil {
				t.Fatalf("%s %s: %v", proto, vip, err)
			}
			got[r.Name]++
		}
		if len(got) != 3 {
			t.Errorf("%s: answers %v, want all three pods", proto, got)
		}
	}
	c.expectFrom(c.node, "tcp", vip, "pod-a", "pod-b", "pod-c")
}

// A service without endpoints: a connection to it fails, refused by the
// iptables sink's REJECT rule (kube-proxy's iptables mode) or the
// nftables sink's reject-chain (its nftables mode). The node has
// a default route, so that nothing but the sink's rules stops it.
func caseNoEndpointsRejected(t *testing.T) {
	c := newCluster(t)
	client := c.addPod("client")
	c.write(nodeManifest, svc{name: "empty", typ: "ClusterIP", clusterIP: "10.96.0.29", ports: web}.yaml())
	c.defaultRoute()
	c.startSink()
	c.eventually(20*time.Second, func() error {
		_, err := c.get(client.ns, "tcp", ap("10.96.0.29:80"))
		switch {
		case err == nil:
			return fmt.Errorf("a service without endpoints answered")
		case sinkKernel().Rejects() && !strings.Contains(err.Error(), "refused"):
			return fmt.Errorf("got %v, want connection refused (REJECT)", err)
		}
		return nil
	})
}

// Removing a UDP endpoint flushes its conntrack entries: a client that
// keeps its address and port, which conntrack would keep sending to the
// removed (still running) pod, reaches another one.
func caseUDPStaleConntrackFlushed(t *testing.T) {
	c := newCluster(t)
	ports := []port{{"udp", "UDP", 80, 8080, 0}}
	pods := []*pod{c.addPod("pod-a", 8080), c.addPod("pod-b", 8080), c.addPod("pod-c", 8080)}
	client := c.addPod("client")
	write := func(keep []*pod) {
		var eps []ep
		for _, p := range keep {
			eps = append(eps, ep{ip: p.ip.String(), ready: true})
		}
		c.write(nodeManifest, svc{name: "dns", typ: "ClusterIP", clusterIP: "10.96.0.30", ports: ports}.yaml(), slice("dns", ports, eps...))
	}
	write(pods)
	c.startSink()
	vip := ap("10.96.0.30:80")
	c.expectFrom(client.ns, "udp", vip, "pod-a", "pod-b", "pod-c")
	src := netip.AddrPortFrom(client.ip, 40000)
	first, err := udpFrom(client.ns, src, vip)
	if err != nil {
		t.Fatal(err)
	}
	var keep []*pod
	for _, p := range pods {
		if p.name != first {
			keep = append(keep, p)
		}
	}
	write(keep)
	c.eventually(20*time.Second, func() error {
		got, err := udpFrom(client.ns, src, vip)
		if err == nil && got == first {
			err = fmt.Errorf("the same UDP client still reaches the removed endpoint %s", first)
		}
		return err
	})
}

// udpFrom sends one UDP request from a fixed source address and port and
// returns the name of the pod that answered.
func udpFrom(ns *nstest.NetNS, src, dst netip.AddrPort) (string, error) {
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
		return "", fmt.Errorf("udp %s -> %s: %w", src, dst, err)
	}
	return name, nil
}
