package nodelocal

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/proxysinks/proxysinks/client"
)

// Well-known labels and annotations the conversion reads.
const (
	// LabelServiceProxyName marks a service as served by another proxy.
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	// AnnotationSourceRanges is the cloud provider's form of
	// spec.loadBalancerSourceRanges (comma-separated CIDRs): the cloud's
	// load balancer enforces it; a proxy does not read it (kube-proxy
	// neither).
	AnnotationSourceRanges = "service.beta.kubernetes.io/load-balancer-source-ranges"
	// AnnotationLastApplied is kubectl's copy of the object; it is dropped.
	AnnotationLastApplied = "kubectl.kubernetes.io/last-applied-configuration"
	// LabelTopologyZone is the node label holding the node's zone.
	LabelTopologyZone = "topology.kubernetes.io/zone"
)

// Reasons a valid service is not served (see ConvertService).
const (
	SkipHeadless     = "headless"
	SkipExternalName = "ExternalName"
	SkipOtherProxy   = "service-proxy-name"
)

// DefaultAffinityTimeout is Kubernetes' default ClientIP affinity timeout
// (3 hours).
const DefaultAffinityTimeout = 10800

// ConvertService validates a Service and converts it to the node-local model.
// A service this proxy does not serve returns a nil service and the reason
// (SkipHeadless, SkipExternalName, SkipOtherProxy). An invalid service
// returns a nil service and a *client.ObjectError naming the first bad
// field. A bad port (out of range, unknown protocol, a duplicate name) is
// skipped: the service is returned with its other ports and with an error
// naming the skipped ports; only a service left without any port is
// invalid as a whole.
//
// Addresses and ranges follow kube-proxy v1.37.2's input rules: a bad
// external IP, load-balancer ingress IP or source range is skipped alone,
// legacy and IPv4-mapped forms are repaired, external and load-balancer
// IPs of a family the service has no cluster IP of are skipped
// (ConvertServiceObject returns these as Adjustments).
//
// proxyName selects services by their service.kubernetes.io/service-proxy-name
// label: empty serves unlabelled services only (kube-proxy's rule); non-empty
// serves only the services labelled with that name.
func ConvertService(s *corev1.Service, proxyName string) (svc *client.Service, skip string, err error) {
	return convertService(s, proxyName, nil)
}

func convertService(s *corev1.Service, proxyName string, adj *adjustments) (svc *client.Service, skip string, err error) {
	fail := func(err error) (*client.Service, string, error) {
		fe := err.(fieldError)
		return nil, "", &client.ObjectError{Kind: "Service", Namespace: s.Namespace, Name: s.Name, Field: fe.field, Err: fe.err}
	}
	if s.Name == "" {
		return fail(fieldError{"metadata.name", errors.New("missing")})
	}
	if s.Labels[LabelServiceProxyName] != proxyName {
		return nil, SkipOtherProxy, nil
	}
	typ, skip, err := serviceType(s)
	if err != nil {
		return fail(err)
	}
	if skip != "" {
		return nil, skip, nil
	}
	svc = &client.Service{Namespace: s.Namespace, Name: s.Name, Type: typ}
	if skip, err := convertAddresses(s, svc, adj); err != nil || skip != "" {
		if err != nil {
			return fail(err)
		}
		return nil, skip, nil
	}
	badPorts, err := convertPorts(s, svc)
	if err != nil {
		return fail(err)
	}
	if err := convertPolicies(s, svc, adj); err != nil {
		return fail(err)
	}
	convertSourceRanges(s, svc, adj)
	copyMetadata(s, svc)
	if len(badPorts) > 0 {
		// Served without its bad ports; the error says which were skipped.
		field, err := fieldsError("spec.ports", badPorts)
		return svc, "", &client.ObjectError{Kind: "Service", Namespace: s.Namespace, Name: s.Name, Field: field,
			Err: fmt.Errorf("%w (skipped; the other ports are served)", err)}
	}
	return svc, "", nil
}

