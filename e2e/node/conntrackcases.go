package node

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"
)

// udpFlows lists the node's UDP conntrack entries from src as
// "dst via reply-source" strings, sorted (a ti-mo/conntrack dump in the
// node's namespace).
func (c *cluster) udpFlows(src netip.AddrPort) []string {
	c.t.Helper()
	conn, err := ct.Dial(&netlink.Config{NetNS: c.node.FD()})
	if err != nil {
		c.t.Fatalf("dial conntrack in the node: %v", err)
	}
	defer conn.Close()
	flows, err := conn.Dump(nil)
	if err != nil {
		c.t.Fatalf("dump the node's conntrack: %v", err)
	}
	var out []string
	for _, f := range flows {
		o, r := f.TupleOrig, f.TupleReply
		if o.Proto.Protocol != unix.IPPROTO_UDP || netip.AddrPortFrom(o.IP.SourceAddress, o.Proto.SourcePort) != src {
			continue
		}
		out = append(out, fmt.Sprintf("%s via %s", netip.AddrPortFrom(o.IP.DestinationAddress, o.Proto.DestinationPort),
			netip.AddrPortFrom(r.IP.SourceAddress, r.Proto.SourcePort)))
	}
	slices.Sort(out)
	return out
}

// sendUDP sends one datagram from src in the pod's namespace, expecting
// no answer.
func sendUDP(t *testing.T, p *pod, src, dst netip.AddrPort) {
	t.Helper()
	err := p.ns.Do(func() error {
		c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(src), net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("hello\n"))
		return err
	})
	if err != nil {
		t.Fatalf("udp %s -> %s: %v", src, dst, err)
	}
	time.Sleep(100 * time.Millisecond) // the datagram crosses the node
}

// A UDP client that sent to a service address before the service had an
// endpoint holds a conntrack entry that nothing answers (the datagrams
// were routed away); when the first endpoint arrives, the sink deletes it
// (kube-proxy's conntrack reconciler) and the client's next datagram, from
// the same address and port, reaches the endpoint.
func caseUDPFirstEndpointConntrackCleared(t *testing.T) {
	c := newCluster(t)
	c.defaultRoute()
	ports := []port{{"dns", "UDP", 80, 8080, 0}}
	a := c.addPod("pod-a", 8080)
	client := c.addPod("client")
	c.write(nodeManifest)
	c.startSink()
	time.Sleep(time.Second) // the sink's first sync, of nothing
	vip := ap("10.96.0.31:80")
	src := netip.AddrPortFrom(client.ip, 40000)
	sendUDP(t, client, src, vip)
	stale := []string{vip.String() + " via " + vip.String()}
	if diff := cmpFlows(stale, c.udpFlows(src)); diff != "" {
		t.Fatalf("the client's flow before the service exists: %s", diff)
	}
	// The service comes without endpoints: the entry stays.
	c.write(nodeManifest, svc{name: "dns", typ: "ClusterIP", clusterIP: "10.96.0.31", ports: ports}.yaml(), slice("dns", ports))
	time.Sleep(time.Second)
	sendUDP(t, client, src, vip)
	if diff := cmpFlows(stale, c.udpFlows(src)); diff != "" {
		t.Fatalf("the client's flow while the service has no endpoint: %s", diff)
	}
	// Its first endpoint arrives: the entry goes, and the same client
	// reaches the endpoint.
	c.write(nodeManifest, svc{name: "dns", typ: "ClusterIP", clusterIP: "10.96.0.31", ports: ports}.yaml(),
		slice("dns", ports, ep{ip: a.ip.String(), ready: true}))
	c.eventually(20*time.Second, func() error {
		if got := c.udpFlows(src); slices.Contains(got, stale[0]) {
			return fmt.Errorf("the stale entry is still there: %v", got)
		}
		return nil
	})
	got, err := udpFrom(client.ns, src, vip)
	if err != nil || got != "pod-a" {
		t.Fatalf("after the first endpoint: answered by %q, %v; want pod-a", got, err)
	}
	want := []string{vip.String() + " via " + netip.AddrPortFrom(a.ip, 8080).String()}
	if diff := cmpFlows(want, c.udpFlows(src)); diff != "" {
		t.Errorf("the client's flow after the first endpoint: %s", diff)
	}
	if n, err := c.metric(`kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv4"}`); err != nil || n < 1 {
		t.Errorf("kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family=\"IPv4\"} = %v, %v; want >= 1", n, err)
	}
}

// An external client's UDP flow to a node port keeps going to the
// endpoint it first reached; when that endpoint is replaced, the sink
// deletes the flow (node-port entries are matched by port) and the
// client's next datagram, from the same address and port, reaches the new
// endpoint, while the old pod still runs and would answer.
func caseUDPNodePortStaleConntrackCleared(t *testing.T) {
	c := newCluster(t)
	ports := []port{{"dns", "UDP", 80, 8080, 30090}}
	a, b := c.addPod("pod-a", 8080), c.addPod("pod-b", 8080)
	write := func(p *pod) {
		c.write(nodeManifest, svc{name: "np", typ: "NodePort", clusterIP: "10.96.0.32", ports: ports}.yaml(),
			slice("np", ports, ep{ip: p.ip.String(), ready: true}))
	}
	write(a)
	c.startSink()
	np := netip.AddrPortFrom(nodeAddr, 30090)
	src := netip.AddrPortFrom(extAddr, 40001)
	c.eventually(20*time.Second, func() error {
		got, err := udpFrom(c.ext, src, np)
		if err == nil && got != "pod-a" {
			err = fmt.Errorf("answered by %s, want pod-a", got)
		}
		return err
	})
	onA := []string{np.String() + " via " + netip.AddrPortFrom(a.ip, 8080).String()}
	if diff := cmpFlows(onA, c.udpFlows(src)); diff != "" {
		t.Fatalf("the client's flow to pod-a: %s", diff)
	}
	write(b)
	c.eventually(20*time.Second, func() error {
		got, err := udpFrom(c.ext, src, np)
		if err == nil && got != "pod-b" {
			err = fmt.Errorf("the same client still reaches %s; flows %v", got, c.udpFlows(src))
		}
		return err
	})
	onB := []string{np.String() + " via " + netip.AddrPortFrom(b.ip, 8080).String()}
	if diff := cmpFlows(onB, c.udpFlows(src)); diff != "" {
		t.Errorf("the client's flow after the endpoint changed: %s", diff)
	}
}

// cmpFlows returns "" when got is want, else both.
func cmpFlows(want, got []string) string {
	if slices.Equal(want, got) {
		return ""
	}
	return fmt.Sprintf("got %v, want %v", got, want)
}
