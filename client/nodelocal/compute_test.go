package nodelocal

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/proxysinks/proxysinks/client"
)

// summary renders an endpoint compactly: key, addresses, then the flags that
// are set among local, ready, serving, terminating, I(nternal), E(xternal),
// then the port overrides.
func summary(e *client.Endpoint) string {
	parts := []string{string(e.Key)}
	for _, a := range e.IPs.All() {
		parts = append(parts, a.String())
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{e.Local, "local"}, {e.Ready, "ready"}, {e.Serving, "serving"}, {e.Terminating, "terminating"}, {e.Internal, "I"}, {e.External, "E"}} {
		if f.on {
			parts = append(parts, f.name)
		}
	}
	for _, p := range e.PortOverrides {
		parts = append(parts, fmt.Sprintf("%s/%s=%d", p.Name, p.Protocol, p.Port))
	}
	return strings.Join(parts, " ")
}

var (
	yes = ptr(true)
	no  = ptr(false)
)

func TestCompute(t *testing.T) {
	node := Node{Name: "node-a", Zone: "zone-a"}
	nodePort := func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }
	eTPLocal := func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }
	iTPLocal := func(s *corev1.Service) {
		s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
	}
	tests := []struct {
		name   string
		svc    []func(*corev1.Service)
		slices []*discoveryv1.EndpointSlice
		node   Node
		want   []string
	}{
		{
			name: "cluster IP: ready endpoints serve internal traffic, local one marked",
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.0.1", pod: "a", node: "node-a"},
				{addr: "10.244.1.1", pod: "b", node: "node-b"},
				{addr: "10.244.1.2", pod: "c", node: "node-b", ready: no, serving: no},
			})},
			want: []string{
				"Pod/default/a 10.244.0.1 local ready serving I http/TCP=8080",
				"Pod/default/b 10.244.1.1 ready serving I http/TCP=8080",
				"Pod/default/c 10.244.1.2 http/TCP=8080",
			},
		},
		{
			name: "node port: ready endpoints serve both",
			svc:  []func(*corev1.Service){nodePort},
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.0.1", pod: "a", node: "node-a"},
				{addr: "10.244.1.1", pod: "b", node: "node-b"},
			})},
			want: []string{
				"Pod/default/a 10.244.0.1 local ready serving I E http/TCP=8080",
				"Pod/default/b 10.244.1.1 ready serving I E http/TCP=8080",
			},
		},
		{
			name: "eTP=Local: external traffic to local endpoints only",
			svc:  []func(*corev1.Service){nodePort, eTPLocal},
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.0.1", pod: "a", node: "node-a"},
				{addr: "10.244.1.1", pod: "b", node: "node-b"},
			})},
			want: []string{
				"Pod/default/a 10.244.0.1 local ready serving I E http/TCP=8080",
				"Pod/default/b 10.244.1.1 ready serving I http/TCP=8080",
			},
		},
		{
			name: "eTP=Local without local endpoints: no external backends",
			svc:  []func(*corev1.Service){nodePort, eTPLocal},
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.1.1", pod: "b", node: "node-b"},
			})},
			want: []string{"Pod/default/b 10.244.1.1 ready serving I http/TCP=8080"},
		},
		{
			name: "iTP=Local: cluster traffic to local endpoints, external (node port) to all",
			svc:  []func(*corev1.Service){nodePort, iTPLocal},
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.0.1", pod: "a", node: "node-a"},
				{addr: "10.244.1.1", pod: "b", node: "node-b"},
			})},
			want: []string{
				"Pod/default/a 10.244.0.1 local ready serving I E http/TCP=8080",
				"Pod/default/b 10.244.1.1 ready serving E http/TCP=8080",
			},
		},
		{
			name: "serving terminating endpoints used only when none is ready",
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.0.1", pod: "a", node: "node-a", ready: no, serving: yes, terminating: yes},
				{addr: "10.244.1.1", pod: "b", node: "node-b", ready: no, serving: no, terminating: yes},
				{addr: "10.244.1.2", pod: "c", node: "node-b", ready: no, serving: yes, terminating: yes},
			})},
			want: []string{
				"Pod/default/a 10.244.0.1 local serving terminating I http/TCP=8080",
				"Pod/default/b 10.244.1.1 terminating http/TCP=8080",
				"Pod/default/c 10.244.1.2 serving terminating I http/TCP=8080",
			},
		},
		{
			// kube-proxy: an unset serving condition means serving.
			name: "serving unset on a terminating endpoint that is not ready: the fallback",
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.1.1", pod: "b", node: "node-b", ready: no, terminating: yes},
			})},
			want: []string{
				"Pod/default/b 10.244.1.1 serving terminating I http/TCP=8080",
			},
		},
		{
			name: "serving terminating endpoints not used while one is ready",
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.0.1", pod: "a", node: "node-a", ready: no, serving: yes, terminating: yes},
				{addr: "10.244.1.1", pod: "b", node: "node-b"},
			})},
			want: []string{
				"Pod/default/a 10.244.0.1 local serving terminating http/TCP=8080",
				"Pod/default/b 10.244.1.1 ready serving I http/TCP=8080",
			},
		},
		{
			name: "eTP=Local falls back to the local serving terminating endpoint",
			svc:  []func(*corev1.Service){nodePort, eTPLocal},
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.0.1", pod: "a", node: "node-a", ready: no, serving: yes, terminating: yes},
				{addr: "10.244.1.1", pod: "b", node: "node-b"},
			})},
			want: []string{
				"Pod/default/a 10.244.0.1 local serving terminating E http/TCP=8080",
				"Pod/default/b 10.244.1.1 ready serving I http/TCP=8080",
			},
		},
		{
			name: "zone hints for this zone narrow cluster endpoints",
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.0.1", pod: "a", node: "node-x", zone: "zone-a", zoneHints: []string{"zone-a"}},
				{addr: "10.244.1.1", pod: "b", node: "node-b", zone: "zone-b", zoneHints: []string{"zone-b"}},
				{addr: "10.244.2.1", pod: "c", node: "node-c", zone: "zone-c", zoneHints: []string{"zone-c", "zone-a"}},
			})},
			want: []string{
				"Pod/default/a 10.244.0.1 ready serving I http/TCP=8080",
				"Pod/default/b 10.244.1.1 ready serving http/TCP=8080",
				"Pod/default/c 10.244.2.1 ready serving I http/TCP=8080",
			},
		},
		{
			name: "zone hints ignored when one ready endpoint has none",
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.0.1", pod: "a", zoneHints: []string{"zone-a"}},
				{addr: "10.244.1.1", pod: "b"},
			})},
			want: []string{
				"Pod/default/a 10.244.0.1 ready serving I http/TCP=8080",
				"Pod/default/b 10.244.1.1 ready serving I http/TCP=8080",
			},
		},
		{
			name: "zone hints ignored when none names this zone",
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.0.1", pod: "a", zoneHints: []string{"zone-b"}},
				{addr: "10.244.1.1", pod: "b", zoneHints: []string{"zone-c"}},
			})},
			want: []string{
				"Pod/default/a 10.244.0.1 ready serving I http/TCP=8080",
				"Pod/default/b 10.244.1.1 ready serving I http/TCP=8080",
			},
		},
		{
			name: "zone hints ignored on a node without zone",
			node: Node{Name: "node-a"},
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.0.1", pod: "a", zoneHints: []string{"zone-a"}},
				{addr: "10.244.1.1", pod: "b", zoneHints: []string{"zone-b"}},
			})},
			want: []string{
				"Pod/default/a 10.244.0.1 ready serving I http/TCP=8080",
				"Pod/default/b 10.244.1.1 ready serving I http/TCP=8080",
			},
		},
		{
			name: "node hints take precedence over zone hints",
			slices: []*discoveryv1.EndpointSlice{slice("default", "web-1", "web", false, []epSpec{
				{addr: "10.244.0.1", pod: "a", node: "node-a", zoneHints: []string{"zone-a"}, nodeHints: []string{"node-a"}},
				{addr: "10.244.0.2", pod: "b", node: "node-z", zoneHints: []string{"zone-a"}, nodeHints: []string{"node-z"}},
			})},
			want: []string{
				"Pod/default/a 10.244.0.1 local ready serving I http/TCP=8080",
				"Pod/default/b 10.244.0.2 ready serving http/TCP=8080",
			},
		},
		{
			name: "dual-stack: IPv4 and IPv6 slices merge by pod",
			slices: []*discoveryv1.EndpointSlice{
				slice("default", "web-v6", "web", true, []epSpec{{addr: "fd00:244::1", pod: "a", node: "node-a"}, {addr: "fd00:244::2", pod: "b"}}),
				slice("default", "web-v4", "web", false, []epSpec{{addr: "10.244.0.1", pod: "a", node: "node-a"}}),
			},
			want: []string{
				"Pod/default/a 10.244.0.1 fd00:244::1 local ready serving I http/TCP=8080",
				"Pod/default/b fd00:244::2 ready serving I http/TCP=8080",
			},
		},
		{
			name: "multiple slices, duplicates removed, ready copy preferred, endpoints without targetRef keyed by address",
			slices: []*discoveryv1.EndpointSlice{
				slice("default", "web-1", "web", false, []epSpec{{addr: "10.244.0.1", pod: "a", ready: no}, {addr: "10.244.0.9"}}),
				slice("default", "web-2", "web", false, []epSpec{{addr: "10.244.0.1", pod: "a"}, {addr: "10.244.0.2", pod: "b"}}),
				slice("default", "web-3", "web", false, []epSpec{{addr: "10.244.0.2", pod: "intruder"}, {addr: "10.244.0.9"}}),
			},
			want: []string{
				"10.244.0.9 10.244.0.9 ready serving I http/TCP=8080",
				"Pod/default/a 10.244.0.1 ready serving I http/TCP=8080",
				"Pod/default/b 10.244.0.2 ready serving I http/TCP=8080",
			},
		},
		{
			name: "named ports: each slice gives its own port numbers",
			slices: []*discoveryv1.EndpointSlice{
				slice("default", "web-1", "web", false, []epSpec{{addr: "10.244.0.1", pod: "a"}},
					discoveryv1.EndpointPort{Name: ptr("http"), Port: ptr(int32(8080))},
					discoveryv1.EndpointPort{Name: ptr("dns"), Protocol: ptr(corev1.ProtocolUDP), Port: ptr(int32(53))},
					discoveryv1.EndpointPort{Name: ptr("all")}),
				slice("default", "web-2", "web", false, []epSpec{{addr: "10.244.0.2", pod: "b"}},
					discoveryv1.EndpointPort{Name: ptr("http"), Port: ptr(int32(9090))}),
			},
			want: []string{
				"Pod/default/a 10.244.0.1 ready serving I dns/UDP=53 http/TCP=8080",
				"Pod/default/b 10.244.0.2 ready serving I http/TCP=9090",
			},
		},
		{
			name: "no slices",
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, _, err := ConvertService(service("default", "web", tt.svc...), "")
			if err != nil {
				t.Fatal(err)
			}
			var sl []*Slice
			for _, es := range tt.slices {
				s, err := ParseSlice(es)
				if err != nil {
					t.Fatal(err)
				}
				sl = append(sl, s)
			}
			n := tt.node
			if n == (Node{}) {
				n = node
			}
			se := Compute(svc, sl, n)
			if se.Service != svc {
				t.Error("Compute did not keep the service")
			}
			var got []string
			for _, e := range se.Endpoints {
				got = append(got, summary(e))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
			// Slice order must not matter.
			for i, j := 0, len(sl)-1; i < j; i, j = i+1, j-1 {
				sl[i], sl[j] = sl[j], sl[i]
			}
			if again := Compute(svc, sl, n); !again.Equal(se) {
				t.Error("result depends on slice order")
			}
		})
	}
}

