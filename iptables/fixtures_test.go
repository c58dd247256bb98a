package iptables

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/nodelocal"
)

// The node the fixtures' endpoints are local to.
const testNode = "node-a"

// ep describes one backend of a fixture: "10.244.1.5" plus conditions.
type ep struct {
	ip          string
	remote      bool // on another node
	notReady    bool
	terminating bool // serving and terminating (with notReady)
	port        int  // 0: the fixture's target port
}

// svcSpec is a compact fixture service.
type svcSpec struct {
	ns, name    string
	typ         client.ServiceType
	clusterIPs  []string
	externalIPs []string
	lbIPs       []string
	ranges      []string
	ports       []client.Port // TargetPort is the endpoints' port
	affinity    int
	eLocal      bool
	iLocal      bool
	hcNodePort  int
	eps         []ep
}

func ips(list []string) client.IPs {
	var out client.IPs
	for _, s := range list {
		out.Add(netip.MustParseAddr(s))
	}
	return out
}

// build turns a spec into what a source delivers, the node-local rules
// applied by client/nodelocal (the one implementation of them).
func (s svcSpec) build() *client.ServiceEndpoints {
	if s.typ == "" {
		s.typ = client.ClusterIP
	}
	if s.ns == "" {
		s.ns = "default"
	}
	svc := &client.Service{
		Namespace: s.ns, Name: s.name, Type: s.typ,
		ClusterIPs: ips(s.clusterIPs), ExternalIPs: ips(s.externalIPs), LoadBalancerIPs: ips(s.lbIPs),
		Ports: s.ports, InternalTrafficLocal: s.iLocal, HealthCheckNodePort: s.hcNodePort,
	}
	svc.ExternalTrafficLocal = s.eLocal && svc.ExternallyAccessible()
	for _, r := range s.ranges {
		svc.LoadBalancerSourceRanges = append(svc.LoadBalancerSourceRanges, netip.MustParsePrefix(r).Masked())
	}
	if s.affinity > 0 {
		svc.SessionAffinity = &client.SessionAffinity{TimeoutSeconds: s.affinity}
	}
	var slices4, slices6 []nodelocal.SliceEndpoint
	for _, e := range s.eps {
		a := netip.MustParseAddr(e.ip)
		se := nodelocal.SliceEndpoint{Endpoint: client.Endpoint{
			Key: client.EndpointKey("Pod/" + s.ns + "/" + strings.ReplaceAll(e.ip, ":", "-")), IPs: ips([]string{e.ip}),
			NodeName: testNode, Ready: !e.notReady, Serving: !e.notReady || e.terminating, Terminating: e.terminating,
		}}
		if e.remote {
			se.NodeName = "node-b"
		}
		for _, p := range s.ports {
			port := p.TargetPort
			if e.port != 0 {
				port = e.port
			}
			se.PortOverrides = append(se.PortOverrides, client.PortOverride{Name: p.Name, Protocol: p.Protocol, Port: port})
		}
		slices.SortFunc(se.PortOverrides, func(a, b client.PortOverride) int {
			if c := strings.Compare(a.Name, b.Name); c != 0 {
				return c
			}
			return strings.Compare(string(a.Protocol), string(b.Protocol))
		})
		if a.Is4() {
			slices4 = append(slices4, se)
		} else {
			slices6 = append(slices6, se)
		}
	}
	var sl []*nodelocal.Slice
	for i, eps := range [][]nodelocal.SliceEndpoint{slices4, slices6} {
		if len(eps) == 0 {
			continue
		}
		x := &nodelocal.Slice{Namespace: s.ns, Name: s.name + []string{"-v4", "-v6"}[i], Service: s.name, IPv6: i == 1, Endpoints: eps}
		x.Ports = slices.Clone(eps[0].PortOverrides)
		sl = append(sl, x)
	}
	return nodelocal.Compute(svc, sl, nodelocal.Node{Name: testNode})
}

func tcp(name string, port, target int) client.Port {
	return client.Port{Name: name, Protocol: client.TCP, Port: port, TargetPort: target}
}

func udp(name string, port, target int) client.Port {
	return client.Port{Name: name, Protocol: client.UDP, Port: port, TargetPort: target}
}

func withNodePort(p client.Port, np int) client.Port { p.NodePort = np; return p }

