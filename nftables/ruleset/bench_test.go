package ruleset

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/nodelocal"
)

// nthAddr returns base + n (IPv4 or IPv6).
func nthAddr(base string, n int) netip.Addr {
	a := netip.MustParseAddr(base).As16()
	v := binary.BigEndian.Uint32(a[12:]) + uint32(n)
	binary.BigEndian.PutUint32(a[12:], v)
	out := netip.AddrFrom16(a)
	if netip.MustParseAddr(base).Is4() {
		return out.Unmap()
	}
	return out
}

// generated returns a snapshot of n services with eps endpoints each (one
// in three on this node, node-1), the endpoints' flags set by the
// node-local rules (nodelocal.Compute). Mixed makes every kind of service
// in turn: ClusterIP, NodePort UDP, LoadBalancer with source ranges and
// externalTrafficPolicy Local, SCTP, session affinity,
// internalTrafficPolicy Local, dual-stack, external IPs without endpoints;
// else all are TCP ClusterIP services.
func generated(n, eps int, mixed bool) *client.Snapshot {
	node := nodelocal.Node{Name: "node-1"}
	out := make([]*client.ServiceEndpoints, 0, n)
	for i := range n {
		kind := 0
		if mixed {
			kind = i % 8
		}
		svc := &client.Service{Namespace: fmt.Sprintf("ns%03d", i/100), Name: fmt.Sprintf("svc%05d", i), Type: client.ClusterIP,
			ClusterIPs: client.IPs{V4: []netip.Addr{nthAddr("10.96.0.0", i)}}}
		port := client.Port{Name: "p", Protocol: client.TCP, Port: 80}
		v6 := false
		switch kind {
		case 1:
			svc.Type, port.Protocol, port.NodePort = client.NodePort, client.UDP, 30000+i%2700
		case 2:
			svc.Type, port.NodePort, svc.ExternalTrafficLocal, svc.HealthCheckNodePort = client.LoadBalancer, 30000+i%2700, true, 32700
			svc.LoadBalancerIPs = client.IPs{V4: []netip.Addr{nthAddr("198.18.0.0", i)}}
			svc.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("192.168.0.0/16")}
		case 3:
			port.Protocol = client.SCTP
		case 4:
			svc.SessionAffinity = &client.SessionAffinity{TimeoutSeconds: 10800}
		case 5:
			svc.InternalTrafficLocal = true
		case 6:
			v6 = true
			svc.ClusterIPs.V6 = []netip.Addr{nthAddr("fd00:96::", i)}
			svc.SessionAffinity = &client.SessionAffinity{TimeoutSeconds: 60}
		case 7:
			svc.ExternalIPs = client.IPs{V4: []netip.Addr{nthAddr("192.0.2.0", i%250)}}
		}
		svc.Ports = []client.Port{port}
		var slices []*nodelocal.Slice
		if kind != 7 {
			slices = append(slices, genSlice(svc, i, eps, port.Protocol, false))
			if v6 {
				slices = append(slices, genSlice(svc, i, eps, port.Protocol, true))
			}
		}
		out = append(out, nodelocal.Compute(svc, slices, node))
	}
	return client.NewSnapshot(out, nil)
}

// genSlice returns service i's slice of one family.
func genSlice(svc *client.Service, i, eps int, proto client.Protocol, v6 bool) *nodelocal.Slice {
	s := &nodelocal.Slice{Namespace: svc.Namespace, Name: svc.Name + "-x", Service: svc.Name, IPv6: v6,
		Ports: []client.PortOverride{{Name: "p", Protocol: proto, Port: 8080}}}
	if v6 {
		s.Name = svc.Name + "-y"
	}
	for j := range eps {
		e := client.Endpoint{Key: client.EndpointKey(fmt.Sprintf("Pod/%s/%s-%d", svc.Namespace, svc.Name, j)),
			NodeName: fmt.Sprintf("node-%d", 1+j%3), Ready: true, Serving: true, PortOverrides: s.Ports}
		if v6 {
			e.IPs.V6 = []netip.Addr{nthAddr("fd00:244::", i*eps+j)}
		} else {
			e.IPs.V4 = []netip.Addr{nthAddr("10.128.0.0", i*eps+j)}
		}
		s.Endpoints = append(s.Endpoints, nodelocal.SliceEndpoint{Endpoint: e})
	}
	return s
}

// BenchmarkRender renders both families of 10,000 services with 10
// endpoints each: all ClusterIP (kube-proxy's benchmark shape), and every
// kind of service in turn.
func BenchmarkRender(b *testing.B) {
	for _, mixed := range []bool{false, true} {
		name := "clusterip"
		if mixed {
			name = "mixed"
		}
		b.Run(name+"/10000x10", func(b *testing.B) {
			s := generated(10000, 10, mixed)
			cfg := Config{}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Render(s, cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