// serviceType returns the service's type, or why it is not served
// (ExternalName, headless); the error is a fieldError.
func serviceType(s *corev1.Service) (client.ServiceType, string, error) {
	var typ client.ServiceType
	switch s.Spec.Type {
	case corev1.ServiceTypeExternalName:
		return "", SkipExternalName, nil
	case "", corev1.ServiceTypeClusterIP:
		typ = client.ClusterIP
	case corev1.ServiceTypeNodePort:
		typ = client.NodePort
	case corev1.ServiceTypeLoadBalancer:
		typ = client.LoadBalancer
	default:
		return "", "", fieldError{"spec.type", fmt.Errorf("unknown service type %q", s.Spec.Type)}
	}
	if s.Spec.ClusterIP == corev1.ClusterIPNone {
		return "", SkipHeadless, nil
	}
	return typ, "", nil
}

// convertAddresses fills the cluster, external and load-balancer IPs of
// svc, or says the service is headless; the error is a fieldError. A bad
// cluster IP makes the service invalid; a bad external or load-balancer IP
// is skipped alone, as kube-proxy skips it (adj says which).
func convertAddresses(s *corev1.Service, svc *client.Service, adj *adjustments) (string, error) {
	clusterIPs, field := s.Spec.ClusterIPs, "spec.clusterIPs"
	if len(clusterIPs) == 0 && s.Spec.ClusterIP != "" {
		clusterIPs, field = []string{s.Spec.ClusterIP}, "spec.clusterIP"
	}
	if len(clusterIPs) == 0 {
		return "", fieldError{"spec.clusterIPs", errors.New("no cluster IP (not allocated yet?)")}
	}
	for i, ip := range clusterIPs {
		if ip == corev1.ClusterIPNone {
			return SkipHeadless, nil
		}
		a, r, err := parseIP(ip)
		if err != nil {
			return "", fieldError{indexed(field, i, field == "spec.clusterIPs"), err}
		}
		if r.any() {
			adj.repaired(indexed(field, i, field == "spec.clusterIPs"), ip, a, r)
		}
		svc.ClusterIPs.Add(a)
	}
	for i, ip := range s.Spec.ExternalIPs {
		addServiceIP(svc, &svc.ExternalIPs, "spec.externalIPs", i, ip, adj)
	}
	if svc.Type != client.LoadBalancer {
		return "", nil
	}
	for i, ing := range s.Status.LoadBalancer.Ingress {
		if ing.IP == "" {
			continue // hostname-only ingress
		}
		// kube-proxy serves VIP mode only (unset is VIP): a Proxy load
		// balancer delivers to node ports itself; an unknown mode is
		// not served either.
		if m := ing.IPMode; m != nil && *m != corev1.LoadBalancerIPModeVIP {
			if *m != corev1.LoadBalancerIPModeProxy {
				adj.skip(fmt.Sprintf("status.loadBalancer.ingress[%d].ipMode", i), string(*m), "unknown ipMode: only VIP (or unset) is served")
			}
			continue
		}
		addServiceIP(svc, &svc.LoadBalancerIPs, "status.loadBalancer.ingress", i, ing.IP, adj)
	}
	return "", nil
}

// addServiceIP adds item i of list (an external or load-balancer IP) to
// ips, or skips it (adj says why): invalid, or of a family the service
// has no cluster IP of (kube-proxy's proxier of that family does not serve
// the service).
func addServiceIP(svc *client.Service, ips *client.IPs, list string, i int, ip string, adj *adjustments) {
	field := func() string {
		if list == "spec.externalIPs" {
			return fmt.Sprintf("%s[%d]", list, i)
		}
		return fmt.Sprintf("%s[%d].ip", list, i)
	}
	a, r, err := parseIP(ip)
	switch {
	case err != nil:
		adj.skip(field(), ip, err.Error())
		return
	case len(svc.ClusterIPs.Family(a.Is6())) == 0:
		adj.skip(field(), ip, fmt.Sprintf("the service has no %s cluster IP", familyName(a.Is6())))
		return
	case r.any():
		adj.repaired(field(), ip, a, r)
	}
	ips.Add(a)
}

