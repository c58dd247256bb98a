package iptablessink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/kernel"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/iptables"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
	"github.com/proxysinks/proxysinks/sinks/runtime"
	"github.com/urfave/cli/v2"
)

// testNet is a node namespace with three neighbours:
//
//	client 192.168.50.10 --ext0-- node 192.168.50.2
//	srv    10.244.1.2/30 --vsrv-- node 10.244.1.1   (the service's endpoint)
//	pod0   10.244.1.10/29 --vpod0 in bridge cbr0-- node 10.244.1.9
//
// srv answers every TCP connection on port 8080 with the source address
// it sees.
type testNet struct {
	node, client, srv, pod0 *nstest.NetNS
}

func newTestNet(t *testing.T) *testNet {
	t.Helper()
	for _, tool := range []string{"ip", "sysctl", "iptables-nft-restore", "iptables-nft-save"} {
		nstest.LookPath(t, tool)
	}
	n := &testNet{node: nstest.New(t), client: nstest.New(t), srv: nstest.New(t), pod0: nstest.New(t)}
	run := func(ns *nstest.NetNS, args ...string) { t.Helper(); ns.MustRun(t, args[0], args[1:]...) }
	run(n.node, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	veth := func(name string, peer *nstest.NetNS, peerAddr string) {
		run(n.node, "ip", "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", peer.Path())
		run(peer, "ip", "addr", "add", peerAddr, "dev", "eth0")
		run(peer, "ip", "link", "set", "eth0", "up")
		run(n.node, "ip", "link", "set", name, "up")
	}
	veth("ext0", n.client, "192.168.50.10/24")
	run(n.node, "ip", "addr", "add", "192.168.50.2/24", "dev", "ext0")
	run(n.client, "ip", "route", "add", "10.96.0.0/16", "via", "192.168.50.2")
	veth("vsrv", n.srv, "10.244.1.2/30")
	run(n.node, "ip", "addr", "add", "10.244.1.1/30", "dev", "vsrv")
	run(n.srv, "ip", "route", "add", "default", "via", "10.244.1.1")
	run(n.node, "ip", "link", "add", "cbr0", "type", "bridge")
	run(n.node, "ip", "addr", "add", "10.244.1.9/29", "dev", "cbr0")
	run(n.node, "ip", "link", "set", "cbr0", "up")
	veth("vpod0", n.pod0, "10.244.1.10/29")
	run(n.node, "ip", "link", "set", "vpod0", "master", "cbr0")
	run(n.pod0, "ip", "route", "add", "default", "via", "10.244.1.9")

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ready := make(chan error, 1)
	go n.srv.Do(func() error { return serveSource(ctx, "0.0.0.0:8080", ready) })
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	return n
}

// serveSource answers each TCP connection on addr with the remote
// address, until ctx ends; ready receives the listen error (nil once
// listening).
func serveSource(ctx context.Context, addr string, ready chan<- error) error {
	ln, err := net.Listen("tcp4", addr)
	ready <- err
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			return nil
		}
		fmt.Fprint(c, c.RemoteAddr().(*net.TCPAddr).IP.String())
		c.Close()
	}
}

// source connects from ns to addr and returns the source address the
// server saw.
func source(ns *nstest.NetNS, addr string) (string, error) {
	var seen string
	err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp4", addr, 700*time.Millisecond)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		b, err := io.ReadAll(c)
		seen = string(b)
		return err
	})
	return seen, err
}

// program programs one NodePort service (cluster IP 10.96.0.40:80, node
// port 30080, endpoint srv:8080) in the node namespace with the Proxier
// the sink builds from env, over the node's Node, if any.
func (n *testNet) program(t *testing.T, env runtime.Env, node *client.Node) {
	t.Helper()
	n.programEnv(t, env, node, nil)
}

