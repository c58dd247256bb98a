// Package gen draws random node-local states for property tests of the
// client packages.
package gen

import (
	"fmt"
	"net/netip"
	"slices"

	"pgregory.net/rapid"

	"github.com/proxysinks/proxysinks/client"
)

// Addr4 draws an IPv4 address from a pool of n.
func Addr4(t *rapid.T, n int, label string) netip.Addr {
	i := rapid.IntRange(0, n-1).Draw(t, label)
	return netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
}

// Addr6 draws an IPv6 address from a pool of n.
func Addr6(t *rapid.T, n int, label string) netip.Addr {
	i := rapid.IntRange(0, n-1).Draw(t, label)
	return netip.AddrFrom16([16]byte{0xfd, 0, 15: byte(i), 14: byte(i >> 8)})
}

func ips(t *rapid.T, label string) client.IPs {
	var out client.IPs
	for range rapid.IntRange(0, 2).Draw(t, label+"4") {
		out.Add(Addr4(t, 8, label))
	}
	for range rapid.IntRange(0, 1).Draw(t, label+"6") {
		out.Add(Addr6(t, 8, label))
	}
	return out
}

var protocols = []client.Protocol{client.TCP, client.UDP, client.SCTP}

// Service draws a service with key k and every field possibly set.
func Service(t *rapid.T, k client.ServiceKey) *client.Service {
	s := &client.Service{
		Namespace:            k.Namespace,
		Name:                 k.Name,
		Type:                 rapid.SampledFrom([]client.ServiceType{client.ClusterIP, client.NodePort, client.LoadBalancer}).Draw(t, "type"),
		ClusterIPs:           ips(t, "cip"),
		ExternalIPs:          ips(t, "eip"),
		LoadBalancerIPs:      ips(t, "lbip"),
		ExternalTrafficLocal: rapid.Bool().Draw(t, "etp"),
		InternalTrafficLocal: rapid.Bool().Draw(t, "itp"),
		HealthCheckNodePort:  rapid.SampledFrom([]int{0, 30100}).Draw(t, "hc"),
	}
	for i := range rapid.IntRange(1, 3).Draw(t, "ports") {
		p := client.Port{
			Name:     fmt.Sprintf("p%d", i),
			Protocol: rapid.SampledFrom(protocols).Draw(t, "proto"),
			Port:     rapid.IntRange(1, 3).Draw(t, "port") * 80,
			NodePort: rapid.SampledFrom([]int{0, 30080}).Draw(t, "nodeport"),
		}
		if rapid.Bool().Draw(t, "named") {
			p.TargetPortName = "http"
		} else {
			p.TargetPort = 8080
		}
		s.Ports = append(s.Ports, p)
	}
	if rapid.Bool().Draw(t, "affinity") {
		s.SessionAffinity = &client.SessionAffinity{TimeoutSeconds: rapid.SampledFrom([]int{10, 10800}).Draw(t, "timeout")}
	}
	for range rapid.IntRange(0, 2).Draw(t, "ranges") {
		s.LoadBalancerSourceRanges = append(s.LoadBalancerSourceRanges,
			netip.PrefixFrom(Addr4(t, 4, "range"), 24).Masked())
	}
	if rapid.Bool().Draw(t, "labels") {
		s.Labels = map[string]string{"app": rapid.SampledFrom([]string{"a", "b"}).Draw(t, "app")}
	}
	if rapid.Bool().Draw(t, "annotations") {
		s.Annotations = map[string]string{"proxysinks.io/ipvs-scheduler": rapid.SampledFrom([]string{"rr", "wlc"}).Draw(t, "sched")}
	}
	return s
}

// Endpoint draws an endpoint with key k and address number addr.
func Endpoint(t *rapid.T, k client.EndpointKey, addr int) *client.Endpoint {
	e := &client.Endpoint{
		Key:         k,
		Hostname:    rapid.SampledFrom([]string{"", "web-0"}).Draw(t, "hostname"),
		NodeName:    rapid.SampledFrom([]string{"", "node-a", "node-b"}).Draw(t, "node"),
		Zone:        rapid.SampledFrom([]string{"", "zone-a"}).Draw(t, "zone"),
		Local:       rapid.Bool().Draw(t, "local"),
		Ready:       rapid.Bool().Draw(t, "ready"),
		Serving:     rapid.Bool().Draw(t, "serving"),
		Terminating: rapid.Bool().Draw(t, "terminating"),
		Internal:    rapid.Bool().Draw(t, "internal"),
		External:    rapid.Bool().Draw(t, "external"),
	}
	e.IPs.Add(netip.AddrFrom4([4]byte{10, 244, byte(addr >> 8), byte(addr)}))
	if rapid.Bool().Draw(t, "dual") {
		e.IPs.Add(netip.AddrFrom16([16]byte{0xfd, 0x44, 15: byte(addr), 14: byte(addr >> 8)}))
	}
	for _, name := range []string{"http", "p0"} {
		if rapid.Bool().Draw(t, "override") {
			e.PortOverrides = append(e.PortOverrides, client.PortOverride{
				Name: name, Protocol: client.TCP, Port: rapid.SampledFrom([]int{8080, 9090}).Draw(t, "oport"),
			})
		}
	}
	return e
}

// State draws a cluster state: services from a pool of nsvc keys, each with
// endpoints keyed from a pool of nep keys. Endpoint addresses come from a
// small pool, so an address often moves between keys from one state to the
// next; within one service, an address is used by one endpoint at most.
func State(t *rapid.T, nsvc, nep int) []*client.ServiceEndpoints {
	var out []*client.ServiceEndpoints
	for i := range nsvc {
		if !rapid.Bool().Draw(t, "present") {
			continue
		}
		k := client.ServiceKey{Namespace: []string{"default", "kube-system"}[i%2], Name: fmt.Sprintf("svc-%d", i)}
		se := &client.ServiceEndpoints{Service: Service(t, k)}
		addrs := rapid.Permutation(seq(nep+2)).Draw(t, "addrs")
		for j := range nep {
			if rapid.Bool().Draw(t, "ep") {
				se.Endpoints = append(se.Endpoints, Endpoint(t, client.EndpointKey(fmt.Sprintf("Pod/%s/pod-%d", k.Namespace, j)), addrs[j]))
			}
		}
		out = append(out, se)
	}
	slices.SortFunc(out, func(a, b *client.ServiceEndpoints) int { return a.Service.Key().Compare(b.Service.Key()) })
	return out
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
