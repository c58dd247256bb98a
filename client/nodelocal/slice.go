package nodelocal

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/proxysinks/proxysinks/client"
)

// Slice is a validated EndpointSlice, before the node-local rules apply.
type Slice struct {
	Namespace string
	Name      string
	// Service is the name of the owning service (the
	// kubernetes.io/service-name label).
	Service string
	// IPv6 is true for an IPv6 slice, false for IPv4.
	IPv6 bool
	// Ports of the slice, in (name, protocol) order; ports without a number
	// are left out.
	Ports     []client.PortOverride
	Endpoints []SliceEndpoint
	// TriggerTime is the slice's endpoints.kubernetes.io/last-change-trigger-time
	// annotation: when the change this version of the slice reflects was
	// triggered (a pod or service change). It is zero when the annotation
	// is missing or is not an RFC 3339 time; it is not part of the slice's
	// content (SameContent ignores it).
	TriggerTime time.Time

	// shared is set once a State handed the endpoints to sinks: they may
	// no longer be modified.
	shared bool
}

// AnnotationTriggerTime is the EndpointSlice annotation in which the
// endpoint-slice controller records when the change the slice reflects was
// triggered (RFC 3339). Network programming latency is measured from it.
const AnnotationTriggerTime = "endpoints.kubernetes.io/last-change-trigger-time"

// SameContent reports whether s and o hold the same endpoints and ports
// (everything but TriggerTime and the endpoints' Local, Internal and
// External flags).
func (s *Slice) SameContent(o *Slice) bool {
	if s == o {
		return true
	}
	if s == nil || o == nil || s.Namespace != o.Namespace || s.Name != o.Name || s.Service != o.Service ||
		s.IPv6 != o.IPv6 || !slices.Equal(s.Ports, o.Ports) || len(s.Endpoints) != len(o.Endpoints) {
		return false
	}
	for i := range s.Endpoints {
		if !s.Endpoints[i].equal(&o.Endpoints[i]) {
			return false
		}
	}
	return true
}

// ServiceKey returns the key of the service owning the slice.
func (s *Slice) ServiceKey() client.ServiceKey {
	return client.ServiceKey{Namespace: s.Namespace, Name: s.Service}
}

// SliceEndpoint is one validated endpoint of a Slice.
type SliceEndpoint struct {
	// Endpoint is the endpoint as the slice gives it: Key, IPs (its one
	// address, the first of the API object's: the API says consumers use
	// only the first), Hostname, NodeName, Zone, the conditions, and the
	// slice's ports as PortOverrides. Its Local, Internal and External
	// flags are not the slice's: a State sets them when it hands this very
	// Endpoint to sinks (a service whose endpoints need no merging shares
	// them with its slice).
	client.Endpoint
	// Hints are the endpoint's topology hints, nil when it has none.
	Hints *Hints
}

// Addr returns the endpoint's address.
func (e *SliceEndpoint) Addr() netip.Addr {
	if len(e.IPs.V4) > 0 {
		return e.IPs.V4[0]
	}
	return e.IPs.V6[0]
}

// Hints are the topology hints of one endpoint.
type Hints struct {
	// Zones and Nodes are the zones and nodes the endpoint is meant for.
	Zones []string
	Nodes []string
}

// ZoneHints returns the zones the endpoint's hints name (nil when none).
func (e *SliceEndpoint) ZoneHints() []string {
	if e.Hints == nil {
		return nil
	}
	return e.Hints.Zones
}

// NodeHints returns the nodes the endpoint's hints name (nil when none).
func (e *SliceEndpoint) NodeHints() []string {
	if e.Hints == nil {
		return nil
	}
	return e.Hints.Nodes
}

func (e *SliceEndpoint) equal(o *SliceEndpoint) bool {
	return e.Key == o.Key && e.Addr() == o.Addr() && e.Hostname == o.Hostname && e.NodeName == o.NodeName &&
		e.Zone == o.Zone && e.Ready == o.Ready && e.Serving == o.Serving && e.Terminating == o.Terminating &&
		slices.Equal(e.ZoneHints(), o.ZoneHints()) && slices.Equal(e.NodeHints(), o.NodeHints())
}