// programWith programs the service with the sink's defaults, mod applied
// to the Proxier's configuration.
func (n *testNet) programWith(t *testing.T, mod func(*iptables.Config)) {
	t.Helper()
	sc, err := parseDefaults()
	if err != nil {
		t.Fatal(err)
	}
	n.programEnv(t, runtime.Env{Config: runtime.Config{MasqueradeBit: 14, SinkConfig: sc}, NodePorts: runtime.NodePorts{Addrs: []netip.Addr{netip.MustParseAddr("192.168.50.2")}}}, nil, mod)
}

func (n *testNet) programEnv(t *testing.T, env runtime.Env, node *client.Node, mod func(*iptables.Config)) {
	t.Helper()
	cfg := ProxierConfig(env)
	cfg.IPv6, cfg.Backend, cfg.Run = false, xtables.NFT, xtables.ExecWith(n.node.Do)
	if mod != nil {
		mod(&cfg)
	}
	p, err := iptables.NewProxier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	se := service("web", "10.96.0.40", "10.244.1.2")
	se.Service.Type, se.Service.Ports[0].NodePort = client.NodePort, 30080
	s := client.NewSnapshot([]*client.ServiceEndpoints{se}, nil)
	s.Node = node
	c := &Controller{P: p, Log: discard, Local: nodeLocal(env.Config)}
	c.Snapshot(s)
	if _, err := p.Resync(); err != nil {
		t.Fatal(err)
	}
}

// TestTrafficLocalDetection: the masquerade decision for traffic to a
// cluster IP follows --detect-local-mode, shown by the source address the
// endpoint sees: a local pod's own address, or the node's (10.244.1.1,
// masqueraded). Traffic from off the node is masqueraded whenever a mode
// detects anything.
func TestTrafficLocalDetection(t *testing.T) {
	const pod0, masq, client0 = "10.244.1.10", "10.244.1.1", "192.168.50.10"
	pfx := netip.MustParsePrefix
	node := &client.Node{Name: "node-a", PodCIDRs: []netip.Prefix{pfx("10.244.1.0/24")}}
	other := &client.Node{Name: "node-a", PodCIDRs: []netip.Prefix{pfx("10.244.9.0/24")}}
	for _, tc := range []struct {
		name                 string
		cfg                  runtime.Config
		node                 *client.Node
		fromPod, fromOutside string
	}{
		{"ClusterCIDR", runtime.Config{DetectLocalMode: xtables.LocalClusterCIDR, ClusterCIDRs: []netip.Prefix{pfx("10.244.0.0/16")}}, nil, pod0, masq},
		{"ClusterCIDR unset: no detection, no masquerade", runtime.Config{DetectLocalMode: xtables.LocalClusterCIDR}, nil, pod0, client0},
		{"NodeCIDR", runtime.Config{DetectLocalMode: xtables.LocalNodeCIDR, ClusterCIDRs: []netip.Prefix{pfx("10.0.0.0/8")}}, node, pod0, masq},
		{"NodeCIDR of another range", runtime.Config{DetectLocalMode: xtables.LocalNodeCIDR, ClusterCIDRs: []netip.Prefix{pfx("10.0.0.0/8")}}, other, masq, masq},
		{"BridgeInterface", runtime.Config{DetectLocalMode: xtables.LocalBridgeInterface, PodBridgeInterface: "cbr0"}, nil, pod0, masq},
		{"BridgeInterface of another bridge", runtime.Config{DetectLocalMode: xtables.LocalBridgeInterface, PodBridgeInterface: "cni0"}, nil, masq, masq},
		{"InterfaceNamePrefix", runtime.Config{DetectLocalMode: xtables.LocalInterfaceNamePrefix, PodInterfacePrefix: "cbr"}, nil, pod0, masq},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNet(t)
			tc.cfg.MasqueradeBit, tc.cfg.SinkConfig = 14, Config{}
			n.program(t, runtime.Env{Config: tc.cfg, NodePorts: runtime.NodePorts{Addrs: []netip.Addr{netip.MustParseAddr("192.168.50.2")}}}, tc.node)
			for _, from := range []struct {
				ns   *nstest.NetNS
				want string
			}{{n.pod0, tc.fromPod}, {n.client, tc.fromOutside}} {
				got, err := source(from.ns, "10.96.0.40:80")
				if err != nil || got != from.want {
					t.Errorf("from %s: endpoint saw %q (%v), want %s", map[*nstest.NetNS]string{n.pod0: "pod0", n.client: "client"}[from.ns], got, err, from.want)
				}
			}
		})
	}
}

