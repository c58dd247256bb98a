package nodelocal

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/proxysinks/proxysinks/client"
)

// kube-proxy v1.37.2's input rules (REFERENCE "Input rules kube-proxy
// applies"): what it accepts, repairs and ignores, value by value.

func TestParseIPLikeKubeProxy(t *testing.T) {
	tests := []struct {
		in     string
		want   string // "" when refused
		repair repair
	}{
		{"192.0.2.52", "192.0.2.52", repair{}},
		{"192.0.2.052", "192.0.2.52", repair{sloppy: true}}, // decimal, not octal
		{"010.000.002.00000001", "10.0.2.1", repair{sloppy: true}},
		{"::ffff:192.0.2.1", "192.0.2.1", repair{mapped: true}},
		{"::ffff:192.0.2.052", "192.0.2.52", repair{sloppy: true, mapped: true}},
		{"2001:db8::1", "2001:db8::1", repair{}},
		{"2001:0db8:0000::00001", "2001:db8::1", repair{sloppy: true}},
		{"2001:db8::10000", "", repair{}},
		{"192.0.2.256", "", repair{}},
		{"192.0.2", "", repair{}},
		{"192.0.2.1 ", "", repair{}},
		{" 192.0.2.1", "", repair{}},
		{"fe80::1%eth0", "", repair{}},
		{"not-an-ip", "", repair{}},
		{"", "", repair{}},
		{"192.0.2.1/32", "", repair{}},
	}
	for _, tt := range tests {
		a, r, err := parseIP(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("parseIP(%q) = %v, want an error", tt.in, a)
			}
			continue
		}
		if err != nil || a != netip.MustParseAddr(tt.want) || r != tt.repair {
			t.Errorf("parseIP(%q) = %v, %+v, %v; want %s, %+v", tt.in, a, r, err, tt.want, tt.repair)
		}
	}
}

func TestParseCIDRLikeKubeProxy(t *testing.T) {
	tests := []struct {
		in     string
		want   string // "" when refused
		repair repair
	}{
		{"10.0.0.0/8", "10.0.0.0/8", repair{}},
		{"10.1.2.3/8", "10.0.0.0/8", repair{masked: true}},
		{"010.0.0.0/08", "10.0.0.0/8", repair{sloppy: true}},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8", repair{mapped: true}},
		{"::ffff:10.1.0.0/104", "10.0.0.0/8", repair{mapped: true, masked: true}},
		{"::ffff:0.0.0.0/96", "0.0.0.0/0", repair{mapped: true}},
		{"::ffff:10.0.0.0/80", "::/80", repair{masked: true}}, // the ffff is masked away: IPv6
		{"0.0.0.0/0", "0.0.0.0/0", repair{}},
		{"::/0", "::/0", repair{}},
		{"2001:db8::/32", "2001:db8::/32", repair{}},
		{"10.0.0.0/33", "", repair{}},
		{"2001:db8::/129", "", repair{}},
		{"10.0.0.0", "", repair{}},
		{"10.0.0.0/", "", repair{}},
		{"10.0.0.0/+8", "", repair{}},
		{"garbage", "", repair{}},
		{"fe80::%eth0/64", "", repair{}},
	}
	for _, tt := range tests {
		p, r, err := parseCIDR(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("parseCIDR(%q) = %v, want an error", tt.in, p)
			}
			continue
		}
		if err != nil || p != netip.MustParsePrefix(tt.want) || r != tt.repair {
			t.Errorf("parseCIDR(%q) = %v, %+v, %v; want %s, %+v", tt.in, p, r, err, tt.want, tt.repair)
		}
	}
}

// lb returns a LoadBalancer service with one ingress IP per family given.
func lb(opts ...func(*corev1.Service)) *corev1.Service {
	return service("default", "lb", append([]func(*corev1.Service){func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 31080
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.1"}}
	}}, opts...)...)
}

func dualStack(s *corev1.Service) {
	s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:10:96::a"}
	s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: "2001:db8:2::1"})
}