// ParseSlice validates an EndpointSlice. It returns a nil slice and a nil
// error for slices a proxy ignores (addressType FQDN, or labelled
// service.kubernetes.io/headless: kube-proxy v1.37.2 watches slices
// without that label only), and a
// *client.ObjectError naming the first bad field for an invalid one. An
// endpoint without a usable address (none, invalid, of the other family,
// IPv4-mapped in an IPv6 slice) is skipped alone; legacy forms are
// repaired (ParseSliceObject returns both as Adjustments).
func ParseSlice(es *discoveryv1.EndpointSlice) (*Slice, error) {
	return parseSlice(es, nil)
}

func parseSlice(es *discoveryv1.EndpointSlice, adj *adjustments) (*Slice, error) {
	fail := func(err error) (*Slice, error) {
		fe := err.(fieldError)
		return nil, &client.ObjectError{Kind: "EndpointSlice", Namespace: es.Namespace, Name: es.Name, Field: fe.field, Err: fe.err}
	}
	if es.Name == "" {
		return fail(fieldError{"metadata.name", errors.New("missing")})
	}
	out := &Slice{Namespace: es.Namespace, Name: es.Name, Service: es.Labels[discoveryv1.LabelServiceName]}
	if out.Service == "" {
		return fail(fieldError{"metadata.labels[" + discoveryv1.LabelServiceName + "]", errors.New("missing: the slice belongs to no service")})
	}
	if _, ok := es.Labels[corev1.IsHeadlessService]; ok {
		return nil, nil
	}
	switch es.AddressType {
	case discoveryv1.AddressTypeIPv4:
	case discoveryv1.AddressTypeIPv6:
		out.IPv6 = true
	case discoveryv1.AddressTypeFQDN:
		return nil, nil
	default:
		return fail(fieldError{"addressType", fmt.Errorf("unknown address type %q", es.AddressType)})
	}
	if t, ok := es.Annotations[AnnotationTriggerTime]; ok {
		// An unparsable time is ignored, as kube-proxy does: it only
		// feeds a latency metric.
		out.TriggerTime, _ = time.Parse(time.RFC3339, t)
	}
	var err error
	if out.Ports, err = slicePorts(es); err != nil {
		return fail(err)
	}
	parseEndpoints(es, out, adj)
	return out, nil
}

// slicePorts validates the ports of a slice and returns them sorted by
// name and protocol; the error is a fieldError.
func slicePorts(es *discoveryv1.EndpointSlice) ([]client.PortOverride, error) {
	var out []client.PortOverride
	if len(es.Ports) > 0 {
		out = make([]client.PortOverride, 0, len(es.Ports))
	}
	for i, p := range es.Ports {
		if p.Port == nil {
			continue
		}
		po := client.PortOverride{Port: int(*p.Port)}
		if p.Name != nil {
			po.Name = *p.Name
		}
		var proto corev1.Protocol
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		var err error
		if po.Protocol, err = protocol(proto); err != nil {
			return nil, fieldError{fmt.Sprintf("ports[%d].protocol", i), err}
		}
		if !validPort(po.Port) {
			return nil, fieldError{fmt.Sprintf("ports[%d].port", i), fmt.Errorf("port %d out of range 1-65535", po.Port)}
		}
		out = append(out, po)
	}
	slices.SortFunc(out, comparePorts)
	for i := 1; i < len(out); i++ {
		if out[i].Name == out[i-1].Name && out[i].Protocol == out[i-1].Protocol {
			return nil, fieldError{"ports", fmt.Errorf("duplicate port name %q for %s", out[i].Name, out[i].Protocol)}
		}
	}
	return out, nil
}