func TestParseSliceBadInput(t *testing.T) {
	good := func() *discoveryv1.EndpointSlice {
		return slice("prod", "web-abc", "web", false, []epSpec{{addr: "10.244.0.1", pod: "a"}})
	}
	tests := []struct {
		name  string
		edit  func(*discoveryv1.EndpointSlice)
		field string
	}{
		{"bad protocol", func(es *discoveryv1.EndpointSlice) { es.Ports[0].Protocol = ptr(corev1.Protocol("QUIC")) }, "ports[0].protocol"},
		{"bad port", func(es *discoveryv1.EndpointSlice) { es.Ports[0].Port = ptr(int32(0)) }, "ports[0].port"},
		{"duplicate port", func(es *discoveryv1.EndpointSlice) { es.Ports = append(es.Ports, es.Ports[0]) }, "ports"},
		{"bad address type", func(es *discoveryv1.EndpointSlice) { es.AddressType = "IPX" }, "addressType"},
		{"no service label", func(es *discoveryv1.EndpointSlice) { es.Labels = nil }, "metadata.labels[kubernetes.io/service-name]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := good()
			tt.edit(es)
			s, err := ParseSlice(es)
			if s != nil {
				t.Fatal("invalid slice parsed")
			}
			var oe *client.ObjectError
			if !errors.As(err, &oe) {
				t.Fatalf("error %v is not an ObjectError", err)
			}
			if oe.Kind != "EndpointSlice" || oe.Namespace != "prod" || oe.Name != "web-abc" || oe.Field != tt.field {
				t.Errorf("error names %s %s/%s field %q, want field %q (%v)", oe.Kind, oe.Namespace, oe.Name, oe.Field, tt.field, err)
			}
		})
	}
	fqdn := good()
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	if s, err := ParseSlice(fqdn); s != nil || err != nil {
		t.Errorf("FQDN slice = %v, %v; want ignored", s, err)
	}
	// kube-proxy v1.37.2 watches EndpointSlices without this label only
	// (upstream e2e "should implement service.kubernetes.io/headless").
	headless := good()
	headless.Labels[corev1.IsHeadlessService] = ""
	if s, err := ParseSlice(headless); s != nil || err != nil {
		t.Errorf("slice labelled %s = %v, %v; want ignored", corev1.IsHeadlessService, s, err)
	}
}

