package render

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// TestUnservableAddresses: a cluster, external or load-balancer IP that
// must never be served (the node's own as a cluster IP, loopback,
// broadcast, unspecified, multicast, link-local, a family the node does
// not serve) is rejected alone, with an error naming the service, the
// field and the address; the service's other addresses are served.
func TestUnservableAddresses(t *testing.T) {
	good := "10.96.0.10"
	tests := []struct {
		name     string
		field    string
		bad      string
		families []xtables.Family
	}{
		{"node address as cluster IP", "clusterIPs", "192.168.1.10", nil},
		{"loopback cluster IP", "clusterIPs", "127.0.0.1", nil},
		{"broadcast cluster IP", "clusterIPs", "255.255.255.255", nil},
		{"unspecified cluster IP", "clusterIPs", "0.0.0.0", nil},
		{"unspecified IPv6 cluster IP", "clusterIPs", "::", nil},
		{"multicast cluster IP", "clusterIPs", "224.0.0.1", nil},
		{"link-local cluster IP", "clusterIPs", "169.254.1.1", nil},
		{"IPv6 cluster IP on an IPv4-only node", "clusterIPs", "fd00::10", []xtables.Family{xtables.IPv4}},
		{"loopback external IP", "externalIPs", "127.0.0.2", nil},
		{"unspecified external IP", "externalIPs", "0.0.0.0", nil},
		{"link-local IPv6 external IP", "externalIPs", "fe80::1", nil},
		{"multicast load-balancer IP", "status.loadBalancer.ingress", "ff02::1", nil},
		{"broadcast load-balancer IP", "status.loadBalancer.ingress", "255.255.255.255", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := &client.Service{Namespace: "default", Name: "web", Type: client.LoadBalancer,
				ClusterIPs: ips(good), Ports: []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, NodePort: 30080}}}
			switch tt.field {
			case "clusterIPs":
				svc.ClusterIPs.Add(ip(tt.bad))
			case "externalIPs":
				svc.ExternalIPs.Add(ip(tt.bad))
			default:
				svc.LoadBalancerIPs.Add(ip(tt.bad))
			}
			cfg := nodeCfg
			cfg.Families = tt.families
			r := &recorder{}
			errs := Render(&client.ServiceEndpoints{Service: svc}, cfg, r)
			if len(errs) != 1 {
				t.Fatalf("errors %v, want one", errs)
			}
			var re *Error
			if !errors.As(errs[0], &re) || re.Service != svc.Key() || re.Field != tt.field || !strings.Contains(re.Error(), tt.bad) {
				t.Errorf("error %v does not name service default/web, field %s and %s", errs[0], tt.field, tt.bad)
			}
			var servers []string
			for _, l := range r.sorted("") {
				if strings.Contains(l, " "+tt.bad+",") || strings.HasSuffix(l, " "+tt.bad) ||
					strings.Contains(l, "/"+netip.AddrPortFrom(ip(tt.bad), 80).String()) {
					t.Errorf("%s reached the kernel objects: %s", tt.bad, l)
				}
				if strings.HasPrefix(l, "vs ") {
					servers = append(servers, l)
				}
			}
			want := []string{"vs TCP/10.96.0.10:80 rr", "vs TCP/192.168.1.10:30080 rr"}
			if d := cmp.Diff(want, servers); d != "" {
				t.Errorf("virtual servers -want +got:\n%s", d)
			}
		})
	}
}

// TestExternalIPOnNodeAddressServed: an external IP that is the node's own
// address is served without binding it (kube-proxy does the same).
func TestExternalIPOnNodeAddressServed(t *testing.T) {
	svc := &client.Service{Namespace: "default", Name: "web", Type: client.ClusterIP, ClusterIPs: ips("10.96.0.10"),
		ExternalIPs: ips("192.168.1.10"), Ports: []client.Port{{Name: "http", Protocol: client.TCP, Port: 80}}}
	r := render(t, &client.ServiceEndpoints{Service: svc}, nodeCfg)
	if d := cmp.Diff([]string{"bind 10.96.0.10"}, r.sorted("bind ")); d != "" {
		t.Errorf("bindings -want +got:\n%s", d)
	}
	if !r.lines["vs TCP/192.168.1.10:80 rr"] {
		t.Errorf("the external IP on the node address is not served: %v", r.sorted("vs "))
	}
}
