package ruleset

import (
	"cmp"
	"errors"
	"net/netip"
	"slices"

	"github.com/proxysinks/proxysinks/client"
)

// Render renders kube-proxy v1.37.2's nftables-mode ruleset for the
// snapshot: the ip and ip6 kube-proxy tables, with kube-proxy's feature
// gates at their defaults. The service CIDRs of cluster-ips-check are the
// snapshot's (the sink asks for them with client.Needs.ServiceCIDRs). A
// service port that cannot be rendered (unknown protocol, port out of
// range) is left out and named in the error; the rest is rendered.
func Render(s *client.Snapshot, c Config) (v4, v6 *Ruleset, err error) {
	v4, err4 := RenderFamily(s, &c, false)
	v6, err6 := RenderFamily(s, &c, true)
	if v4 == nil || v6 == nil {
		return nil, nil, errors.Join(err4, err6)
	}
	return v4, v6, errors.Join(err4, err6)
}

// RenderFamily renders one family's table (IPv6 when v6). It returns nil
// only on a configuration error; other errors name the service ports
// left out.
func RenderFamily(s *client.Snapshot, c *Config, v6 bool) (*Ruleset, error) {
	mark, err := c.mark()
	if err != nil {
		return nil, err
	}
	r := &renderer{cfg: c, fam: c.family(v6), ft: newFamText(v6), mark: mark, masq: "mark set mark or " + mark, cidrs: s.ServiceCIDRs}
	r.presize(s)
	var errs []error
	for se := range s.All() {
		if err := r.service(se); err != nil {
			errs = append(errs, err)
		}
	}
	return r.finish(), errors.Join(errs...)
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

	// scratch: the current port's endpoints and its lists of them
	eps                   []endpoint
	cluster, local, reach []*endpoint
	buf                   []byte
}

// presize sizes the renderer's lists for the snapshot, from its number of
// service ports: most ports have a cluster chain and a cluster IP element,
// a service one cluster-ips element.
func (r *renderer) presize(s *client.Snapshot) {
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
// first of equal keys kept, in snapshot order).
func (r *renderer) finish() *Ruleset {
	base, sets := r.baseTable()
	for _, c := range base {
		r.chains = append(r.chains, *c)
	}
	// Sorted by index: a Chain is too large to move around.
	order := make([]int32, len(r.chains))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Compare(r.chains[a].Name, r.chains[b].Name) })
	chains := make([]Chain, 0, len(order))
	for _, i := range order {
		if n := len(chains); n == 0 || chains[n-1].Name != r.chains[i].Name {
			chains = append(chains, r.chains[i])
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

// sortElements sorts elements by key, keeping the first of equal keys.
func sortElements(els []Element) []Element {
	slices.SortStableFunc(els, func(a, b Element) int { return cmp.Compare(a.Key, b.Key) })
	return slices.CompactFunc(els, func(a, b Element) bool { return a.Key == b.Key })
}
