package render

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
)

// Two rules of kube-proxy v1.37.2's IPVS mode (pkg/proxy/ipvs) that the
// kube-proxy differential holds ours to (e2e/vmtests): a virtual server
// whose Local traffic policy leaves it no endpoint gets the cluster
// endpoints, and every endpoint on this node has its KUBE-LOOP-BACK entry,
// a destination or not.
func TestLocalPolicyFallbackAndLoopBack(t *testing.T) {
	port := []client.Port{{Name: "http", Protocol: client.TCP, Port: 80, NodePort: 30080}}
	// A ready endpoint on another node: one of the cluster endpoints
	// (Cluster), whatever the policies give it.
	remote := ep("remote", false, true, false, "10.244.2.5")
	remote.Cluster = true
	clusterOnly := func(name, ip string) *client.Endpoint {
		e := ep(name, false, false, false, ip)
		e.Cluster = true
		return e
	}
	term := ep("term", true, false, false, "10.244.1.6") // on this node, terminating, no destination
	term.Ready, term.Terminating = false, true
	notReady := ep("not-ready", true, false, false, "10.244.1.7")
	notReady.Ready, notReady.Serving = false, false
	tests := []struct {
		name string
		svc  client.Service
		eps  []*client.Endpoint
		want []string // destinations and KUBE-LOOP-BACK entries
	}{{
		name: "eTP=Local, no local endpoint: the node port gets the cluster endpoints",
		svc:  client.Service{Type: client.NodePort, ExternalTrafficLocal: true},
		eps:  []*client.Endpoint{remote},
		want: []string{
			"dest 10.244.2.5:8080 on TCP/10.96.0.40:80 w1",
			"dest 10.244.2.5:8080 on TCP/192.168.1.10:30080 w1",
		},
	}, {
		name: "eTP=Local with a local endpoint: only that one",
		svc:  client.Service{Type: client.NodePort, ExternalTrafficLocal: true},
		eps:  []*client.Endpoint{remote, ep("local", true, true, true, "10.244.1.5")},
		want: []string{
			"dest 10.244.1.5:8080 on TCP/10.96.0.40:80 w1",
			"dest 10.244.1.5:8080 on TCP/192.168.1.10:30080 w1",
			"dest 10.244.2.5:8080 on TCP/10.96.0.40:80 w1",
			"set KUBE-LOOP-BACK 10.244.1.5,tcp:8080,10.244.1.5",
		},
	}, {
		name: "iTP=Local of a NodePort, no local endpoint: the cluster IP gets the cluster endpoints",
		svc:  client.Service{Type: client.NodePort, InternalTrafficLocal: true},
		eps:  []*client.Endpoint{func() *client.Endpoint { e := clusterOnly("remote", "10.244.2.5"); e.External = true; return e }()},
		want: []string{
			"dest 10.244.2.5:8080 on TCP/10.96.0.40:80 w1",
			"dest 10.244.2.5:8080 on TCP/192.168.1.10:30080 w1",
		},
	}, {
		name: "iTP=Local of a ClusterIP service, no local endpoint: nothing (no cluster endpoints)",
		svc:  client.Service{Type: client.ClusterIP, InternalTrafficLocal: true},
		eps:  []*client.Endpoint{clusterOnly("remote", "10.244.2.5")},
	}, {
		name: "both Local, no local endpoint: both servers get the cluster endpoints",
		svc:  client.Service{Type: client.NodePort, InternalTrafficLocal: true, ExternalTrafficLocal: true},
		eps:  []*client.Endpoint{clusterOnly("remote", "10.244.2.5"), ep("not-cluster", false, false, false, "10.244.3.5")},
		want: []string{
			"dest 10.244.2.5:8080 on TCP/10.96.0.40:80 w1",
			"dest 10.244.2.5:8080 on TCP/192.168.1.10:30080 w1",
		},
	}, {
		name: "eTP=Cluster: no fallback needed",
		svc:  client.Service{Type: client.NodePort},
		eps:  []*client.Endpoint{remote, ep("other", false, false, false, "10.244.3.5")},
		want: []string{"dest 10.244.2.5:8080 on TCP/10.96.0.40:80 w1"},
	}, {
		name: "local terminating and not-ready endpoints: loop-back entries, no destinations",
		svc:  client.Service{Type: client.ClusterIP},
		eps:  []*client.Endpoint{ep("ready", false, true, true, "10.244.2.5"), term, notReady},
		want: []string{
			"dest 10.244.2.5:8080 on TCP/10.96.0.40:80 w1",
			"set KUBE-LOOP-BACK 10.244.1.6,tcp:8080,10.244.1.6",
			"set KUBE-LOOP-BACK 10.244.1.7,tcp:8080,10.244.1.7",
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := tc.svc
			svc.Namespace, svc.Name, svc.ClusterIPs, svc.Ports = "default", "svc", ips("10.96.0.40"), port
			r := render(t, &client.ServiceEndpoints{Service: &svc, Endpoints: tc.eps}, Config{Weight: 1, NodeAddresses: []netip.Addr{node4}})
			got := append(r.sorted("dest "), r.sorted("set KUBE-LOOP-BACK")...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("destinations and loop-back entries (-want +got):\n%s", diff)
			}
		})
	}
}