// snapshot builds a full snapshot of services, sorted by key.
func snapshot(specs ...svcSpec) *client.Snapshot {
	var ses []*client.ServiceEndpoints
	for _, s := range specs {
		ses = append(ses, s.build())
	}
	slices.SortFunc(ses, func(a, b *client.ServiceEndpoints) int { return a.Service.Key().Compare(b.Service.Key()) })
	var ch []client.Change
	for _, se := range ses {
		ch = append(ch, client.Change{Key: se.Service.Key(), Service: se})
	}
	return client.NewSnapshot(ses, ch)
}

// next returns a snapshot of specs whose Changes are the services that
// differ from prev.
func next(prev *client.Snapshot, specs ...svcSpec) *client.Snapshot {
	full := snapshot(specs...)
	var ch []client.Change
	seen := map[client.ServiceKey]bool{}
	for se := range full.All() {
		k := se.Service.Key()
		seen[k] = true
		if !se.Equal(prev.Lookup(k)) {
			ch = append(ch, client.Change{Key: k, Service: se})
		}
	}
	for se := range prev.All() {
		if k := se.Service.Key(); !seen[k] {
			ch = append(ch, client.Change{Key: k})
		}
	}
	slices.SortFunc(ch, func(a, b client.Change) int { return a.Key.Compare(b.Key) })
	return client.NewSnapshot(full.Services(), ch)
}

// broad is a cluster that uses every feature the ruleset has.
func broad() []svcSpec {
	return []svcSpec{
		{name: "web", clusterIPs: []string{"10.96.0.10", "fd00:96::10"}, ports: []client.Port{tcp("http", 80, 8080)},
			eps: []ep{{ip: "10.244.1.5"}, {ip: "10.244.2.6", remote: true}, {ip: "fd00:244:1::5"}}},
		{name: "dns", clusterIPs: []string{"10.96.0.53"}, ports: []client.Port{udp("dns", 53, 5353), tcp("dns-tcp", 53, 5353)},
			eps: []ep{{ip: "10.244.1.7"}, {ip: "10.244.2.7", remote: true}, {ip: "10.244.3.7", remote: true}}},
		{name: "np", typ: client.NodePort, clusterIPs: []string{"10.96.0.20"}, ports: []client.Port{withNodePort(tcp("", 80, 8080), 30080)},
			eps: []ep{{ip: "10.244.1.8"}}},
		{name: "lb-local", typ: client.LoadBalancer, clusterIPs: []string{"10.96.0.30"}, lbIPs: []string{"192.0.2.10"},
			ranges: []string{"203.0.113.0/24", "192.168.50.0/24"}, eLocal: true, hcNodePort: 32000,
			ports: []client.Port{withNodePort(tcp("https", 443, 8443), 30443)},
			eps:   []ep{{ip: "10.244.1.9"}, {ip: "10.244.2.9", remote: true}}},
		{name: "ext", clusterIPs: []string{"10.96.0.40"}, externalIPs: []string{"198.51.100.7"}, ports: []client.Port{tcp("", 8000, 8000)},
			eps: []ep{{ip: "10.244.2.10", remote: true}}},
		{name: "aff", clusterIPs: []string{"10.96.0.50"}, affinity: 10800, ports: []client.Port{tcp("", 80, 80)},
			eps: []ep{{ip: "10.244.1.11"}, {ip: "10.244.2.11", remote: true}}},
		{name: "noep", typ: client.NodePort, clusterIPs: []string{"10.96.0.60"}, externalIPs: []string{"198.51.100.8"},
			ports: []client.Port{withNodePort(tcp("", 80, 80), 30060)}},
		{name: "itp-local", clusterIPs: []string{"10.96.0.70"}, iLocal: true, ports: []client.Port{tcp("", 80, 80)},
			eps: []ep{{ip: "10.244.2.12", remote: true}}},
		{name: "etp-nolocal", typ: client.NodePort, clusterIPs: []string{"10.96.0.75"}, eLocal: true,
			ports: []client.Port{withNodePort(tcp("", 80, 80), 30075)}, eps: []ep{{ip: "10.244.2.13", remote: true}}},
		{name: "term", clusterIPs: []string{"10.96.0.80"}, ports: []client.Port{tcp("", 80, 80)},
			eps: []ep{{ip: "10.244.1.14", notReady: true, terminating: true}, {ip: "10.244.2.14", notReady: true}}},
		{name: "sctp", clusterIPs: []string{"10.96.0.90"}, ports: []client.Port{{Protocol: client.SCTP, Port: 9000, TargetPort: 9000}},
			eps: []ep{{ip: "10.244.1.15"}}},
	}
}