// parseEndpoints validates the endpoints of es into out.Endpoints (out's
// address family and ports set). An endpoint whose first address is not
// usable is skipped (adj says why): kube-proxy skips one without
// addresses, and fails a whole sync over one it cannot program.
func parseEndpoints(es *discoveryv1.EndpointSlice, out *Slice, adj *adjustments) {
	out.Endpoints = make([]SliceEndpoint, 0, len(es.Endpoints))
	addrs := make([]netip.Addr, len(es.Endpoints)) // one allocation for every endpoint's IPs
	var keys strings.Builder
	keys.Grow(len(es.Endpoints) * 32)
	var ends [64][2]int32 // on the stack for the usual slice size
	keyEnds := ends[:0]
	for i := range es.Endpoints {
		e := &es.Endpoints[i]
		a, ok := endpointAddr(e, i, out.IPv6, adj)
		if !ok {
			continue
		}
		se := SliceEndpoint{Endpoint: client.Endpoint{Ready: true, Serving: true, PortOverrides: out.Ports}}
		addrs[i] = a
		if out.IPv6 {
			se.IPs.V6 = addrs[i : i+1 : i+1]
		} else {
			se.IPs.V4 = addrs[i : i+1 : i+1]
		}
		// Keys are written into one buffer and cut out after the loop:
		// one allocation per slice instead of one per endpoint.
		start := keys.Len()
		writeKey(&keys, e.TargetRef, es.Namespace, a)
		keyEnds = append(keyEnds, [2]int32{int32(start), int32(keys.Len())})
		setEndpointFacts(&se, e)
		out.Endpoints = append(out.Endpoints, se)
	}
	all := keys.String()
	for i, k := range keyEnds {
		out.Endpoints[i].Key = client.EndpointKey(all[k[0]:k[1]])
	}
}

// endpointAddr returns the address of endpoint i (its first, the only one
// consumers use), read as kube-proxy reads it, or false when the endpoint
// is skipped (adj says why).
func endpointAddr(e *discoveryv1.Endpoint, i int, v6 bool, adj *adjustments) (netip.Addr, bool) {
	// The field's name is built only when a value is reported: this runs
	// for every endpoint.
	field := func() string { return fmt.Sprintf("endpoints[%d].addresses[0]", i) }
	if len(e.Addresses) == 0 {
		adj.skip(fmt.Sprintf("endpoints[%d].addresses", i), "", "no address")
		return netip.Addr{}, false
	}
	text := e.Addresses[0]
	a, r, err := parseIP(text)
	switch {
	case err != nil:
		adj.skip(field(), text, err.Error())
		return netip.Addr{}, false
	case v6 && r.mapped:
		adj.skip(field(), text, "IPv4-mapped address in an IPv6 slice")
		return netip.Addr{}, false
	case a.Is6() != v6:
		adj.skip(field(), text, fmt.Sprintf("not an %s address", familyName(v6)))
		return netip.Addr{}, false
	case r.any():
		adj.repaired(field(), text, a, r)
	}
	return a, true
}

// writeKey writes an endpoint's key: its targetRef (kind/namespace/name,
// the kind Pod and the slice's namespace by default), or its address.
func writeKey(keys *strings.Builder, r *corev1.ObjectReference, namespace string, a netip.Addr) {
	if r == nil || r.Name == "" {
		var tmp [64]byte
		keys.Write(a.AppendTo(tmp[:0]))
		return
	}
	ns := r.Namespace
	if ns == "" {
		ns = namespace
	}
	kind := r.Kind
	if kind == "" {
		kind = "Pod"
	}
	keys.WriteString(kind)
	keys.WriteByte('/')
	keys.WriteString(ns)
	keys.WriteByte('/')
	keys.WriteString(r.Name)
}

// setEndpointFacts copies an endpoint's hostname, node, zone, conditions
// and hints to se.
func setEndpointFacts(se *SliceEndpoint, e *discoveryv1.Endpoint) {
	if e.Hostname != nil {
		se.Hostname = *e.Hostname
	}
	if e.NodeName != nil {
		se.NodeName = *e.NodeName
	}
	if e.Zone != nil {
		se.Zone = *e.Zone
	}
	c := e.Conditions
	// Unset ready and serving mean true (the API's and kube-proxy's
	// reading), so an endpoint with ready false and no serving condition
	// is serving.
	if c.Ready != nil {
		se.Ready = *c.Ready
	}
	if c.Serving != nil {
		se.Serving = *c.Serving
	}
	if c.Terminating != nil {
		se.Terminating = *c.Terminating
	}
	if h := e.Hints; h != nil && (len(h.ForZones) > 0 || len(h.ForNodes) > 0) {
		se.Hints = &Hints{}
		for _, z := range h.ForZones {
			se.Hints.Zones = append(se.Hints.Zones, z.Name)
		}
		for _, n := range h.ForNodes {
			se.Hints.Nodes = append(se.Hints.Nodes, n.Name)
		}
	}
}

func comparePorts(a, b client.PortOverride) int {
	return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Protocol, b.Protocol))
}
