package dataplanetest

import (
	"fmt"
	"net/netip"

	"github.com/proxysinks/proxysinks/client"
)

// BenchCluster returns the benchmarks' cluster: n ClusterIP TCP services
// (port 80 to 8080) with eps ready endpoints each on other nodes. Every
// service has its own address (10.96.0.0/12) and every endpoint its own
// (10.128.0.0/9), as in a real cluster.
func BenchCluster(n, eps int) []*client.ServiceEndpoints {
	out := make([]*client.ServiceEndpoints, 0, n)
	for i := range n {
		se := &client.ServiceEndpoints{Service: &client.Service{
			Namespace: "bench", Name: fmt.Sprintf("svc-%05d", i), Type: client.ClusterIP,
			Ports: []client.Port{{Name: "http", Protocol: client.TCP, Port: 80}},
		}}
		se.Service.ClusterIPs.Add(netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)}))
		for j := range eps {
			se.Endpoints = append(se.Endpoints, BenchEndpoint(fmt.Sprintf("ep-%d", j), BenchEndpointAddr(i*eps+j)))
		}
		out = append(out, se)
	}
	return out
}

// BenchEndpointAddr is the k-th endpoint address of BenchCluster.
func BenchEndpointAddr(k int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 128 + byte(k>>16), byte(k >> 8), byte(k)})
}

// BenchEndpoint is a ready endpoint on another node serving port 8080, as
// in BenchCluster.
func BenchEndpoint(key string, ip netip.Addr) *client.Endpoint {
	ep := &client.Endpoint{Key: client.EndpointKey(key), Ready: true, Serving: true, Internal: true, External: true,
		PortOverrides: []client.PortOverride{{Name: "http", Protocol: client.TCP, Port: 8080}}}
	ep.IPs.Add(ip)
	return ep
}
