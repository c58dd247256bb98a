package nodelocal

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/proxysinks/proxysinks/client"
)

var addrCmp = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
var prefixCmp = cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })

func TestConvertService(t *testing.T) {
	tests := []struct {
		name     string
		svc      *corev1.Service
		want     *client.Service
		wantSkip string
	}{
		{
			name: "cluster IP, defaults",
			svc: service("default", "web", func(s *corev1.Service) {
				s.Spec.Ports[0].Protocol = ""
				s.Spec.Ports[0].TargetPort = intstr.IntOrString{}
			}),
			want: &client.Service{Namespace: "default", Name: "web", Type: client.ClusterIP,
				ClusterIPs: ips("10.96.0.10"),
				Ports:      []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, TargetPort: 80}}},
		},
		{
			name: "dual-stack node port with named target port, SCTP and UDP",
			svc: service("default", "multi", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeNodePort
				s.Spec.ClusterIPs = []string{"fd00:10:96::a", "10.96.0.10"}
				s.Spec.Ports = []corev1.ServicePort{
					{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053, TargetPort: intstr.FromString("dns")},
					{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, NodePort: 30054, TargetPort: intstr.FromInt32(5353)},
					{Name: "sig", Protocol: corev1.ProtocolSCTP, Port: 9999, NodePort: 30099, TargetPort: intstr.FromInt32(9999)},
				}
			}),
			want: &client.Service{Namespace: "default", Name: "multi", Type: client.NodePort,
				ClusterIPs: client.IPs{V4: addrs("10.96.0.10"), V6: addrs("fd00:10:96::a")},
				Ports: []client.Port{
					{Name: "dns", Protocol: client.UDP, Port: 53, NodePort: 30053, TargetPortName: "dns"},
					{Name: "dns-tcp", Protocol: client.TCP, Port: 53, NodePort: 30054, TargetPort: 5353},
					{Name: "sig", Protocol: client.SCTP, Port: 9999, NodePort: 30099, TargetPort: 9999},
				}},
		},
		{
			name: "load balancer, eTP=Local, source ranges, affinity, external IPs",
			svc: service("default", "lb", func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.Ports[0].NodePort = 31080
				s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:10:96::a"}
				s.Spec.ExternalIPs = []string{"192.0.2.10", "2001:db8::10"}
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 32000
				s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.7/24", " 2001:db8:1::/48"}
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{
					{IP: "198.51.100.1"}, {Hostname: "lb.example.com"},
					{IP: "198.51.100.2", IPMode: ptr(corev1.LoadBalancerIPModeProxy)},
					{IP: "2001:db8:2::1", IPMode: ptr(corev1.LoadBalancerIPModeVIP)},
				}
				s.Labels = map[string]string{"app": "lb"}
				s.Annotations = map[string]string{"proxysinks.io/ipvs-scheduler": "wlc", AnnotationLastApplied: "{}"}
			}),
			want: &client.Service{Namespace: "default", Name: "lb", Type: client.LoadBalancer,
				ClusterIPs:               ips("10.96.0.10", "fd00:10:96::a"),
				ExternalIPs:              ips("192.0.2.10", "2001:db8::10"),
				LoadBalancerIPs:          ips("198.51.100.1", "2001:db8:2::1"),
				Ports:                    []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, NodePort: 31080, TargetPort: 8080}},
				SessionAffinity:          &client.SessionAffinity{TimeoutSeconds: 10800},
				ExternalTrafficLocal:     true,
				HealthCheckNodePort:      32000,
				LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8:1::/48")},
				Labels:                   map[string]string{"app": "lb"},
				Annotations:              map[string]string{"proxysinks.io/ipvs-scheduler": "wlc"}},
		},
		{
			name: "eTP=Local on a ClusterIP service without external IPs has no effect; iTP=Local; source-range annotation not read",
			svc: service("default", "itp", func(s *corev1.Service) {
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(60))}}
				s.Annotations = map[string]string{AnnotationSourceRanges: "10.0.0.0/8, 172.16.0.0/12"}
			}),
			want: &client.Service{Namespace: "default", Name: "itp", Type: client.ClusterIP,
				ClusterIPs:           ips("10.96.0.10"),
				Ports:                []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, TargetPort: 8080}},
				SessionAffinity:      &client.SessionAffinity{TimeoutSeconds: 60},
				InternalTrafficLocal: true,
				Annotations:          map[string]string{AnnotationSourceRanges: "10.0.0.0/8, 172.16.0.0/12"}},
		},
		{
			name: "headless",
			svc: service("default", "h", func(s *corev1.Service) {
				s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"}
			}),
			wantSkip: SkipHeadless,
		},
		{
			name: "ExternalName",
			svc: service("default", "x", func(s *corev1.Service) {
				s.Spec.Type, s.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"
				s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
			}),
			wantSkip: SkipExternalName,
		},
		{
			name: "another proxy's service",
			svc: service("default", "other", func(s *corev1.Service) {
				s.Labels = map[string]string{LabelServiceProxyName: "cilium"}
			}),
			wantSkip: SkipOtherProxy,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, skip, err := ConvertService(tt.svc, "")
			if err != nil {
				t.Fatalf("ConvertService: %v", err)
			}
			if skip != tt.wantSkip {
				t.Fatalf("skip = %q, want %q", skip, tt.wantSkip)
			}
			if diff := cmp.Diff(tt.want, got, addrCmp, prefixCmp); diff != "" {
				t.Errorf("service (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConvertServiceProxyName(t *testing.T) {
	mine := service("default", "mine", func(s *corev1.Service) {
		s.Labels = map[string]string{LabelServiceProxyName: "proxysinks"}
	})
	if svc, _, err := ConvertService(mine, "proxysinks"); err != nil || svc == nil {
		t.Errorf("labelled service not served by its named proxy: %v", err)
	}
	if _, skip, _ := ConvertService(service("default", "plain"), "proxysinks"); skip != SkipOtherProxy {
		t.Errorf("unlabelled service served by a named proxy (skip %q)", skip)
	}
}

func TestConvertServiceBadInput(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*corev1.Service)
		field string
		// kept is the number of valid ports still served (a bad port is
		// skipped); 0: the service is invalid as a whole.
		kept int
	}{
		{"bad cluster IP", func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.300"} }, "spec.clusterIPs[0]", 0},
		{"bad second cluster IP", func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.96.0.1", "fd00::zz"} }, "spec.clusterIPs[1]", 0},
		{"bad legacy cluster IP", func(s *corev1.Service) { s.Spec.ClusterIPs, s.Spec.ClusterIP = nil, "x" }, "spec.clusterIP", 0},
		{"no cluster IP", func(s *corev1.Service) { s.Spec.ClusterIPs, s.Spec.ClusterIP = nil, "" }, "spec.clusterIPs", 0},
		{"bad protocol", func(s *corev1.Service) { s.Spec.Ports[0].Protocol = "ICMP" }, "spec.ports[0].protocol", 0},
		{"port zero", func(s *corev1.Service) { s.Spec.Ports[0].Port = 0 }, "spec.ports[0].port", 0},
		{"port too big", func(s *corev1.Service) { s.Spec.Ports[0].Port = 70000 }, "spec.ports[0].port", 0},
		{"bad node port", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = -1
		}, "spec.ports[0].nodePort", 0},
		{"bad target port", func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(65536) }, "spec.ports[0].targetPort", 0},
		{"duplicate port", func(s *corev1.Service) { s.Spec.Ports = append(s.Spec.Ports, s.Spec.Ports[0]) }, "spec.ports[1].name", 1},
		{"one bad port of three", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "bad", Port: 70000}, corev1.ServicePort{Name: "b", Port: 81})
		}, "spec.ports[1].port", 2},
		{"two bad ports of three", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "bad", Port: 70000}, corev1.ServicePort{Name: "b", Port: 81, Protocol: "ICMP"})
		}, "spec.ports", 1},
		{"every port bad", func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "bad", Port: 70000})
			s.Spec.Ports[0].Port = 0
		}, "spec.ports", 0},
		{"no ports", func(s *corev1.Service) { s.Spec.Ports = nil }, "spec.ports", 0},
		{"bad type", func(s *corev1.Service) { s.Spec.Type = "Magic" }, "spec.type", 0},
		{"bad affinity timeout", func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(0))}}
		}, "spec.sessionAffinityConfig.clientIP.timeoutSeconds", 0},
		{"bad health check port", func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeLoadBalancer
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 99999
		}, "spec.healthCheckNodePort", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, _, err := ConvertService(service("prod", "web", tt.edit), "")
			if tt.kept == 0 && svc != nil {
				t.Fatalf("invalid service converted: %+v", svc)
			}
			if tt.kept > 0 && (svc == nil || len(svc.Ports) != tt.kept) {
				t.Fatalf("service with bad ports: %+v, want it served with %d ports", svc, tt.kept)
			}
			var oe *client.ObjectError
			if !errors.As(err, &oe) {
				t.Fatalf("error %v is not an ObjectError", err)
			}
			want := client.ObjectError{Kind: "Service", Namespace: "prod", Name: "web", Field: tt.field}
			if oe.Kind != want.Kind || oe.Namespace != want.Namespace || oe.Name != want.Name || oe.Field != want.Field {
				t.Errorf("error names %s %s/%s field %q, want field %q (%v)", oe.Kind, oe.Namespace, oe.Name, oe.Field, want.Field, err)
			}
			t.Log(err)
		})
	}
}