func familyName(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

// convertPorts fills the ports of svc. A bad port is skipped, the
// service's other ports are served (per-object isolation): the returned
// list says which and why. The error (a fieldError) means no port is left.
func convertPorts(s *corev1.Service, svc *client.Service) ([]fieldError, error) {
	if len(s.Spec.Ports) == 0 {
		return nil, fieldError{"spec.ports", errors.New("no ports")}
	}
	svc.Ports = make([]client.Port, 0, len(s.Spec.Ports))
	var badPorts []fieldError
	for i, p := range s.Spec.Ports {
		port, err := convertPort(p, svc.Type)
		if err != nil {
			var fe fieldError
			if errors.As(err, &fe) {
				badPorts = append(badPorts, fieldError{fmt.Sprintf("spec.ports[%d].%s", i, fe.field), fe.err})
			} else {
				badPorts = append(badPorts, fieldError{fmt.Sprintf("spec.ports[%d]", i), err})
			}
			continue
		}
		dup := false
		for _, q := range svc.Ports {
			if q.Name == port.Name && q.Protocol == port.Protocol {
				badPorts = append(badPorts, fieldError{fmt.Sprintf("spec.ports[%d].name", i), fmt.Errorf("duplicate port name %q for %s", port.Name, port.Protocol)})
				dup = true
				break
			}
		}
		if !dup {
			svc.Ports = append(svc.Ports, port)
		}
	}
	if len(svc.Ports) == 0 {
		// Nothing left to serve: the service is invalid.
		field, err := fieldsError("spec.ports", badPorts)
		return nil, fieldError{field, err}
	}
	return badPorts, nil
}

// convertPolicies fills the session affinity, the traffic policies and the
// health-check node port of svc; the error is a fieldError. An unknown
// session affinity or traffic policy is read as kube-proxy reads it (only
// ClientIP and Local mean anything: any other value is None or Cluster),
// and adj says so.
func convertPolicies(s *corev1.Service, svc *client.Service, adj *adjustments) error {
	switch s.Spec.SessionAffinity {
	case "", corev1.ServiceAffinityNone:
	case corev1.ServiceAffinityClientIP:
		t := DefaultAffinityTimeout
		if c := s.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			t = int(*c.ClientIP.TimeoutSeconds)
			if t < 1 || t > 86400 {
				return fieldError{"spec.sessionAffinityConfig.clientIP.timeoutSeconds", fmt.Errorf("timeout %d out of range 1-86400", t)}
			}
		}
		svc.SessionAffinity = &client.SessionAffinity{TimeoutSeconds: t}
	default:
		adj.readAs("spec.sessionAffinity", string(s.Spec.SessionAffinity), string(corev1.ServiceAffinityNone), "unknown session affinity, read as kube-proxy reads it")
	}
	switch s.Spec.ExternalTrafficPolicy {
	case "", corev1.ServiceExternalTrafficPolicyCluster:
	case corev1.ServiceExternalTrafficPolicyLocal:
		svc.ExternalTrafficLocal = svc.ExternallyAccessible()
	default:
		adj.readAs("spec.externalTrafficPolicy", string(s.Spec.ExternalTrafficPolicy), string(corev1.ServiceExternalTrafficPolicyCluster), "unknown policy, read as kube-proxy reads it")
	}
	if p := s.Spec.InternalTrafficPolicy; p != nil {
		switch *p {
		case "", corev1.ServiceInternalTrafficPolicyCluster:
		case corev1.ServiceInternalTrafficPolicyLocal:
			svc.InternalTrafficLocal = true
		default:
			adj.readAs("spec.internalTrafficPolicy", string(*p), string(corev1.ServiceInternalTrafficPolicyCluster), "unknown policy, read as kube-proxy reads it")
		}
	}
	if svc.Type == client.LoadBalancer && svc.ExternalTrafficLocal && s.Spec.HealthCheckNodePort != 0 {
		hc := int(s.Spec.HealthCheckNodePort)
		if hc < 1 || hc > 65535 {
			return fieldError{"spec.healthCheckNodePort", fmt.Errorf("port %d out of range 1-65535", hc)}
		}
		svc.HealthCheckNodePort = hc
	}
	return nil
}

