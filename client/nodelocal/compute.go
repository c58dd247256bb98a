package nodelocal

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/proxysinks/proxysinks/client"
)

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
//     externalTrafficPolicy;
//   - Cluster marks the cluster endpoints, whatever the policies.
func Compute(svc *client.Service, sl []*Slice, node Node) *client.ServiceEndpoints {
	return compute(svc, sl, node, &scratch{}, false)
}

// merged is the bookkeeping of one endpoint while slices are merged.
type merged struct {
	src      *SliceEndpoint // the copy whose conditions and hints are used
	families [2]bool
	ports    bool // PortOverrides is our own copy (may be appended to)
}

// scratch holds compute's temporary slices, reused across services by a
// State so that only the result is allocated.
type scratch struct {
	info       []merged
	smallAddrs []netip.Addr
	smallOwner []int
	order      []int
	srcs       []*SliceEndpoint
	flags      []uint8
	eps        []client.Endpoint
	addrs      []netip.Addr
}

// release drops the pointers the scratch holds, so that it keeps no slice
// alive.
func (sc *scratch) release() {
	clear(sc.info[:cap(sc.info)])
	clear(sc.srcs[:cap(sc.srcs)])
	clear(sc.eps[:cap(sc.eps)])
}

// compute is Compute. With share (a State computing for sinks), a service
// with one slice whose endpoints need no merging gets the slice's own
// Endpoints (SliceEndpoint.Endpoint) instead of copies: their flags are
// set on the first computation, and later computations reuse them when
// the flags are unchanged. This halves the memory a large cluster takes.
func compute(svc *client.Service, sl []*Slice, node Node, sc *scratch, share bool) *client.ServiceEndpoints {
	defer sc.release()
	sorted := sl
	if !slices.IsSortedFunc(sl, compareSlices) {
		sorted = slices.Clone(sl)
		slices.SortFunc(sorted, compareSlices)
	}
	total := 0
	for _, s := range sorted {
		total += len(s.Endpoints)
	}
	share = share && len(sorted) == 1
	// One allocation each for the endpoints and their addresses, whatever
	// the number of endpoints (none when sharing); the bookkeeping reuses
	// the scratch.
	var eps []client.Endpoint
	var addrs []netip.Addr
	if share {
		eps, addrs = slices.Grow(sc.eps[:0], total), slices.Grow(sc.addrs[:0], total)
	} else {
		eps, addrs = make([]client.Endpoint, 0, total), make([]netip.Addr, 0, total)
	}
	info := slices.Grow(sc.info[:0], total)
	idx := newIndex(total, sc)
	for _, s := range sorted {
		fam := 0
		if s.IPv6 {
			fam = 1
		}
		for i := range s.Endpoints {
			se := &s.Endpoints[i]
			addr := se.Addr()
			if j, ok := idx.byAddr(addr, eps); ok && eps[j].Key != se.Key {
				continue // the address belongs to another endpoint
			}
			j, ok := idx.byKey(se.Key, eps)
			if !ok {
				j = len(eps)
				eps = append(eps, client.Endpoint{Key: se.Key, PortOverrides: s.Ports})
				info = append(info, merged{src: se})
				idx.add(se.Key, j)
			} else {
				if se.Ready && !info[j].src.Ready {
					info[j].src = se
				}
				mergePorts(&eps[j], &info[j].ports, s.Ports)
			}
			m, e := &info[j], &eps[j]
			list := &e.IPs.V4
			if fam == 1 {
				list = &e.IPs.V6
			}
			switch {
			case !m.families[fam]:
				m.families[fam] = true
				addrs = append(addrs, addr)
				*list = addrs[len(addrs)-1 : len(addrs) : len(addrs)]
				idx.addAddr(addr, j)
			case m.src == se:
				// A ready duplicate of the same family replaces the address.
				(*list)[0] = addr
				idx.addAddr(addr, j)
			}
		}
	}

	sc.info = info
	if idx.keys == nil {
		sc.smallAddrs, sc.smallOwner = idx.smallAddrs, idx.smallOwner
	}
	if share {
		sc.eps, sc.addrs = eps, addrs
		if len(eps) != total {
			// Endpoints were merged or dropped: the result needs its own.
			sc.release()
			return compute(svc, sl, node, sc, false)
		}
	}
	out, srcs := inKeyOrder(eps, info, node, sc)
	categorize(svc, out, srcs, node, sc)
	if share {
		shareEndpoints(sorted[0], out, srcs)
	}
	return &client.ServiceEndpoints{Service: svc, Endpoints: out}
}

// inKeyOrder returns the merged endpoints in key order, each with the
// facts of the copy it was taken from (info[i].src) and its Local flag,
// and those copies in the same order (in sc.srcs).
func inKeyOrder(eps []client.Endpoint, info []merged, node Node, sc *scratch) ([]*client.Endpoint, []*SliceEndpoint) {
	out := make([]*client.Endpoint, len(eps))
	srcs := slices.Grow(sc.srcs[:0], len(eps))[:len(eps)]
	sc.srcs = srcs
	var order []int // nil: eps is already in key order
	if !slices.IsSortedFunc(eps, func(a, b client.Endpoint) int { return cmp.Compare(a.Key, b.Key) }) {
		order = slices.Grow(sc.order[:0], len(eps))[:len(eps)]
		sc.order = order
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return cmp.Compare(eps[a].Key, eps[b].Key) })
	}
	for i := range eps {
		j := i
		if order != nil {
			j = order[i]
		}
		e, s := &eps[j], info[j].src
		e.Hostname, e.NodeName, e.Zone = s.Hostname, s.NodeName, s.Zone
		e.Ready, e.Serving, e.Terminating = s.Ready, s.Serving, s.Terminating
		e.Local = node.Name != "" && s.NodeName == node.Name
		out[i], srcs[i] = e, s
	}
	return out, srcs
}

