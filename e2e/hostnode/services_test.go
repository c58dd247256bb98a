package hostnode

import (
	"net/netip"
	"slices"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/nodelocal"
)

// svc is a test service; build applies the node-local rules to it
// (client/nodelocal, as the sources do) with node A as this node.
type svc struct {
	name     string
	typ      client.ServiceType
	ips      []string // cluster IPs
	ext      []string
	lb       []string
	ranges   []string
	ports    []client.Port // TargetPort is the pods' port
	affinity bool
	eLocal   bool
	iLocal   bool
	pods     []*pod
}

func (s svc) build() *client.ServiceEndpoints {
	if s.typ == "" {
		s.typ = client.ClusterIP
	}
	c := &client.Service{Namespace: "default", Name: s.name, Type: s.typ, Ports: s.ports, InternalTrafficLocal: s.iLocal}
	for _, a := range s.ips {
		c.ClusterIPs.Add(netip.MustParseAddr(a))
	}
	for _, a := range s.ext {
		c.ExternalIPs.Add(netip.MustParseAddr(a))
	}
	for _, a := range s.lb {
		c.LoadBalancerIPs.Add(netip.MustParseAddr(a))
	}
	for _, r := range s.ranges {
		c.LoadBalancerSourceRanges = append(c.LoadBalancerSourceRanges, netip.MustParsePrefix(r))
	}
	if s.affinity {
		c.SessionAffinity = &client.SessionAffinity{TimeoutSeconds: 600}
	}
	c.ExternalTrafficLocal = s.eLocal && c.ExternallyAccessible()
	var v4, v6 []nodelocal.SliceEndpoint
	for _, p := range s.pods {
		node := "node-a"
		if p.name == "pod2" {
			node = "node-b"
		}
		var overrides []client.PortOverride
		for _, sp := range s.ports {
			overrides = append(overrides, client.PortOverride{Name: sp.Name, Protocol: sp.Protocol, Port: sp.TargetPort})
		}
		slices.SortFunc(overrides, func(a, b client.PortOverride) int {
			if a.Name != b.Name {
				if a.Name < b.Name {
					return -1
				}
				return 1
			}
			if a.Protocol < b.Protocol {
				return -1
			}
			if a.Protocol > b.Protocol {
				return 1
			}
			return 0
		})
		e := client.Endpoint{Key: client.EndpointKey("Pod/default/" + p.name), NodeName: node, Ready: true, Serving: true, PortOverrides: overrides}
		e4 := e
		e4.IPs.Add(p.ip)
		v4 = append(v4, nodelocal.SliceEndpoint{Endpoint: e4})
		if p.ip6.IsValid() && len(c.ClusterIPs.V6) > 0 {
			e6 := e
			e6.IPs = client.IPs{}
			e6.IPs.Add(p.ip6)
			e6.PortOverrides = slices.Clone(overrides)
			v6 = append(v6, nodelocal.SliceEndpoint{Endpoint: e6})
		}
	}
	var sl []*nodelocal.Slice
	if len(v4) > 0 {
		sl = append(sl, &nodelocal.Slice{Namespace: "default", Name: s.name + "-4", Service: s.name, Endpoints: v4, Ports: slices.Clone(v4[0].PortOverrides)})
	}
	if len(v6) > 0 {
		sl = append(sl, &nodelocal.Slice{Namespace: "default", Name: s.name + "-6", Service: s.name, IPv6: true, Endpoints: v6, Ports: slices.Clone(v6[0].PortOverrides)})
	}
	return nodelocal.Compute(c, sl, nodelocal.Node{Name: "node-a"})
}

// state is a set of services as one snapshot after another.
type state struct {
	prev *client.Snapshot
}

// snapshot returns the snapshot of services with the changes since the
// previous one.
func (st *state) snapshot(svcs ...svc) *client.Snapshot {
	var ses []*client.ServiceEndpoints
	for _, s := range svcs {
		ses = append(ses, s.build())
	}
	slices.SortFunc(ses, func(a, b *client.ServiceEndpoints) int { return a.Service.Key().Compare(b.Service.Key()) })
	var ch []client.Change
	seen := map[client.ServiceKey]bool{}
	for _, se := range ses {
		k := se.Service.Key()
		seen[k] = true
		if st.prev == nil || !se.Equal(st.prev.Lookup(k)) {
			ch = append(ch, client.Change{Key: k, Service: se})
		}
	}
	if st.prev != nil {
		for se := range st.prev.All() {
			if k := se.Service.Key(); !seen[k] {
				ch = append(ch, client.Change{Key: k})
			}
		}
	}
	slices.SortFunc(ch, func(a, b client.Change) int { return a.Key.Compare(b.Key) })
	s := client.NewSnapshot(ses, ch)
	st.prev = s
	return s
}

func tcp(name string, port, target int) client.Port {
	return client.Port{Name: name, Protocol: client.TCP, Port: port, TargetPort: target}
}

func proto(p client.Protocol, name string, port, target int) client.Port {
	return client.Port{Name: name, Protocol: p, Port: port, TargetPort: target}
}

func nodePort(p client.Port, np int) client.Port { p.NodePort = np; return p }
