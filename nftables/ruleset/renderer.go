package ruleset

import (
	"errors"

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
	v4, r.fams[0], err = renderFamily(s, &r.cfg, r.mark, false, r.fams[0])
	var err6 error
	v6, r.fams[1], err6 = renderFamily(s, &r.cfg, r.mark, true, r.fams[1])
	return v4, v6, errors.Join(err, err6)
}

// RenderFamily renders one family's table (IPv6 when v6), as the
// package's RenderFamily does; each family keeps its own state.
func (r *Renderer) RenderFamily(s *client.Snapshot, v6 bool) (*Ruleset, error) {
	i := 0
	if v6 {
		i = 1
	}
	rs, st, err := renderFamily(s, &r.cfg, r.mark, v6, r.fams[i])
	r.fams[i] = st
	return rs, err
}

// famState is what one family's render leaves for the next: the services'
// chains, affinity sets and elements in service order, and where each
// service's are.
type famState struct {
	chains   []Chain
	affinity []Set
	elems    [elCount][]Element
	svcs     []svcSpans
}

// span is a range of one of famState's lists.
type span struct{ from, to int }

// svcSpans locates one service's output, and keeps its error.
type svcSpans struct {
	se               *client.ServiceEndpoints
	chains, affinity span
	elems            [elCount]span
	err              error
}

// render renders a service and records where its output is.
func (r *renderer) render(se *client.ServiceEndpoints) error {
	sp := r.mark0(se)
	err := r.service(se)
	r.mark1(&sp, err)
	return err
}

// reuse copies a service's output from the previous render.
func (r *renderer) reuse(prev *famState, old *svcSpans, se *client.ServiceEndpoints) error {
	sp := r.mark0(se)
	r.chains = append(r.chains, prev.chains[old.chains.from:old.chains.to]...)
	r.affinity = append(r.affinity, prev.affinity[old.affinity.from:old.affinity.to]...)
	for i := range r.elems {
		r.elems[i] = append(r.elems[i], prev.elems[i][old.elems[i].from:old.elems[i].to]...)
	}
	r.mark1(&sp, old.err)
	return old.err
}

// mark0 starts a service's spans at the lists' ends.
func (r *renderer) mark0(se *client.ServiceEndpoints) svcSpans {
	sp := svcSpans{se: se, chains: span{from: len(r.chains)}, affinity: span{from: len(r.affinity)}}
	for i := range r.elems {
		sp.elems[i].from = len(r.elems[i])
	}
	return sp
}

// mark1 ends a service's spans at the lists' ends and records them.
func (r *renderer) mark1(sp *svcSpans, err error) {
	sp.chains.to, sp.affinity.to, sp.err = len(r.chains), len(r.affinity), err
	for i := range r.elems {
		sp.elems[i].to = len(r.elems[i])
	}
	r.svcs = append(r.svcs, *sp)
}

// state returns what this render leaves for the next.
func (r *renderer) state() *famState {
	return &famState{chains: r.chains, affinity: r.affinity, elems: r.elems, svcs: r.svcs}
}