func TestConvertServiceInputRules(t *testing.T) {
	type result struct {
		ExternalIPs     []string
		LoadBalancerIPs []string
		Ranges          []string
		Adjustments     []string
	}
	tests := []struct {
		name string
		svc  *corev1.Service
		want result
	}{
		{
			name: "a bad external IP is skipped alone, legacy leading zeros are decimal",
			svc: lb(func(s *corev1.Service) {
				s.Spec.ExternalIPs = []string{"192.0.2.50", "not-an-ip", "", "192.0.2.052"}
			}),
			want: result{
				ExternalIPs:     []string{"192.0.2.50", "192.0.2.52"},
				LoadBalancerIPs: []string{"198.51.100.1"},
				Adjustments: []string{
					`spec.externalIPs[1] "not-an-ip": skipped (invalid IP "not-an-ip")`,
					`spec.externalIPs[2] "": skipped (invalid IP "")`,
					`spec.externalIPs[3] "192.0.2.052": served as 192.0.2.52 (leading zeros read as decimal)`,
				},
			},
		},
		{
			name: "a zero-length range allows all in its family; the other family keeps its ranges",
			svc: lb(dualStack, func(s *corev1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", "0.0.0.0/0", "2001:db8:1::/48"}
			}),
			want: result{
				LoadBalancerIPs: []string{"198.51.100.1", "2001:db8:2::1"},
				Ranges:          []string{"2001:db8:1::/48"},
			},
		},
		{
			name: "::/0 allows all IPv6 clients",
			svc: lb(dualStack, func(s *corev1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"::/0", "10.0.0.0/8"}
			}),
			want: result{
				LoadBalancerIPs: []string{"198.51.100.1", "2001:db8:2::1"},
				Ranges:          []string{"10.0.0.0/8"},
			},
		},
		{
			name: "an IPv4-mapped IPv6 range is its IPv4 range",
			svc: lb(func(s *corev1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"::ffff:10.0.0.0/104", " 192.168.0.0/16 "}
			}),
			want: result{
				LoadBalancerIPs: []string{"198.51.100.1"},
				Ranges:          []string{"10.0.0.0/8", "192.168.0.0/16"},
				Adjustments:     []string{`spec.loadBalancerSourceRanges[0] "::ffff:10.0.0.0/104": served as 10.0.0.0/8 (IPv4-mapped IPv6 read as IPv4)`},
			},
		},
		{
			name: "a bad range is skipped alone",
			svc: lb(func(s *corev1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"garbage", "10.0.0.0/8"}
			}),
			want: result{
				LoadBalancerIPs: []string{"198.51.100.1"},
				Ranges:          []string{"10.0.0.0/8"},
				Adjustments:     []string{`spec.loadBalancerSourceRanges[0] "garbage": skipped (invalid CIDR "garbage")`},
			},
		},
		{
			name: "every range bad: served unfiltered (fail-open, as kube-proxy)",
			svc: lb(func(s *corev1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"garbage"}
			}),
			want: result{
				LoadBalancerIPs: []string{"198.51.100.1"},
				Adjustments:     []string{`spec.loadBalancerSourceRanges[0] "garbage": skipped (invalid CIDR "garbage")`},
			},
		},
		{
			name: "the beta annotation is the cloud provider's: not enforced",
			svc: lb(func(s *corev1.Service) {
				s.Annotations = map[string]string{AnnotationSourceRanges: "10.0.0.0/8"}
			}),
			want: result{LoadBalancerIPs: []string{"198.51.100.1"}},
		},
		{
			name: "external and load-balancer IPs of a family the service lacks are skipped",
			svc: lb(func(s *corev1.Service) {
				s.Spec.ExternalIPs = []string{"192.0.2.50", "2001:db8::50"}
				s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: "2001:db8:2::1"})
			}),
			want: result{
				ExternalIPs:     []string{"192.0.2.50"},
				LoadBalancerIPs: []string{"198.51.100.1"},
				Adjustments: []string{
					`spec.externalIPs[1] "2001:db8::50": skipped (the service has no IPv6 cluster IP)`,
					`status.loadBalancer.ingress[1].ip "2001:db8:2::1": skipped (the service has no IPv6 cluster IP)`,
				},
			},
		},
		{
			name: "ipMode: VIP and unset served, Proxy and unknown modes not",
			svc: lb(func(s *corev1.Service) {
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{
					{IP: "198.51.100.1"},
					{IP: "198.51.100.2", IPMode: ptr(corev1.LoadBalancerIPModeVIP)},
					{IP: "198.51.100.3", IPMode: ptr(corev1.LoadBalancerIPModeProxy)},
					{IP: "198.51.100.4", IPMode: ptr(corev1.LoadBalancerIPMode("Tunnel"))},
					{IP: "198.51.100.5", IPMode: ptr(corev1.LoadBalancerIPMode(""))},
					{IP: "bad"},
				}
			}),
			want: result{
				LoadBalancerIPs: []string{"198.51.100.1", "198.51.100.2"},
				Adjustments: []string{
					`status.loadBalancer.ingress[3].ipMode "Tunnel": skipped (unknown ipMode: only VIP (or unset) is served)`,
					`status.loadBalancer.ingress[4].ipMode "": skipped (unknown ipMode: only VIP (or unset) is served)`,
					`status.loadBalancer.ingress[5].ip "bad": skipped (invalid IP "bad")`,
				},
			},
		},
		{
			name: "unknown policies and affinity are read as kube-proxy reads them: Cluster, None",
			svc: lb(func(s *corev1.Service) {
				s.Spec.ExternalTrafficPolicy = "Global"
				s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicy("Nearby"))
				s.Spec.SessionAffinity = "Cookie"
			}),
			want: result{
				LoadBalancerIPs: []string{"198.51.100.1"},
				Adjustments: []string{
					`spec.sessionAffinity "Cookie": served as None (unknown session affinity, read as kube-proxy reads it)`,
					`spec.externalTrafficPolicy "Global": served as Cluster (unknown policy, read as kube-proxy reads it)`,
					`spec.internalTrafficPolicy "Nearby": served as Cluster (unknown policy, read as kube-proxy reads it)`,
				},
			},
		},
		{
			name: "an IPv4-mapped external IP is IPv4",
			svc: lb(func(s *corev1.Service) {
				s.Spec.ExternalIPs = []string{"::ffff:192.0.2.50"}
			}),
			want: result{
				ExternalIPs:     []string{"192.0.2.50"},
				LoadBalancerIPs: []string{"198.51.100.1"},
				Adjustments:     []string{`spec.externalIPs[0] "::ffff:192.0.2.50": served as 192.0.2.50 (IPv4-mapped IPv6 read as IPv4)`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ConvertServiceObject(tt.svc, "")
			if c.Err != nil || c.Service == nil {
				t.Fatalf("ConvertServiceObject: %v (service %v)", c.Err, c.Service)
			}
			got := result{
				ExternalIPs:     strs(c.Service.ExternalIPs.All()),
				LoadBalancerIPs: strs(c.Service.LoadBalancerIPs.All()),
				Ranges:          strs(c.Service.LoadBalancerSourceRanges),
			}
			for _, a := range c.Adjustments {
				got.Adjustments = append(got.Adjustments, a.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func strs[T interface{ String() string }](l []T) []string {
	var out []string
	for _, v := range l {
		out = append(out, v.String())
	}
	return out
}

func TestParseSliceEndpointsSkippedAlone(t *testing.T) {
	tests := []struct {
		name string
		v6   bool
		eps  []epSpec
		want []string // the endpoints' addresses
		adj  []string
	}{
		{
			name: "IPv4: bad, other-family and address-less endpoints skipped alone; legacy and mapped repaired",
			eps: []epSpec{
				{addr: "10.244.0.1", pod: "a"}, {addr: "10.244.0.256", pod: "b"}, {addr: "fd00::1", pod: "c"},
				{addr: "", pod: "d"}, {addr: "10.244.0.010", pod: "e"}, {addr: "::ffff:10.244.0.2", pod: "f"},
			},
			want: []string{"10.244.0.1", "10.244.0.10", "10.244.0.2"},
			adj: []string{
				`endpoints[1].addresses[0] "10.244.0.256": skipped (invalid IP "10.244.0.256")`,
				`endpoints[2].addresses[0] "fd00::1": skipped (not an IPv4 address)`,
				`endpoints[3].addresses "": skipped (no address)`,
				`endpoints[4].addresses[0] "10.244.0.010": served as 10.244.0.10 (leading zeros read as decimal)`,
				`endpoints[5].addresses[0] "::ffff:10.244.0.2": served as 10.244.0.2 (IPv4-mapped IPv6 read as IPv4)`,
			},
		},
		{
			name: "IPv6: an IPv4-mapped address is skipped, its siblings kept",
			v6:   true,
			eps:  []epSpec{{addr: "fd00::1", pod: "a"}, {addr: "::ffff:10.0.0.1", pod: "b"}, {addr: "fd00::2", pod: "c"}},
			want: []string{"fd00::1", "fd00::2"},
			adj:  []string{`endpoints[1].addresses[0] "::ffff:10.0.0.1": skipped (IPv4-mapped address in an IPv6 slice)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := slice("default", "web-1", "web", tt.v6, tt.eps)
			for i := range es.Endpoints {
				if es.Endpoints[i].Addresses[0] == "" {
					es.Endpoints[i].Addresses = nil
				}
			}
			p := ParseSliceObject(es)
			if p.Err != nil || p.Slice == nil {
				t.Fatalf("ParseSliceObject: %v", p.Err)
			}
			var got, adj []string
			for i := range p.Slice.Endpoints {
				got = append(got, p.Slice.Endpoints[i].Addr().String())
			}
			for _, a := range p.Adjustments {
				adj = append(adj, a.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.adj, adj); diff != "" {
				t.Errorf("adjustments (-want +got):\n%s", diff)
			}
		})
	}
}

// Each repaired or skipped value is logged once and counted once, however
// often its object is set again; a new one in a later version is.
func TestStateAdjustmentsLoggedAndCountedOnce(t *testing.T) {
	var buf bytes.Buffer
	st := NewState(Config{NodeName: "node-a", Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	v1 := lb(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.052", "bad"} })
	for range 3 {
		if err := st.SetService(v1); err != nil {
			t.Fatal(err)
		}
	}
	es := slice("default", "lb-1", "lb", false, []epSpec{{addr: "10.244.0.1", pod: "a"}, {addr: "x", pod: "b"}})
	for range 2 {
		if err := st.SetSlice(es); err != nil {
			t.Fatal(err)
		}
	}
	v2 := lb(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.052", "bad", "worse"} })
	if err := st.SetService(v2); err != nil {
		t.Fatal(err)
	}
	type counts struct{ Repaired, Skipped, Lines int }
	stats := st.Stats()
	got := counts{int(stats.RepairedValuesTotal), int(stats.SkippedValuesTotal), strings.Count(buf.String(), "\n")}
	if diff := cmp.Diff(counts{Repaired: 1, Skipped: 3, Lines: 4}, got); diff != "" {
		t.Errorf("(-want +got):\n%s\nlog:\n%s", diff, buf.String())
	}
	for _, want := range []string{`msg="repaired value" kind=Service namespace=default name=lb field=spec.externalIPs[0] value=192.0.2.052 result=192.0.2.52`,
		`msg="skipped value" kind=EndpointSlice namespace=default name=lb-1 field=endpoints[1].addresses[0] value=x`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, buf.String())
		}
	}
	// The slice's endpoint a is served.
	se := st.Snapshot().Lookup(client.ServiceKey{Namespace: "default", Name: "lb"})
	if se == nil || len(se.Endpoints) != 1 || se.Endpoints[0].IPs.V4[0] != netip.MustParseAddr("10.244.0.1") {
		t.Errorf("served: %+v, want the one good endpoint", se)
	}
}
