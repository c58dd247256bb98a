package render

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// SchedulerAnnotation overrides the IPVS scheduler for one service.
const SchedulerAnnotation = "proxysinks.io/ipvs-scheduler"

// DefaultAffinityTimeout is the ClientIP affinity timeout when the service
// gives none (Kubernetes' default, 3 hours).
const DefaultAffinityTimeout = 10800

// Schedulers are the IPVS schedulers a service may use.
var Schedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh"}

// Config is the node's part of rendering.
type Config struct {
	// Scheduler is the default IPVS scheduler ("rr" when empty).
	Scheduler string
	// Weight is every destination's weight (1 when 0).
	Weight uint32
	// NodeAddresses are the addresses NodePorts are served on (already
	// filtered by --nodeport-addresses; loopback addresses are skipped).
	NodeAddresses []netip.Addr
	// Families are the IP families the node serves (its kube-proxy ipsets
	// and iptables rules exist for them); an address of another family is
	// rejected. Empty means both.
	Families []xtables.Family
}

// serves reports whether the node serves addresses of a's family.
func (c *Config) serves(a netip.Addr) bool {
	return len(c.Families) == 0 || slices.Contains(c.Families, familyOf(a))
}

var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// unservable says why a service address (a cluster, external or
// load-balancer IP) must not become a virtual server, or returns nil. An
// address bound on kube-ipvs0 or intercepted by IPVS would take traffic
// that is not the service's: the node's own (a cluster IP only: external
// and load-balancer IPs on a node address are served unbound, as by
// kube-proxy), loopback, unspecified, broadcast, multicast, link-local.
func (c *Config) unservable(a netip.Addr, clusterIP bool) error {
	switch {
	case a.IsUnspecified():
		return fmt.Errorf("%s is the unspecified address", a)
	case a.IsLoopback():
		return fmt.Errorf("%s is a loopback address", a)
	case a == broadcast:
		return fmt.Errorf("%s is the broadcast address", a)
	case a.IsMulticast():
		return fmt.Errorf("%s is a multicast address", a)
	case a.IsLinkLocalUnicast():
		return fmt.Errorf("%s is a link-local address", a)
	case clusterIP && slices.Contains(c.NodeAddresses, a):
		return fmt.Errorf("%s is an address of this node", a)
	case !c.serves(a):
		return fmt.Errorf("%s: the node does not serve %s (IPv6 is off on this host)", a, familyOf(a))
	}
	return nil
}

// servable returns the addresses of ips that may be served, and an error
// naming the service, the field and the address for each other one.
func (c *Config) servable(svc *client.Service, field string, ips []netip.Addr, clusterIP bool, errs *[]error) []netip.Addr {
	out := ips[:0:0]
	for _, ip := range ips {
		if err := c.unservable(ip, clusterIP); err != nil {
			*errs = append(*errs, &Error{svc.Key(), field, fmt.Errorf("%w; not served", err)})
			continue
		}
		out = append(out, ip)
	}
	return out
}

// Error is a problem with one service's input; the rest of the service is
// still rendered.
type Error struct {
	Service client.ServiceKey
	Field   string
	Err     error
}

