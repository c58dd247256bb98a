package iptables_test

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/iptables"
)

// A dry run prints the iptables-restore input instead of writing it.
func Example() {
	var out strings.Builder
	p, err := iptables.NewProxier(iptables.Config{IPv4: true, MasqueradeBit: 14, DryRun: &out})
	if err != nil {
		fmt.Println(err)
		return
	}
	svc := &client.Service{Namespace: "default", Name: "web", Type: client.ClusterIP,
		ClusterIPs: client.IPs{V4: []netip.Addr{netip.MustParseAddr("10.96.0.10")}},
		Ports:      []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, TargetPort: 8080}}}
	ep := &client.Endpoint{Key: "Pod/default/web-0", IPs: client.IPs{V4: []netip.Addr{netip.MustParseAddr("10.244.1.5")}},
		Ready: true, Serving: true, Internal: true,
		PortOverrides: []client.PortOverride{{Name: "http", Protocol: client.TCP, Port: 8080}}}
	se := &client.ServiceEndpoints{Service: svc, Endpoints: []*client.Endpoint{ep}}
	st, err := p.Snapshot(client.NewSnapshot([]*client.ServiceEndpoints{se}, []client.Change{{Key: svc.Key(), Service: se}}))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "KUBE-SVC-CDGGSHYLG3RE2FKL") && strings.HasPrefix(l, "-A ") {
			fmt.Fprintln(os.Stdout, l)
		}
	}
	fmt.Println("restores:", st.Restores)
	// Output:
	// -A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http -> 10.244.1.5:8080" -j KUBE-SEP-AFGSLHOD2HFNCBX4
	// -A KUBE-SERVICES -d 10.96.0.10 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-CDGGSHYLG3RE2FKL
	// restores: 1
}
