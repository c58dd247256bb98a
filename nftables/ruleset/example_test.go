package ruleset_test

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// A ClusterIP service with two ready endpoints: its cluster IP in
// cluster-ips, its verdict in service-ips, and its chain picking an
// endpoint at random.
func ExampleRender() {
	svc := &client.Service{Namespace: "default", Name: "web", Type: client.ClusterIP,
		ClusterIPs: client.IPs{V4: []netip.Addr{netip.MustParseAddr("10.96.0.10")}},
		Ports:      []client.Port{{Name: "http", Protocol: client.TCP, Port: 80}}}
	var eps []*client.Endpoint
	for i, ip := range []string{"10.244.1.5", "10.244.2.5"} {
		eps = append(eps, &client.Endpoint{Key: client.EndpointKey(fmt.Sprint("Pod/default/web-", i)),
			IPs:   client.IPs{V4: []netip.Addr{netip.MustParseAddr(ip)}},
			Ready: true, Serving: true, Internal: true, Cluster: true,
			PortOverrides: []client.PortOverride{{Name: "http", Protocol: client.TCP, Port: 8080}}})
	}
	s := client.NewSnapshot([]*client.ServiceEndpoints{{Service: svc, Endpoints: eps}}, nil)
	v4, _, err := ruleset.Render(s, ruleset.Config{})
	if err != nil {
		panic(err)
	}
	for _, line := range strings.Split(v4.Script(), "\n") {
		if strings.Contains(line, "default/web") || strings.HasPrefix(line, "add element ip kube-proxy cluster-ips") {
			fmt.Println(line)
		}
	}
	// Output:
	// add chain ip kube-proxy service-SUSTUHLJ-default/web/tcp/http
	// add element ip kube-proxy cluster-ips { 10.96.0.10 }
	// add element ip kube-proxy service-ips { 10.96.0.10 . tcp . 80 : goto service-SUSTUHLJ-default/web/tcp/http }
	// add rule ip kube-proxy service-SUSTUHLJ-default/web/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.244.1.5 . 8080 , 1 : 10.244.2.5 . 8080 }
}
