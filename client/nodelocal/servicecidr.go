package nodelocal

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/proxysinks/proxysinks/client"
)

// ParsedServiceCIDR is a ServiceCIDR object after validation
// (ParseServiceCIDRObject): what State.SetParsedServiceCIDR takes.
type ParsedServiceCIDR struct {
	Name string
	// CIDRs are the object's valid spec.cidrs.
	CIDRs []netip.Prefix
	// Err names the CIDRs that do not parse (left out), or is nil.
	Err error
}

// ParseServiceCIDRObject validates a networking.k8s.io/v1 ServiceCIDR. A
// CIDR that does not parse is left out and named by Err; the others are
// kept.
func ParseServiceCIDRObject(o *networkingv1.ServiceCIDR) ParsedServiceCIDR {
	p := ParsedServiceCIDR{Name: o.Name}
	var bad []fieldError
	for i, c := range o.Spec.CIDRs {
		pfx, _, err := parseCIDR(strings.TrimSpace(c))
		if err != nil {
			bad = append(bad, fieldError{fmt.Sprintf("spec.cidrs[%d]", i), err})
			continue
		}
		p.CIDRs = append(p.CIDRs, pfx)
	}
	if len(bad) > 0 {
		field, err := fieldsError("spec.cidrs", bad)
		p.Err = &client.ObjectError{Kind: "ServiceCIDR", Name: o.Name, Field: field, Err: fmt.Errorf("%w (skipped; the other CIDRs are kept)", err)}
	}
	return p
}

// SetServiceCIDR adds or updates a ServiceCIDR object; it is ignored unless
// Config.Needs.ServiceCIDRs asks for them. It returns the error naming
// the CIDRs left out.
func (st *State) SetServiceCIDR(o *networkingv1.ServiceCIDR) error {
	if !st.cfg.Needs.ServiceCIDRs {
		return nil
	}
	p := ParseServiceCIDRObject(o)
	return st.SetParsedServiceCIDR(&p)
}

// SetParsedServiceCIDR is SetServiceCIDR for an object validated beforehand
// (ParseServiceCIDRObject).
func (st *State) SetParsedServiceCIDR(p *ParsedServiceCIDR) error {
	if !st.cfg.Needs.ServiceCIDRs {
		return nil
	}
	st.setInvalid(objRef{"ServiceCIDR", "", p.Name}, p.Err)
	if old, ok := st.facts.cidrObjects[p.Name]; ok && slices.Equal(old, p.CIDRs) {
		return p.Err
	}
	if st.facts.cidrObjects == nil {
		st.facts.cidrObjects = map[string][]netip.Prefix{}
	}
	st.facts.cidrObjects[p.Name] = p.CIDRs
	st.mergeServiceCIDRs()
	return p.Err
}

// DeleteServiceCIDR removes a ServiceCIDR object.
func (st *State) DeleteServiceCIDR(name string) {
	st.setInvalid(objRef{"ServiceCIDR", "", name}, nil)
	if _, ok := st.facts.cidrObjects[name]; !ok {
		return
	}
	delete(st.facts.cidrObjects, name)
	st.mergeServiceCIDRs()
}

// mergeServiceCIDRs recomputes the sorted, deduplicated prefixes of every
// ServiceCIDR object; a new list makes the next snapshot's.
func (st *State) mergeServiceCIDRs() {
	var all []netip.Prefix
	for _, cidrs := range st.facts.cidrObjects {
		all = append(all, cidrs...)
	}
	slices.SortFunc(all, netip.Prefix.Compare)
	all = slices.Compact(all)
	if slices.Equal(all, st.facts.cidrs) {
		return
	}
	st.facts.cidrs = all
	st.facts.dirty = true
}
