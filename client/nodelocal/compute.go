package nodelocal

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/proxysinks/proxysinks/client"
)

// Node is what the node-local rules need to know about this node.
type Node struct {
	// Name is this node's name, as EndpointSlices give it in nodeName.
	Name string
	// Zone is this node's topology.kubernetes.io/zone label, if any.
	Zone string
}

// NodeFrom returns the Node facts of a Node object.
func NodeFrom(n *corev1.Node) Node {
	return Node{Name: n.Name, Zone: n.Labels[LabelTopologyZone]}
}

// Compute applies the node-local rules to a service and its EndpointSlices
// (in any order) and returns what this node must serve for it.
//
// Endpoints of all slices are merged by key: a dual-stack endpoint gets both
// addresses, an endpoint listed in two slices of the same family is kept
// once (preferring a ready copy, then the first slice by name), and an
// address claimed by two keys is kept on the first. Each endpoint's Internal
// and External flags then follow kube-proxy's rules:
//
//   - cluster endpoints are the ready endpoints, narrowed by topology hints
//     when every ready endpoint has hints and some hint names this node
//     (node hints) or this node's zone (zone hints); when no endpoint is
//     ready, the serving terminating endpoints;
//   - local endpoints are the ready endpoints on this node or, when there are
//     none, the serving terminating endpoints on this node;
//   - Internal marks the local endpoints when internalTrafficPolicy is Local,
//     else the cluster endpoints; External does the same with
//     externalTrafficPolicy.
func Compute(svc *client.Service, sl []*Slice, node Node) *client.ServiceEndpoints {
	sorted := slices.Clone(sl)
	slices.SortFunc(sorted, func(a, b *Slice) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), boolCmp(a.IPv6, b.IPv6))
	})
	type merged struct {
		ep       *client.Endpoint
		src      *SliceEndpoint // the copy whose conditions and hints are used
		families [2]bool
	}
	byKey := make(map[client.EndpointKey]*merged)
	owner := make(map[[16]byte]client.EndpointKey)
	var order []*merged
	for _, s := range sorted {
		for i := range s.Endpoints {
			se := &s.Endpoints[i]
			fam := 0
			if s.IPv6 {
				fam = 1
			}
			if k, ok := owner[se.Addr.As16()]; ok && k != se.Key {
				continue // the address belongs to another endpoint
			}
			m := byKey[se.Key]
			if m == nil {
				m = &merged{ep: &client.Endpoint{Key: se.Key}, src: se}
				byKey[se.Key] = m
				order = append(order, m)
			} else if se.Ready && !m.src.Ready {
				m.src = se
			}
			if !m.families[fam] {
				m.families[fam] = true
				m.ep.IPs.Add(se.Addr)
				owner[se.Addr.As16()] = se.Key
			} else if m.src == se {
				// A ready duplicate of the same family replaces the address.
				if fam == 1 {
					m.ep.IPs.V6[0] = se.Addr
				} else {
					m.ep.IPs.V4[0] = se.Addr
				}
				owner[se.Addr.As16()] = se.Key
			}
			for _, p := range s.Ports {
				if !slices.ContainsFunc(m.ep.PortOverrides, func(o client.PortOverride) bool {
					return o.Name == p.Name && o.Protocol == p.Protocol
				}) {
					m.ep.PortOverrides = append(m.ep.PortOverrides, p)
				}
			}
		}
	}

	slices.SortFunc(order, func(a, b *merged) int { return cmp.Compare(a.ep.Key, b.ep.Key) })
	eps := make([]*client.Endpoint, len(order))
	srcs := make([]*SliceEndpoint, len(order))
	for i, m := range order {
		e, s := m.ep, m.src
		e.Hostname, e.NodeName, e.Zone = s.Hostname, s.NodeName, s.Zone
		e.Ready, e.Serving, e.Terminating = s.Ready, s.Serving, s.Terminating
		e.Local = node.Name != "" && s.NodeName == node.Name
		slices.SortFunc(e.PortOverrides, comparePorts)
		eps[i], srcs[i] = e, s
	}
	categorize(svc, eps, srcs, node)
	return &client.ServiceEndpoints{Service: svc, Endpoints: eps}
}

// categorize sets Internal and External on every endpoint.
func categorize(svc *client.Service, eps []*client.Endpoint, srcs []*SliceEndpoint, node Node) {
	externalLocal := svc.ExternalTrafficLocal && svc.ExternallyAccessible()
	usesCluster := !svc.InternalTrafficLocal || (svc.ExternallyAccessible() && !externalLocal)
	usesLocal := svc.InternalTrafficLocal || externalLocal

	flags := make([]uint8, len(eps)) // bit 0: cluster endpoint, bit 1: local endpoint
	if usesCluster {
		inTopology := topologyFilter(eps, srcs, node)
		n := 0
		for i, e := range eps {
			if e.Ready && inTopology(i) {
				flags[i] |= 1
				n++
			}
		}
		if n == 0 {
			for i, e := range eps {
				if e.Serving && e.Terminating {
					flags[i] |= 1
				}
			}
		}
	}
	if usesLocal {
		n := 0
		for i, e := range eps {
			if e.Ready && e.Local {
				flags[i] |= 2
				n++
			}
		}
		if n == 0 {
			for i, e := range eps {
				if e.Serving && e.Terminating && e.Local {
					flags[i] |= 2
				}
			}
		}
	}
	internal, external := uint8(1), uint8(1)
	if svc.InternalTrafficLocal {
		internal = 2
	}
	if externalLocal {
		external = 2
	} else if !svc.ExternallyAccessible() {
		external = 0
	}
	for i, e := range eps {
		e.Internal = flags[i]&internal != 0
		e.External = flags[i]&external != 0
	}
}

// topologyFilter returns which ready endpoints topology hints allow for this
// node: node hints first, then zone hints; every endpoint when hints do not
// apply (some ready endpoint has none, or none names this node or zone).
func topologyFilter(eps []*client.Endpoint, srcs []*SliceEndpoint, node Node) func(int) bool {
	allNode, anyNode := true, false
	allZone, anyZone := true, false
	for i, e := range eps {
		if !e.Ready {
			continue
		}
		s := srcs[i]
		if len(s.NodeHints) == 0 {
			allNode = false
		} else if node.Name != "" && slices.Contains(s.NodeHints, node.Name) {
			anyNode = true
		}
		if len(s.ZoneHints) == 0 {
			allZone = false
		} else if node.Zone != "" && slices.Contains(s.ZoneHints, node.Zone) {
			anyZone = true
		}
	}
	switch {
	case allNode && anyNode:
		return func(i int) bool { return slices.Contains(srcs[i].NodeHints, node.Name) }
	case allZone && anyZone:
		return func(i int) bool { return slices.Contains(srcs[i].ZoneHints, node.Zone) }
	}
	return func(int) bool { return true }
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
