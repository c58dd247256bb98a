package hostnode

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/e2e/netexec"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// Addresses of the test network.
//
//	client (192.168.50.10) --- node A (192.168.50.2) --- node B (192.168.60.3)
//	                           |  pod0 10.244.1.2          |  pod2 10.244.2.2
//	                           |  pod1 10.244.1.6
//
// Node A runs the sink; node B only routes to its pod. Every pod has a
// routed /30 (and /64) link to its node, as with a routed CNI: all pod
// traffic crosses the node's IP stack, so no br_netfilter is needed.
var (
	nodeA      = netip.MustParseAddr("192.168.50.2")
	nodeA6     = netip.MustParseAddr("fd00:50::2")
	clientAddr = netip.MustParseAddr("192.168.50.10")
)

type pod struct {
	name string
	ns   *nstest.NetNS
	ip   netip.Addr
	ip6  netip.Addr
	gw   netip.Addr // the node-side address of its link
}

type network struct {
	t      *testing.T
	node   *nstest.NetNS
	nodeB  *nstest.NetNS
	client *nstest.NetNS
	pods   []*pod
	ctx    context.Context
}

func must(t *testing.T, ns *nstest.NetNS, args ...string) {
	t.Helper()
	ns.MustRun(t, args[0], args[1:]...)
}

// newNetwork builds the namespaces and links and starts the pod servers on
// ports 8080 and 8081 (TCP, UDP and SCTP where the kernel has it).
func newNetwork(t *testing.T) *network {
	t.Helper()
	for _, tool := range []string{"ip", "sysctl", "iptables", "iptables-save", "iptables-restore"} {
		nstest.LookPath(t, tool)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	n := &network{t: t, node: nstest.New(t), nodeB: nstest.New(t), client: nstest.New(t), ctx: ctx}
	for _, ns := range []*nstest.NetNS{n.node, n.nodeB} {
		must(t, ns, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	}
	for _, ns := range []*nstest.NetNS{n.node, n.nodeB, n.client} {
		noDAD(t, ns)
	}
	n.link(n.node, "ext0", n.client, "192.168.50.2/24", "192.168.50.10/24", "fd00:50::2/64", "fd00:50::10/64")
	for _, dst := range []string{"10.96.0.0/16", "192.0.2.0/24", "198.51.100.0/24"} {
		must(t, n.client, "ip", "route", "add", dst, "via", nodeA.String())
	}
	must(t, n.client, "ip", "-6", "route", "add", "fd00:96::/64", "via", nodeA6.String())
	// Like a real node, node A has a default route (service IPs are not
	// routed anywhere else; the nat rules catch them first).
	must(t, n.node, "ip", "route", "add", "default", "via", clientAddr.String())
	must(t, n.node, "ip", "-6", "route", "add", "default", "via", "fd00:50::10")
	n.link(n.node, "nb0", n.nodeB, "192.168.60.2/24", "192.168.60.3/24", "", "")
	must(t, n.node, "ip", "route", "add", "10.244.2.0/24", "via", "192.168.60.3")
	must(t, n.nodeB, "ip", "route", "add", "default", "via", "192.168.60.2")
	n.addPod(n.node, "pod0", 0, "10.244.1")
	n.addPod(n.node, "pod1", 1, "10.244.1")
	n.addPod(n.nodeB, "pod2", 0, "10.244.2")
	n.pods[2].ip6 = netip.Addr{} // node A has no IPv6 route to node B's pods
	return n
}

// link joins two namespaces with a veth pair (eth0 on the b side).
func (n *network) link(a *nstest.NetNS, name string, b *nstest.NetNS, addrA, addrB, addr6A, addr6B string) {
	t := n.t
	must(t, a, "ip", "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", b.Path())
	must(t, a, "ip", "addr", "add", addrA, "dev", name)
	must(t, b, "ip", "addr", "add", addrB, "dev", "eth0")
	if addr6A != "" {
		must(t, a, "ip", "addr", "add", addr6A, "dev", name, "nodad")
		must(t, b, "ip", "addr", "add", addr6B, "dev", "eth0", "nodad")
	}
	must(t, a, "ip", "link", "set", name, "up")
	must(t, b, "ip", "link", "set", "eth0", "up")
}

// addPod creates pod i of a node: link 10.244.X.(4i+1)/30 on the node,
// 10.244.X.(4i+2)/30 in the pod (and fd00:244:X:i::1/2 for IPv6).
func (n *network) addPod(node *nstest.NetNS, name string, i int, prefix string) {
	t := n.t
	p := &pod{name: name, ns: nstest.New(t)}
	noDAD(t, p.ns)
	third := prefix[strings.LastIndex(prefix, ".")+1:]
	p.gw = netip.MustParseAddr(fmt.Sprintf("%s.%d", prefix, 4*i+1))
	p.ip = netip.MustParseAddr(fmt.Sprintf("%s.%d", prefix, 4*i+2))
	gw6 := fmt.Sprintf("fd00:244:%s:%d::1", third, i)
	p.ip6 = netip.MustParseAddr(fmt.Sprintf("fd00:244:%s:%d::2", third, i))
	n.link(node, "v"+name, p.ns, p.gw.String()+"/30", p.ip.String()+"/30", gw6+"/64", p.ip6.String()+"/64")
	must(t, p.ns, "ip", "route", "add", "default", "via", p.gw.String())
	must(t, p.ns, "ip", "-6", "route", "add", "default", "via", gw6)
	for _, port := range []int{8080, 8081} {
		ready := make(chan struct{})
		go p.ns.Do(func() error {
			close(ready)
			return netexec.Serve(n.ctx, name, port)
		})
		<-ready
	}
	n.pods = append(n.pods, p)
}

// get sends one request from a namespace and returns the answer.
func get(ns *nstest.NetNS, proto string, addr netip.AddrPort, timeout time.Duration) (netexec.Reply, error) {
	var r netexec.Reply
	err := ns.Do(func() error {
		var err error
		r, err = netexec.Get(proto, addr, timeout)
		return err
	})
	return r, err
}

// mustGet retries for a few seconds (servers start asynchronously) and
// fails the test if no answer comes.
func mustGet(t *testing.T, ns *nstest.NetNS, proto string, addr netip.AddrPort) netexec.Reply {
	t.Helper()
	var err error
	for range 20 {
		var r netexec.Reply
		if r, err = get(ns, proto, addr, time.Second); err == nil {
			return r
		}
		t.Logf("retry %s %s: %v", proto, addr, err)
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s %s: %v", proto, addr, err)
	return netexec.Reply{}
}

// mustFail checks that requests get no answer.
func mustFail(t *testing.T, ns *nstest.NetNS, proto string, addr netip.AddrPort) {
	t.Helper()
	if r, err := get(ns, proto, addr, 700*time.Millisecond); err == nil {
		t.Fatalf("%s %s: answered by %s (client %s), want no answer", proto, addr, r.Name, r.Client)
	}
}

// noDAD turns off duplicate address detection for links created later, so
// IPv6 (link-local addresses included) works as soon as a link is up.
func noDAD(t *testing.T, ns *nstest.NetNS) {
	t.Helper()
	must(t, ns, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.all.accept_dad=0")
}
