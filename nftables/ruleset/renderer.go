package ruleset

import (
	"errors"
	"net/netip"

	"github.com/proxysinks/proxysinks/client"
)

// Renderer renders snapshot after snapshot: a service whose content is the
// same as at the previous render (the same *client.ServiceEndpoints, as
// snapshots share unchanged services, or an equal one) is not rendered
// again, its chains, sets and elements are reused. Only the assembly
// (sorting chains and elements) costs in proportion to the cluster. A
// Renderer is not safe for concurrent use.
type Renderer struct {
	cfg  Config
	mark string
	fams [2]*famState // IPv4, IPv6: the previous render's
}

// NewRenderer returns a Renderer for the configuration, or the
// configuration's error.
func NewRenderer(c Config) (*Renderer, error) {
	r := &Renderer{}
	if err := r.SetConfig(c); err != nil {
		return nil, err
	}
	return r, nil
}

// SetConfig changes the configuration (a NodePort address or the
// local-traffic detection changed): the next render renders every
// service. On error the configuration is left as it was.
func (r *Renderer) SetConfig(c Config) error {
	mark, err := c.mark()
	if err != nil {
		return err
	}
	r.cfg, r.mark, r.fams = c, mark, [2]*famState{}
	return nil
}

// Render renders both families' tables for the snapshot, as the package's
// Render does.
func (r *Renderer) Render(s *client.Snapshot) (v4, v6 *Ruleset, err error) {
	v4, err = r.RenderFamily(s, false)
	v6, err6 := r.RenderFamily(s, true)
	return v4, v6, errors.Join(err, err6)
}

// RenderFamily renders one family's table (IPv6 when v6), as the
// package's RenderFamily does; each family keeps its own state.
func (r *Renderer) RenderFamily(s *client.Snapshot, v6 bool) (*Ruleset, error) {
	i := famIndex(v6)
	st, _, err := renderFamily(s, &r.cfg, r.mark, v6, r.fams[i], false)
	r.fams[i] = st
	return r.Ruleset(v6), err
}

// RenderDelta renders one family's table (IPv6 when v6) like
// RenderFamily, and returns what changed in it since the family's
// previous render instead of the ruleset (Ruleset returns that). The
// Delta is nil when the Renderer cannot tell the change: the family's
// first render, a configuration or service CIDR change, or a name or key
// that a changed service shares with another service (the ruleset keeps
// the first one, in service order). The family's first RenderDelta also
// counts every name and key; the later ones cost in proportion to the
// services that changed.
func (r *Renderer) RenderDelta(s *client.Snapshot, v6 bool) (*Delta, error) {
	i := famIndex(v6)
	st, d, err := renderFamily(s, &r.cfg, r.mark, v6, r.fams[i], true)
	r.fams[i] = st
	return d, err
}

// Ruleset assembles the ruleset of the family's last render (nil before
// the first): chains and sets sorted by name, elements by key. It costs
// in proportion to the ruleset; the result shares nothing that a later
// render changes.
func (r *Renderer) Ruleset(v6 bool) *Ruleset {
	st := r.fams[famIndex(v6)]
	if st == nil {
		return nil
	}
	return newRenderer(&r.cfg, r.mark, v6, st.cidrs).finish(st)
}

func famIndex(v6 bool) int {
	if v6 {
		return 1
	}
	return 0
}

// famState is what one family's render leaves for the next: each
// service's output, in service order, the service CIDRs the base table
// was rendered with, and (once a Delta was asked for) how many services
// contribute each name and key.
type famState struct {
	svcs   []*svcOut
	cidrs  []netip.Prefix
	counts *keyCounts
}

// svcOut is one service's output: its chains, affinity sets and elements
// of the shared sets, and its render error. It is never changed once
// rendered (a changed service gets a new one).
type svcOut struct {
	se       *client.ServiceEndpoints
	chains   []Chain
	affinity []Set
	elems    [elCount][]Element
	err      error
}

// render renders a service into a new svcOut.
func (r *renderer) render(se *client.ServiceEndpoints) *svcOut {
	c0, a0 := len(r.chains), len(r.affinity)
	var e0 [elCount]int
	for i := range r.elems {
		e0[i] = len(r.elems[i])
	}
	err := r.service(se)
	out := &svcOut{se: se, err: err, chains: r.chains[c0:len(r.chains):len(r.chains)], affinity: r.affinity[a0:len(r.affinity):len(r.affinity)]}
	for i := range r.elems {
		out.elems[i] = r.elems[i][e0[i]:len(r.elems[i]):len(r.elems[i])]
	}
	return out
}