// shareEndpoints points out (computed in the scratch, one endpoint per
// slice endpoint) at the slice's own Endpoints: it sets their flags if no
// sink has them yet, else uses those whose flags are unchanged and copies
// the others.
func shareEndpoints(s *Slice, out []*client.Endpoint, srcs []*SliceEndpoint) {
	fresh := 0
	for i, e := range out {
		src := &srcs[i].Endpoint
		if !s.shared {
			copyFlags(src, e)
		} else if !sameFlags(src, e) {
			fresh++
			continue
		}
		out[i] = src
	}
	s.shared = true
	if fresh == 0 {
		return
	}
	copies := make([]client.Endpoint, 0, fresh)
	for i, e := range out {
		if e == &srcs[i].Endpoint {
			continue
		}
		c := srcs[i].Endpoint // the slice's addresses and ports, shared
		copyFlags(&c, e)
		copies = append(copies, c)
		out[i] = &copies[len(copies)-1]
	}
}

// mergePorts adds the ports of another slice to an endpoint's overrides,
// copying the shared slice ports on first change.
func mergePorts(e *client.Endpoint, own *bool, ports []client.PortOverride) {
	for _, p := range ports {
		if slices.ContainsFunc(e.PortOverrides, func(o client.PortOverride) bool {
			return o.Name == p.Name && o.Protocol == p.Protocol
		}) {
			continue
		}
		if !*own {
			e.PortOverrides = slices.Clone(e.PortOverrides)
			*own = true
		}
		e.PortOverrides = append(e.PortOverrides, p)
		slices.SortFunc(e.PortOverrides, comparePorts)
	}
}

func compareSlices(a, b *Slice) int {
	return cmp.Or(cmp.Compare(a.Name, b.Name), boolCmp(a.IPv6, b.IPv6))
}

// index finds merged endpoints by key and by address: by a linear scan for
// the usual handful of endpoints, with maps past that.
type index struct {
	keys  map[client.EndpointKey]int
	addrs map[netip.Addr]int
	// small: addresses in the order added, with their endpoint.
	smallAddrs []netip.Addr
	smallOwner []int
}

const smallIndex = 32

func newIndex(n int, sc *scratch) index {
	if n > smallIndex {
		return index{keys: make(map[client.EndpointKey]int, n), addrs: make(map[netip.Addr]int, n)}
	}
	return index{smallAddrs: sc.smallAddrs[:0], smallOwner: sc.smallOwner[:0]}
}

func (x *index) byKey(k client.EndpointKey, eps []client.Endpoint) (int, bool) {
	if x.keys != nil {
		j, ok := x.keys[k]
		return j, ok
	}
	for j := range eps {
		if eps[j].Key == k {
			return j, true
		}
	}
	return 0, false
}

func (x *index) add(k client.EndpointKey, j int) {
	if x.keys != nil {
		x.keys[k] = j
	}
}

func (x *index) byAddr(a netip.Addr, _ []client.Endpoint) (int, bool) {
	if x.addrs != nil {
		j, ok := x.addrs[a]
		return j, ok
	}
	for i, b := range x.smallAddrs {
		if a == b {
			return x.smallOwner[i], true
		}
	}
	return 0, false
}

func (x *index) addAddr(a netip.Addr, j int) {
	if x.addrs != nil {
		x.addrs[a] = j
		return
	}
	x.smallAddrs = append(x.smallAddrs, a)
	x.smallOwner = append(x.smallOwner, j)
}

// copyFlags sets dst's node-local flags (what categorize computes) from src.
func copyFlags(dst, src *client.Endpoint) {
	dst.Local, dst.Internal, dst.External, dst.Cluster = src.Local, src.Internal, src.External, src.Cluster
}

// sameFlags reports whether a and b have the same node-local flags.
func sameFlags(a, b *client.Endpoint) bool {
	return a.Local == b.Local && a.Internal == b.Internal && a.External == b.External && a.Cluster == b.Cluster
}

// categorize sets Internal, External and Cluster on every endpoint.
func categorize(svc *client.Service, eps []*client.Endpoint, srcs []*SliceEndpoint, node Node, sc *scratch) {
	externalLocal := svc.ExternalTrafficLocal && svc.ExternallyAccessible()
	usesLocal := svc.InternalTrafficLocal || externalLocal

	flags := slices.Grow(sc.flags[:0], len(eps))[:len(eps)] // bit 0: cluster endpoint, bit 1: local endpoint
	clear(flags)
	sc.flags = flags
	// The cluster endpoints, whatever the policies (Cluster).
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
		e.Cluster = flags[i]&1 != 0
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
		if s.Hints == nil {
			allNode, allZone = false, false
			break
		}
		if len(s.Hints.Nodes) == 0 {
			allNode = false
		} else if node.Name != "" && slices.Contains(s.Hints.Nodes, node.Name) {
			anyNode = true
		}
		if len(s.Hints.Zones) == 0 {
			allZone = false
		} else if node.Zone != "" && slices.Contains(s.Hints.Zones, node.Zone) {
			anyZone = true
		}
	}
	switch {
	case allNode && anyNode:
		return func(i int) bool { return slices.Contains(srcs[i].NodeHints(), node.Name) }
	case allZone && anyZone:
		return func(i int) bool { return slices.Contains(srcs[i].ZoneHints(), node.Zone) }
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