func (e *Error) Error() string {
	return fmt.Sprintf("render: service %s: %s: %v", e.Service, e.Field, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

func protocol(p client.Protocol) (Protocol, bool) {
	switch p {
	case client.TCP:
		return TCP, true
	case client.UDP:
		return UDP, true
	case client.SCTP:
		return SCTP, true
	}
	return 0, false
}

func familyOf(a netip.Addr) xtables.Family {
	if a.Is4() {
		return xtables.IPv4
	}
	return xtables.IPv6
}

// Render emits every kernel object the service needs on this node into sink
// and returns the problems it found in the service (each naming the service
// and field); objects not affected by a problem are still emitted.
func Render(se *client.ServiceEndpoints, cfg Config, sink Sink) []error {
	svc := se.Service
	if svc == nil {
		return nil
	}
	var errs []error
	weight := cfg.Weight
	if weight == 0 {
		weight = 1
	}
	r := renderer{svc: svc, eps: se.Endpoints, sink: sink, opts: serverOptions(svc, cfg.Scheduler, &errs), weight: weight,
		nodeAddrs: cfg.NodeAddresses}

	// Each address is checked once; a bad one is skipped, the rest served.
	// The lists are local and iterated here, not handed to a method: the
	// compiler keeps them on the stack.
	clusterIPs := cfg.servable(svc, "clusterIPs", svc.ClusterIPs.All(), true, &errs)
	externalIPs := cfg.servable(svc, "externalIPs", svc.ExternalIPs.All(), false, &errs)
	var lbIPs []netip.Addr
	if svc.Type == client.LoadBalancer {
		lbIPs = cfg.servable(svc, "status.loadBalancer.ingress", svc.LoadBalancerIPs.All(), false, &errs)
	}
	// The families the service lives in, in a fixed order: those of its
	// cluster IPs. An external or load-balancer IP of another family is
	// not served: kube-proxy's proxier of that family skips the service
	// (client/nodelocal already leaves such addresses out, and says so).
	var families []xtables.Family
	for _, f := range []xtables.Family{xtables.IPv4, xtables.IPv6} {
		if slices.ContainsFunc(clusterIPs, func(a netip.Addr) bool { return familyOf(a) == f }) {
			families = append(families, f)
		}
	}
	outside := func(a netip.Addr) bool { return !slices.Contains(families, familyOf(a)) }
	externalIPs = slices.DeleteFunc(externalIPs, outside)
	lbIPs = slices.DeleteFunc(lbIPs, outside)

	for _, p := range svc.Ports {
		proto, ok := protocol(p.Protocol)
		if !ok {
			errs = append(errs, &Error{svc.Key(), fmt.Sprintf("port %q protocol", p.Name), fmt.Errorf("unsupported protocol %q", p.Protocol)})
			continue
		}
		if p.Port <= 0 || p.Port > 65535 {
			errs = append(errs, &Error{svc.Key(), fmt.Sprintf("port %q", p.Name), fmt.Errorf("port %d out of range", p.Port)})
			continue
		}
		port := uint16(p.Port)
		for _, f := range families {
			r.loopBack(p, proto, f)
		}
		// ClusterIP: bound on kube-ipvs0, internal endpoints.
		for _, ip := range clusterIPs {
			r.server(VirtualServer{proto, ip, port}, p, internal)
			r.bind(ip)
			sink.Entry(SetEntry{Set: rules.SetName(familyOf(ip), rules.SetClusterIP), Addr: ip, Protocol: proto, Port: port})
		}
		// ExternalIPs: bound unless the node holds them, external endpoints.
		for _, ip := range externalIPs {
			r.externalIP(p, proto, port, ip)
		}
		// LoadBalancer ingress IPs (none unless the service is one).
		for _, ip := range lbIPs {
			r.loadBalancer(p, proto, port, ip)
		}
		// NodePort on every node address of the service's families.
		if (svc.Type == client.NodePort || svc.Type == client.LoadBalancer) && p.NodePort > 0 && p.NodePort <= 65535 {
			r.nodePort(p, proto, uint16(p.NodePort), families)
		}
	}

	if svc.ExternalTrafficLocal && svc.HealthCheckNodePort > 0 && svc.HealthCheckNodePort <= 65535 {
		for _, f := range families {
			sink.Entry(SetEntry{Set: rules.SetName(f, rules.SetHealthCheckNodePort), Port: uint16(svc.HealthCheckNodePort)})
		}
	}
	return errs
}

// serverOptions returns the options of the service's virtual servers:
// the scheduler (scheduler, "rr" when empty, or the service's annotation;
// an unknown one is an error in errs) and ClientIP affinity.
func serverOptions(svc *client.Service, scheduler string, errs *[]error) ServerOptions {
	opts := ServerOptions{Scheduler: scheduler}
	if opts.Scheduler == "" {
		opts.Scheduler = "rr"
	}
	if s, ok := svc.Annotations[SchedulerAnnotation]; ok {
		if slices.Contains(Schedulers, s) {
			opts.Scheduler = s
		} else {
			*errs = append(*errs, &Error{svc.Key(), "annotation " + SchedulerAnnotation,
				fmt.Errorf("unknown IPVS scheduler %q (want one of %v); using %q", s, Schedulers, opts.Scheduler)})
		}
	}
	if svc.SessionAffinity != nil {
		opts.Persistent = true
		opts.Timeout = uint32(svc.SessionAffinity.TimeoutSeconds)
		if opts.Timeout == 0 {
			opts.Timeout = DefaultAffinityTimeout
		}
	}
	return opts
}

// externalIP emits the virtual server of an external IP, its binding
// (unless the node holds the address) and its set entry.
func (r *renderer) externalIP(p client.Port, proto Protocol, port uint16, ip netip.Addr) {
	r.server(VirtualServer{proto, ip, port}, p, external)
	if r.bound(ip) {
		r.bind(ip)
	}
	set := rules.SetExternalIP
	if r.svc.ExternalTrafficLocal {
		set = rules.SetExternalIPLocal
	}
	r.sink.Entry(SetEntry{Set: rules.SetName(familyOf(ip), set), Addr: ip, Protocol: proto, Port: port})
}

// bound reports whether a is bound on kube-ipvs0: it is not one of the
// node's addresses.
func (r *renderer) bound(a netip.Addr) bool { return !slices.Contains(r.nodeAddrs, a) }

// loadBalancer emits the virtual server of a load-balancer ingress IP,
// its binding and set entries (with source ranges, the firewall's).
func (r *renderer) loadBalancer(p client.Port, proto Protocol, port uint16, ip netip.Addr) {
	svc, sink := r.svc, r.sink
	f := familyOf(ip)
	vs := VirtualServer{proto, ip, port}
	r.server(vs, p, external)
	if r.bound(ip) {
		r.bind(ip)
	}
	entry := SetEntry{Set: rules.SetName(f, rules.SetLoadBalancer), Addr: ip, Protocol: proto, Port: port}
	sink.Entry(entry)
	if svc.ExternalTrafficLocal {
		entry.Set = rules.SetName(f, rules.SetLoadBalancerLocal)
		sink.Entry(entry)
	}
	// The firewall applies per family: without a range of the address's
	// family (or with a zero-length one) the address is open to every
	// client, as in kube-proxy; a zero-length range never reaches the
	// kernel, which refuses it in a hash:ip,port,net set.
	ranges := svc.SourceRanges(ip.Is6())
	if len(ranges) == 0 {
		return
	}
	entry.Set = rules.SetName(f, rules.SetLoadBalancerFW)
	sink.Entry(entry)
	fromNode := false
	for _, src := range ranges {
		sink.Entry(SetEntry{Set: rules.SetName(f, rules.SetLoadBalancerSrcNet), Addr: ip, Protocol: proto, Port: port, Net: src.Masked()})
		for _, n := range r.nodeAddrs {
			if src.Contains(n) {
				fromNode = true
			}
		}
	}
	// Traffic from the node itself (a backend reaching the load balancer,
	// short-circuited to the local VIP) is allowed when the node is in an
	// allowed range.
	if fromNode {
		sink.Entry(SetEntry{Set: rules.SetName(f, rules.SetLoadBalancerSrcIP), Addr: ip, Protocol: proto, Port: port, Addr2: ip})
	}
}

// nodePort emits the node-port set entries and a virtual server on every
// node address of the service's families.
func (r *renderer) nodePort(p client.Port, proto Protocol, np uint16, families []xtables.Family) {
	for _, f := range families {
		for _, set := range nodePortSets(proto, r.svc.ExternalTrafficLocal) {
			if proto == SCTP {
				for _, n := range r.nodeAddrs {
					if familyOf(n) == f && !n.IsLoopback() {
						r.sink.Entry(SetEntry{Set: rules.SetName(f, set), Addr: n, Protocol: proto, Port: np})
					}
				}
			} else {
				r.sink.Entry(SetEntry{Set: rules.SetName(f, set), Port: np})
			}
		}
	}
	for _, n := range r.nodeAddrs {
		if slices.Contains(families, familyOf(n)) && !n.IsLoopback() {
			r.server(VirtualServer{proto, n, np}, p, external)
		}
	}
}

func nodePortSets(p Protocol, local bool) []string {
	var all, loc string
	switch p {
	case TCP:
		all, loc = rules.SetNodePortTCP, rules.SetNodePortLocalTCP
	case UDP:
		all, loc = rules.SetNodePortUDP, rules.SetNodePortLocalUDP
	default:
		all, loc = rules.SetNodePortSCTP, rules.SetNodePortLocalSCTP
	}
	if local {
		return []string{all, loc}
	}
	return []string{all}
}

type scope int

const (
	internal scope = iota
	external
)

// renderer renders one service.
type renderer struct {
	svc    *client.Service
	eps    []*client.Endpoint
	sink   Sink
	opts   ServerOptions
	weight uint32
	// nodeAddrs are the node's addresses (Config.NodeAddresses).
	nodeAddrs []netip.Addr
}

// server emits a virtual server with the destinations of the endpoints in
// scope (serves), in the server's family.
func (r *renderer) server(vs VirtualServer, p client.Port, sc scope) {
	r.sink.Server(vs, r.opts)
	f := familyOf(vs.Addr)
	// The record that the virtual server is the sink's (see
	// rules.SetVirtualServers).
	r.sink.Entry(SetEntry{Set: rules.SetName(f, rules.SetVirtualServers), Addr: vs.Addr, Protocol: vs.Protocol, Port: vs.Port})
	in := func(ep *client.Endpoint) bool { return r.serves(ep, sc) }
	if !r.any(p, f, in) {
		in = r.fallback(sc)
	}
	r.each(p, f, in, func(ip netip.Addr, port uint16) {
		r.sink.Destination(Destination{Server: vs, Addr: ip, Port: port}, DestOptions{Weight: r.weight})
	})
}

// serves reports whether the node sends the scope's traffic to ep (the
// node-local rules of the client package).
func (r *renderer) serves(ep *client.Endpoint, sc scope) bool {
	if sc == internal {
		return ep.Internal
	}
	return ep.External
}

// fallback returns which endpoints a virtual server of the scope gets when
// its Local traffic policy leaves it none (no endpoint on this node):
// kube-proxy's IPVS mode then programs the cluster endpoints of an
// externally accessible service, so that pods on this node still reach it
// (kubernetes PR 97081; traffic from outside is still not masqueraded, and
// the replies of a remote backend do not come back).
func (r *renderer) fallback(sc scope) func(*client.Endpoint) bool {
	svc := r.svc
	local := sc == internal && svc.InternalTrafficLocal || sc == external && svc.ExternalTrafficLocal
	if !local || !svc.ExternallyAccessible() {
		return func(*client.Endpoint) bool { return false }
	}
	return func(ep *client.Endpoint) bool { return ep.Cluster }
}

// each calls f with every address of family fam and backend port of port p
// of the endpoints in.
func (r *renderer) each(p client.Port, fam xtables.Family, in func(*client.Endpoint) bool, f func(ip netip.Addr, port uint16)) {
	for _, ep := range r.eps {
		if !in(ep) {
			continue
		}
		port, ok := ep.PortFor(p)
		if !ok || port <= 0 || port > 65535 {
			continue
		}
		for _, ip := range ep.IPs.Family(fam == xtables.IPv6) {
			f(ip, uint16(port))
		}
	}
}

// any reports whether some endpoint in has an address of family fam and a
// backend port for p.
func (r *renderer) any(p client.Port, fam xtables.Family, in func(*client.Endpoint) bool) bool {
	found := false
	r.each(p, fam, in, func(netip.Addr, uint16) { found = true })
	return found
}

// loopBack emits the KUBE-LOOP-BACK entries (hairpin: masquerade a pod
// reaching itself through the service) of port p in family fam: as
// kube-proxy, one for every endpoint on this node, whether or not it is a
// destination (a terminating or not-ready one too).
func (r *renderer) loopBack(p client.Port, proto Protocol, fam xtables.Family) {
	local := func(ep *client.Endpoint) bool { return ep.Local }
	r.each(p, fam, local, func(ip netip.Addr, port uint16) {
		r.sink.Entry(SetEntry{Set: rules.SetName(fam, rules.SetLoopBack), Addr: ip, Protocol: proto, Port: port, Addr2: ip})
	})
}

// bind emits an address binding on kube-ipvs0 and its KUBE-IPVS-IPS entry.
func (r *renderer) bind(addr netip.Addr) {
	r.sink.Bind(addr)
	r.sink.Entry(SetEntry{Set: rules.SetName(familyOf(addr), rules.SetIPVSIPs), Addr: addr})
}