// convertSourceRanges fills the load-balancer source ranges of svc from
// spec.loadBalancerSourceRanges, as kube-proxy reads them: surrounding
// spaces ignored, a bad range skipped alone (adj says which), and a family
// holding a zero-length range left without ranges (open to every client).
// The service.beta.kubernetes.io/load-balancer-source-ranges annotation is
// the cloud provider's and is not read.
func convertSourceRanges(s *corev1.Service, svc *client.Service, adj *adjustments) {
	var open [2]bool // a zero-length range, by family (IPv4, IPv6)
	for i, text := range s.Spec.LoadBalancerSourceRanges {
		field := fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", i)
		p, r, err := parseCIDR(strings.TrimSpace(text))
		if err != nil {
			adj.skip(field, text, err.Error())
			continue
		}
		if r.any() {
			adj.repaired(field, text, p, r)
		}
		if p.Bits() == 0 {
			open[boolIndex(p.Addr().Is6())] = true
		}
		svc.LoadBalancerSourceRanges = append(svc.LoadBalancerSourceRanges, p)
	}
	svc.LoadBalancerSourceRanges = slices.DeleteFunc(svc.LoadBalancerSourceRanges, func(p netip.Prefix) bool {
		return open[boolIndex(p.Addr().Is6())]
	})
	if len(svc.LoadBalancerSourceRanges) == 0 {
		svc.LoadBalancerSourceRanges = nil
	}
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// copyMetadata copies the labels and annotations of s to svc, without
// kubectl's last-applied copy.
func copyMetadata(s *corev1.Service, svc *client.Service) {
	if len(s.Labels) > 0 {
		svc.Labels = maps.Clone(s.Labels)
	}
	if len(s.Annotations) > 0 {
		svc.Annotations = maps.Clone(s.Annotations)
		delete(svc.Annotations, AnnotationLastApplied)
		if len(svc.Annotations) == 0 {
			svc.Annotations = nil
		}
	}
}

// fieldsError is the field and error reporting bad sub-fields of parent:
// the sub-field's own path when there is one, else parent and every
// sub-field's error, each naming its path.
func fieldsError(parent string, bad []fieldError) (string, error) {
	if len(bad) == 1 {
		return bad[0].field, bad[0].err
	}
	errs := make([]error, len(bad))
	for i, fe := range bad {
		errs[i] = fe
	}
	return parent, errors.Join(errs...)
}

// fieldError is an error in a sub-field, joined to its parent's path.
type fieldError struct {
	field string
	err   error
}

func (e fieldError) Error() string { return e.field + ": " + e.err.Error() }

func (e fieldError) Unwrap() error { return e.err }

func convertPort(p corev1.ServicePort, typ client.ServiceType) (client.Port, error) {
	proto, err := protocol(p.Protocol)
	if err != nil {
		return client.Port{}, fieldError{"protocol", err}
	}
	out := client.Port{Name: p.Name, Protocol: proto, Port: int(p.Port)}
	if !validPort(out.Port) {
		return client.Port{}, fieldError{"port", fmt.Errorf("port %d out of range 1-65535", p.Port)}
	}
	if typ == client.NodePort || typ == client.LoadBalancer {
		out.NodePort = int(p.NodePort)
		if p.NodePort != 0 && !validPort(out.NodePort) {
			return client.Port{}, fieldError{"nodePort", fmt.Errorf("port %d out of range 1-65535", p.NodePort)}
		}
	}
	switch {
	case p.TargetPort.Type == intstr.String:
		name := p.TargetPort.StrVal
		if name == "" {
			out.TargetPort = out.Port
		} else {
			out.TargetPortName = name
		}
	case p.TargetPort.IntVal == 0:
		out.TargetPort = out.Port // the API server's default
	default:
		out.TargetPort = int(p.TargetPort.IntVal)
		if !validPort(out.TargetPort) {
			return client.Port{}, fieldError{"targetPort", fmt.Errorf("port %d out of range 1-65535", p.TargetPort.IntVal)}
		}
	}
	return out, nil
}

func protocol(p corev1.Protocol) (client.Protocol, error) {
	switch p {
	case "", corev1.ProtocolTCP:
		return client.TCP, nil
	case corev1.ProtocolUDP:
		return client.UDP, nil
	case corev1.ProtocolSCTP:
		return client.SCTP, nil
	}
	return "", fmt.Errorf("unknown protocol %q", p)
}

func validPort(p int) bool { return p >= 1 && p <= 65535 }

func indexed(field string, i int, indexed bool) string {
	if !indexed {
		return field
	}
	return fmt.Sprintf("%s[%d]", field, i)
}