// TestTrafficLocalhostNodePorts: with the sink's defaults (localhost node
// ports on, --nodeport-addresses unset), a request from the node to
// 127.0.0.1:<node port> answers; a packet to 127.0.0.1 that arrives from
// outside is dropped by KUBE-FIREWALL unless a node port DNATs it.
func TestTrafficLocalhostNodePorts(t *testing.T) {
	n := newTestNet(t)
	// The sink's default: --iptables-localhost-nodeports=true.
	sc, err := parseDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.node.Do(func() error { return ensureRouteLocalnet(kernelSysctl) }); err != nil {
		t.Fatal(err)
	}
	n.program(t, runtime.Env{Config: runtime.Config{MasqueradeBit: 14, SinkConfig: sc}, NodePorts: runtime.NodePorts{Addrs: []netip.Addr{netip.MustParseAddr("192.168.50.2")}}}, nil)
	if got, err := source(n.node, "127.0.0.1:30080"); err != nil {
		t.Fatalf("from the node to 127.0.0.1:30080: %v, want an answer", err)
	} else {
		t.Logf("from the node to 127.0.0.1:30080: endpoint saw %s", got)
	}

	// A service of the node's own on loopback, and a client that sends
	// to 127.0.0.0/8 through the node.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan error, 1)
	go n.node.Do(func() error { return serveSource(ctx, "127.0.0.1:9000", ready) })
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1"},
		{"ip", "addr", "del", "127.0.0.1/8", "dev", "lo"},
		{"ip", "route", "add", "127.0.0.0/8", "via", "192.168.50.2"},
	} {
		n.client.MustRun(t, args[0], args[1:]...)
	}
	if got, err := source(n.client, "127.0.0.1:30080"); err != nil {
		t.Errorf("from outside to 127.0.0.1:30080 (DNAT'd): %v, want an answer", err)
	} else {
		t.Logf("from outside to 127.0.0.1:30080: endpoint saw %s", got)
	}
	if got, err := source(n.client, "127.0.0.1:9000"); err == nil {
		t.Errorf("from outside to the node's 127.0.0.1:9000: answered (%s), want it dropped", got)
	} else if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "timeout") {
		t.Errorf("from outside to the node's 127.0.0.1:9000: %v, want no answer (dropped)", err)
	}
	// Without KUBE-FIREWALL's rule the same packet reaches the service:
	// the drop above is the rule's.
	n.node.MustRun(t, "iptables-nft", "-F", "KUBE-FIREWALL")
	if _, err := source(n.client, "127.0.0.1:9000"); err != nil {
		t.Errorf("from outside to 127.0.0.1:9000 without KUBE-FIREWALL: %v; the test network does not deliver such packets", err)
	}
}

// kernelSysctl is /proc/sys, seen from the thread that opens it.
var kernelSysctl = kernel.Sysctl{}

var discard = slog.New(slog.DiscardHandler)

// parseDefaults returns the sink's own configuration with no flag given.
func parseDefaults() (Config, error) {
	var sc Config
	app := &cli.App{Action: func(c *cli.Context) error {
		v, err := parse(c)
		sc, _ = v.(Config)
		return err
	}}
	for _, f := range flags() {
		app.Flags = append(app.Flags, f.Flag)
	}
	return sc, app.Run([]string{"iptables"})
}
