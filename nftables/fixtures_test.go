package nftables

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/nodelocal"
	"github.com/proxysinks/proxysinks/client/source/file"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// testNode is the node of the fixtures.
const testNode = "test-node"

// broad loads kube-proxy's TestOverallNFTablesRules cluster (IPv4), as
// package ruleset's tests do, with its render configuration.
func broad(t testing.TB) (*client.Snapshot, ruleset.Config) {
	t.Helper()
	return load(t, "ruleset/testdata/overall-ipv4.yaml")
}

// broad6 is broad's IPv6 twin.
func broad6(t testing.TB) (*client.Snapshot, ruleset.Config) {
	t.Helper()
	s, _ := load(t, "ruleset/testdata/overall-ipv6.yaml")
	node := netip.MustParseAddr("2001:db8::1")
	cfg := ruleset.Config{Local: xtables.LocalTraffic{CIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:10::/64")}}}
	cfg.SetNodePorts([]netip.Prefix{netip.PrefixFrom(node, 128)}, []netip.Addr{node})
	cfg.IPv6.NodeIP = node
	return s, cfg
}

func load(t testing.TB, path string) (*client.Snapshot, ruleset.Config) {
	t.Helper()
	src := file.New(file.Config{Path: path, NodeName: testNode,
		Needs: client.Needs{Node: true, ServiceCIDRs: true}})
	s, err := src.Load()
	if err != nil {
		t.Fatal(err)
	}
	node := netip.MustParseAddr("192.168.0.2")
	cfg := ruleset.Config{Local: xtables.LocalTraffic{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	cfg.SetNodePorts([]netip.Prefix{netip.PrefixFrom(node, 32)}, []netip.Addr{node})
	cfg.IPv4.NodeIP = node
	return s, cfg
}

// generated returns a snapshot of n ClusterIP services (TCP port 80) of
// m endpoints each, half of them on this node; the first endpoint of the
// first service has the address first (when valid).
func generated(n, m int, first netip.Addr) *client.Snapshot {
	ses := make([]*client.ServiceEndpoints, 0, n)
	changes := make([]client.Change, 0, n)
	for i := range n {
		svc := &client.Service{Namespace: "bench", Name: fmt.Sprintf("svc-%06d", i), Type: client.ClusterIP,
			Ports: []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, TargetPort: 8080}}}
		var cips client.IPs
		cips.Add(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}))
		if i >= 1<<16 {
			panic("too many services")
		}
		svc.ClusterIPs = cips
		eps := make([]nodelocal.SliceEndpoint, 0, m)
		for j := range m {
			a := netip.AddrFrom4([4]byte{10, byte(100 + j), byte(i >> 8), byte(i)})
			if i == 0 && j == 0 && first.IsValid() {
				a = first
			}
			var ips client.IPs
			ips.Add(a)
			node := testNode
			if j%2 == 1 {
				node = "other-node"
			}
			eps = append(eps, nodelocal.SliceEndpoint{Endpoint: client.Endpoint{
				Key: client.EndpointKey(fmt.Sprintf("Pod/bench/%d-%d", i, j)), IPs: ips, NodeName: node, Ready: true, Serving: true,
				PortOverrides: []client.PortOverride{{Name: "http", Protocol: client.TCP, Port: 8080}}}})
		}
		sl := &nodelocal.Slice{Namespace: "bench", Name: svc.Name + "-v4", Service: svc.Name, Endpoints: eps,
			Ports: []client.PortOverride{{Name: "http", Protocol: client.TCP, Port: 8080}}}
		se := nodelocal.Compute(svc, []*nodelocal.Slice{sl}, nodelocal.Node{Name: testNode})
		ses = append(ses, se)
		changes = append(changes, client.Change{Key: se.Service.Key(), Service: se})
	}
	return client.NewSnapshot(ses, changes)
}

// generatedConfig is the render configuration of generated clusters.
func generatedConfig() ruleset.Config {
	return ruleset.Config{Local: xtables.LocalTraffic{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.100.0.0/14")}}}
}

// withFirst returns s with the first endpoint of its first service (a
// generated cluster's) at address a; the other services are s's.
func withFirst(s *client.Snapshot, a netip.Addr) *client.Snapshot {
	ses := s.Services()
	one := generated(1, 10, a).Services()[0]
	ses[0] = one
	return client.NewSnapshot(ses, []client.Change{{Key: one.Service.Key(), Service: one}})
}
