package client

import "testing"

func TestNoLocalEndpoints(t *testing.T) {
	local := &Endpoint{Key: "a", Local: true, Ready: true, Serving: true}
	servingOnly := &Endpoint{Key: "b", Local: true, Serving: true, Terminating: true}
	remote := &Endpoint{Key: "c", Ready: true, Serving: true}
	gone := &Endpoint{Key: "d", Local: true, Terminating: true}
	for _, tc := range []struct {
		name string
		se   *ServiceEndpoints
		want bool
	}{
		{"cluster policies", &ServiceEndpoints{Service: &Service{}, Endpoints: []*Endpoint{remote}}, false},
		{"eTP=Local, a ready local endpoint", &ServiceEndpoints{Service: &Service{ExternalTrafficLocal: true}, Endpoints: []*Endpoint{remote, local}}, false},
		{"iTP=Local, a serving terminating local endpoint", &ServiceEndpoints{Service: &Service{InternalTrafficLocal: true}, Endpoints: []*Endpoint{servingOnly}}, false},
		{"eTP=Local, remote endpoints only", &ServiceEndpoints{Service: &Service{ExternalTrafficLocal: true}, Endpoints: []*Endpoint{remote}}, true},
		{"iTP=Local, a local endpoint that no longer serves", &ServiceEndpoints{Service: &Service{InternalTrafficLocal: true}, Endpoints: []*Endpoint{gone}}, true},
		{"no service", &ServiceEndpoints{}, false},
	} {
		if got := tc.se.NoLocalEndpoints(); got != tc.want {
			t.Errorf("%s: NoLocalEndpoints() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