// TestComputeCluster checks the Cluster flag: kube-proxy's cluster
// endpoints, whatever the traffic policies (topology hints narrow them,
// serving terminating endpoints stand in when none is ready), which sinks
// need when both policies are Local and no endpoint is on this node.
func TestComputeCluster(t *testing.T) {
	node := Node{Name: "node-a", Zone: "zone-a"}
	bothLocalNodePort := func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
	}
	tests := []struct {
		name string
		svc  []func(*corev1.Service)
		eps  []epSpec
		want []string // keys of the endpoints with Cluster set
	}{
		{
			name: "both Local, no local endpoint: the ready remote ones",
			svc:  []func(*corev1.Service){bothLocalNodePort},
			eps: []epSpec{
				{addr: "10.244.1.1", pod: "b", node: "node-b"},
				{addr: "10.244.1.2", pod: "c", node: "node-b", ready: no},
			},
			want: []string{"Pod/default/b"},
		},
		{
			name: "both Local: topology hints narrow them",
			svc:  []func(*corev1.Service){bothLocalNodePort},
			eps: []epSpec{
				{addr: "10.244.1.1", pod: "b", node: "node-b", zoneHints: []string{"zone-a"}},
				{addr: "10.244.2.1", pod: "c", node: "node-c", zoneHints: []string{"zone-b"}},
			},
			want: []string{"Pod/default/b"},
		},
		{
			name: "both Local: serving terminating ones when none is ready",
			svc:  []func(*corev1.Service){bothLocalNodePort},
			eps: []epSpec{
				{addr: "10.244.1.1", pod: "b", node: "node-b", ready: no, serving: yes, terminating: yes},
				{addr: "10.244.1.2", pod: "c", node: "node-b", ready: no, serving: no, terminating: yes},
			},
			want: []string{"Pod/default/b"},
		},
		{
			name: "cluster IP with iTP=Local: the same set, Internal only on the local one",
			svc: []func(*corev1.Service){func(s *corev1.Service) {
				s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
			}},
			eps: []epSpec{
				{addr: "10.244.0.1", pod: "a", node: "node-a"},
				{addr: "10.244.1.1", pod: "b", node: "node-b"},
			},
			want: []string{"Pod/default/a", "Pod/default/b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc, _, err := ConvertService(service("default", "web", tt.svc...), "")
			if err != nil {
				t.Fatal(err)
			}
			s, err := ParseSlice(slice("default", "web-1", "web", false, tt.eps))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range Compute(svc, []*Slice{s}, node).Endpoints {
				if e.Cluster {
					got = append(got, string(e.Key))
				}
				if (e.Internal || e.External) && !e.Local {
					t.Errorf("%s: Internal or External on a remote endpoint under Local policies", e.Key)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Cluster endpoints (-want +got):\n%s", diff)
			}
		})
	}
}
