package ruleset

import (
	"cmp"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/client"
)

// Render renders kube-proxy v1.37.2's nftables-mode ruleset for the
// snapshot: the ip and ip6 kube-proxy tables, with kube-proxy's feature
// gates at their defaults. The service CIDRs of cluster-ips-check are the
// snapshot's (the sink asks for them with client.Needs.ServiceCIDRs). A
// service port that cannot be rendered (unknown protocol, port out of
// range) is left out and named in the error; the rest is rendered. Only a
// configuration error returns no rulesets. A Renderer renders a sequence
// of snapshots at the cost of their changes. Rulesets share strings and
// slices with each other (and with a Renderer's state): they are
// read-only.
func Render(s *client.Snapshot, c Config) (v4, v6 *Ruleset, err error) {
	r, err := NewRenderer(c)
	if err != nil {
		return nil, nil, err
	}
	return r.Render(s)
}

// RenderFamily renders one family's table (IPv6 when v6), as Render does.
func RenderFamily(s *client.Snapshot, c *Config, v6 bool) (*Ruleset, error) {
	mark, err := c.mark()
	if err != nil {
		return nil, err
	}
	rs, _, err := renderFamily(s, c, mark, v6, nil)
	return rs, err
}

// renderFamily renders one family, reusing from prev (the state of the
// previous render, nil for none) the output of every service whose
// content did not change, and returns the state of this render.
func renderFamily(s *client.Snapshot, c *Config, mark string, v6 bool, prev *famState) (*Ruleset, *famState, error) {
	r := &renderer{cfg: c, fam: c.family(v6), ft: newFamText(v6), mark: mark, masq: "mark set mark or " + mark, cidrs: s.ServiceCIDRs}
	r.presize(s, prev)
	var errs []error
	var old []svcSpans
	if prev != nil {
		old = prev.svcs
	}
	for se := range s.All() {
		// Both lists are in key order: skip the services gone since.
		key := se.Service.Key()
		for len(old) > 0 && old[0].se.Service.Key().Compare(key) < 0 {
			old = old[1:]
		}
		var err error
		if len(old) > 0 && (old[0].se == se || old[0].se.Equal(se)) {
			err = r.reuse(prev, &old[0], se)
		} else {
			err = r.render(se)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return r.finish(), r.state(), errors.Join(errs...)
}

// The sets and maps whose elements services add, in renderer.elems.
const (
	elClusterIPs = iota
	elServiceIPs
	elServiceNodePorts
	elNoEndpointServices
	elNoEndpointNodePorts
	elFirewallIPs
	elHairpin
	elCount
)

// elemSets names the sets of renderer.elems.
var elemSets = [elCount]string{setClusterIPs, mapServiceIPs, mapServiceNodePorts, mapNoEndpointServices, mapNoEndpointNodePort, mapFirewallIPs, setHairpin}

// renderer renders one family.
type renderer struct {
	cfg   *Config
	fam   *Family
	ft    famText
	mark  string // the masquerade mark ("0x00004000")
	masq  string // "mark set mark or <mark>"
	cidrs []netip.Prefix

	chains   []Chain // the service ports' and endpoints' chains
	affinity []Set   // the endpoints' affinity sets
	elems    [elCount][]Element

	// svcs locate each service's output in the lists above
	svcs []svcSpans

	// scratch: the current port's endpoints and its lists of them
	eps                   []endpoint
	cluster, local, reach []*endpoint
	buf                   []byte
	epText                []byte // the current port's endpoint strings
}

// presize sizes the renderer's lists for the snapshot, from its number of
// service ports: most ports have a cluster chain and a cluster IP element,
// a service one cluster-ips element.
func (r *renderer) presize(s *client.Snapshot, prev *famState) {
	r.svcs = make([]svcSpans, 0, s.Len())
	if prev != nil {
		// The same cluster, give or take the changes.
		r.chains = make([]Chain, 0, len(prev.chains)+len(prev.chains)/8)
		r.affinity = make([]Set, 0, len(prev.affinity))
		for i := range r.elems {
			r.elems[i] = make([]Element, 0, len(prev.elems[i])+len(prev.elems[i])/8)
		}
		return
	}
	ports := 0
	for se := range s.All() {
		if len(se.Service.ClusterIPs.Family(r.ft.v6)) > 0 {
			ports += len(se.Service.Ports)
		}
	}
	r.chains = make([]Chain, 0, ports+ports/2)
	r.elems[elClusterIPs] = make([]Element, 0, ports)
	r.elems[elServiceIPs] = make([]Element, 0, ports+ports/4)
	r.elems[elHairpin] = make([]Element, 0, ports)
}

// elem adds an element to one of the fixed sets.
func (r *renderer) elem(set int, key, value, comment string) {
	r.elems[set] = append(r.elems[set], Element{Key: key, Value: value, Comment: comment})
}

// finish assembles the ruleset: the base table with the services' chains,
// sets and elements, chains and sets sorted by name, elements by key (the
// first of equal keys kept, in snapshot order). The renderer's lists stay
// in service order (the next render reuses them).
func (r *renderer) finish() *Ruleset {
	base, sets := r.baseTable()
	all := make([]*Chain, 0, len(r.chains)+len(base))
	for i := range r.chains {
		all = append(all, &r.chains[i])
	}
	for _, name := range slices.Sorted(maps.Keys(base)) {
		all = append(all, base[name])
	}
	chains := make([]Chain, 0, len(all))
	for _, i := range sortedOrder(len(all), func(i int) string { return all[i].Name }) {
		if n := len(chains); n == 0 || chains[n-1].Name != all[i].Name {
			chains = append(chains, *all[i])
		}
	}
	for i := range sets {
		for e, name := range elemSets {
			if sets[i].Name == name {
				sets[i].Elements = r.elems[e]
			}
		}
		sets[i].Elements = sortElements(sets[i].Elements)
	}
	sets = append(sets, r.affinity...)
	slices.SortFunc(sets, func(a, b Set) int { return cmp.Compare(a.Name, b.Name) })
	sets = slices.CompactFunc(sets, func(a, b Set) bool { return a.Name == b.Name })
	return &Ruleset{Family: r.ft.family, Table: TableName, Comment: TableComment, Chains: chains, Sets: sets}
}

// sortElements returns the elements sorted by key, the first of equal keys
// kept, in a new slice (nil for none); els is left as it was.
func sortElements(els []Element) []Element {
	if len(els) == 0 {
		return nil
	}
	out := make([]Element, 0, len(els))
	for _, i := range sortedOrder(len(els), func(i int) string { return els[i].Key }) {
		if n := len(out); n == 0 || out[n-1].Key != els[i].Key {
			out = append(out, els[i])
		}
	}
	return out
}

// sortedOrder returns the indexes 0..n-1 ordered by key, equal keys by
// index (a stable order, sorting indexes rather than moving values).
func sortedOrder(n int, key func(int) string) []int32 {
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := strings.Compare(key(int(a)), key(int(b))); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order
}
