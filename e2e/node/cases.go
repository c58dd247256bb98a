package node

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/e2e/netexec"
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

var web = []port{{"http", "TCP", 80, 8080, 0}}

// Conformance: should serve a basic endpoint from pods.
func caseBasicEndpoint(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 8080)
	client := c.addPod("client")
	c.write(nodeManifest, svc{name: "web", typ: "ClusterIP", clusterIP: "10.96.0.10", ports: web}.yaml(),
		slice("web", web, ep{ip: a.ip.String(), ready: true}))
	c.startSink()
	r := c.expectFrom(client.ns, "tcp", ap("10.96.0.10:80"), "pod-a")
	// Client and backend share the pod bridge: the reply crosses it without
	// the node routing it, and IPVS still un-NATs it (br_netfilter); the
	// backend sees the client pod's own address, nothing masqueraded.
	if r.Client.Addr() != client.ip {
		t.Errorf("backend saw client %s, want the client pod's %s", r.Client.Addr(), client.ip)
	}
	// Not a service port: rejected, not hanging.
	if _, err := c.get(client.ns, "tcp", ap("10.96.0.10:81")); err == nil {
		t.Error("a port the service does not have answered")
	}
}

// Conformance: should serve multiport endpoints from pods.
func caseMultiport(t *testing.T) {
	c := newCluster(t)
	ports := []port{{"http", "TCP", 80, 8080, 0}, {"admin", "TCP", 81, 9090, 0}}
	a := c.addPod("pod-a", 8080, 9090)
	client := c.addPod("client")
	c.write(nodeManifest, svc{name: "multi", typ: "ClusterIP", clusterIP: "10.96.0.11", ports: ports}.yaml(),
		slice("multi", ports, ep{ip: a.ip.String(), ready: true}))
	c.startSink()
	c.expectFrom(client.ns, "tcp", ap("10.96.0.11:80"), "pod-a")
	c.expectFrom(client.ns, "tcp", ap("10.96.0.11:81"), "pod-a")
}

// Conformance: should serve endpoints on same port and different protocols.
func caseSamePortDifferentProtocols(t *testing.T) {
	c := newCluster(t)
	requireSCTP(t)
	ports := []port{{"dns-tcp", "TCP", 53, 8053, 0}, {"dns-udp", "UDP", 53, 8053, 0}, {"dns-sctp", "SCTP", 53, 8053, 0}}
	a := c.addPod("pod-a", 8053)
	client := c.addPod("client")
	c.write(nodeManifest, svc{name: "dns", typ: "ClusterIP", clusterIP: "10.96.0.12", ports: ports}.yaml(),
		slice("dns", ports, ep{ip: a.ip.String(), ready: true}))
	c.startSink()
	for _, proto := range []string{"tcp", "udp", "sctp"} {
		c.expectFrom(client.ns, proto, ap("10.96.0.12:53"), "pod-a")
	}
}

// Conformance: should be able to create a functioning NodePort service;
// and the backend sees the node's address (masqueraded) without eTP=Local.
func caseNodePortFromOutside(t *testing.T) {
	c := newCluster(t)
	ports := []port{{"http", "TCP", 80, 8080, 30080}}
	a := c.addPod("pod-a", 8080)
	c.write(nodeManifest, svc{name: "np", typ: "NodePort", clusterIP: "10.96.0.13", ports: ports}.yaml(),
		slice("np", ports, ep{ip: a.ip.String(), ready: true}))
	c.startSink()
	r := c.expectFrom(c.ext, "tcp", ap("192.168.1.10:30080"), "pod-a")
	if r.Client.Addr() == extAddr {
		t.Errorf("without externalTrafficPolicy=Local the client address %s reached the backend unmasqueraded", r.Client.Addr())
	}
}

// externalTrafficPolicy=Local: the backend sees the client's own address.
func caseExternalTrafficLocalKeepsClientAddress(t *testing.T) {
	c := newCluster(t)
	ports := []port{{"http", "TCP", 80, 8080, 30081}}
	a := c.addPod("pod-a", 8080)
	c.write(nodeManifest, svc{name: "local", typ: "NodePort", clusterIP: "10.96.0.14", ports: ports, etpLocal: true, hcNodePort: 32001}.yaml(),
		slice("local", ports, ep{ip: a.ip.String(), ready: true}))
	c.startSink()
	r := c.expectFrom(c.ext, "tcp", ap("192.168.1.10:30081"), "pod-a")
	if r.Client.Addr() != extAddr {
		t.Errorf("backend saw client %s, want the client's own %s", r.Client.Addr(), extAddr)
	}
}

// Conformance: session affinity for a ClusterIP and a NodePort service, and
// switching it off and on.
func caseSessionAffinity(t *testing.T) {
	c := newCluster(t)
	ports := []port{{"http", "TCP", 80, 8080, 30082}}
	a := c.addPod("pod-a", 8080)
	b := c.addPod("pod-b", 8080)
	client := c.addPod("client")
	write := func(affinity bool) {
		c.write(nodeManifest, svc{name: "sticky", typ: "NodePort", clusterIP: "10.96.0.15", ports: ports, affinity: affinity}.yaml(),
			slice("sticky", ports, ep{ip: a.ip.String(), ready: true}, ep{ip: b.ip.String(), ready: true}))
	}
	seen := func(ns interface{ Path() string }, to netip.AddrPort, n int) map[string]int {
		got := map[string]int{}
		for i := 0; i < n; i++ {
			var r netexec.Reply
			var err error
			if ns == client.ns {
				r, err = c.get(client.ns, "tcp", to)
			} else {
				r, err = c.get(c.ext, "tcp", to)
			}
			if err != nil {
				t.Fatalf("request %d to %s: %v", i, to, err)
			}
			got[r.Name]++
		}
		return got
	}
	write(true)
	c.startSink()
	c.expectFrom(client.ns, "tcp", ap("10.96.0.15:80"), "pod-a", "pod-b")
	for _, target := range []struct {
		ns interface{ Path() string }
		to netip.AddrPort
	}{{client.ns, ap("10.96.0.15:80")}, {c.ext, ap("192.168.1.10:30082")}} {
		if got := seen(target.ns, target.to, 10); len(got) != 1 {
			t.Errorf("with affinity, %s was served by %v, want one backend", target.to, got)
		}
	}
	// Switch it off: both backends serve.
	write(false)
	c.eventually(20*time.Second, func() error {
		if got := seen(client.ns, ap("10.96.0.15:80"), 10); len(got) != 2 {
			return fmt.Errorf("without affinity served by %v, want both", got)
		}
		return nil
	})
	// And on again.
	write(true)
	c.eventually(20*time.Second, func() error {
		if got := seen(client.ns, ap("10.96.0.15:80"), 10); len(got) != 1 {
			return fmt.Errorf("with affinity again served by %v, want one", got)
		}
		return nil
	})
}

// ExternalIPs and a LoadBalancer ingress IP with source ranges: an allowed
// client is served, another is dropped.
func caseExternalIPAndLoadBalancerSourceRanges(t *testing.T) {
	c := newCluster(t)
	ports := []port{{"http", "TCP", 80, 8080, 30083}}
	a := c.addPod("pod-a", 8080)
	c.write(nodeManifest,
		svc{name: "eip", typ: "ClusterIP", clusterIP: "10.96.0.16", ports: ports[:1:1], externalIPs: []string{"203.0.113.10"}}.yaml(),
		slice("eip", ports, ep{ip: a.ip.String(), ready: true}),
		svc{name: "lb", typ: "LoadBalancer", clusterIP: "10.96.0.17", ports: ports, lbIP: "203.0.113.20", ranges: []string{"192.168.1.0/24"}}.yaml(),
		slice("lb", ports, ep{ip: a.ip.String(), ready: true}))
	c.startSink()
	c.expectFrom(c.ext, "tcp", ap("203.0.113.10:80"), "pod-a")
	c.expectFrom(c.ext, "tcp", ap("203.0.113.20:80"), "pod-a")
	if r, err := c.get(c.ext2, "tcp", ap("203.0.113.20:80")); err == nil {
		t.Errorf("client outside the source ranges was served by %s", r.Name)
	}
	// The external IP has no source ranges: the other client is served.
	c.expectFrom(c.ext2, "tcp", ap("203.0.113.10:80"), "pod-a")
}

// internalTrafficPolicy=Local: cluster IP traffic goes to local endpoints
// only.
func caseInternalTrafficLocal(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 8080)
	b := c.addPod("pod-b", 8080)
	client := c.addPod("client")
	c.write(nodeManifest, svc{name: "itp", typ: "ClusterIP", clusterIP: "10.96.0.18", ports: web, itpLocal: true}.yaml(),
		slice("itp", web, ep{ip: a.ip.String(), ready: true}, ep{ip: b.ip.String(), ready: true, node: "node-2"}))
	c.startSink()
	for i := 0; i < 10; i++ {
		c.expectFrom(client.ns, "tcp", ap("10.96.0.18:80"), "pod-a")
	}
	// Without a local endpoint, nothing answers.
	c.write(nodeManifest, svc{name: "itp", typ: "ClusterIP", clusterIP: "10.96.0.18", ports: web, itpLocal: true}.yaml(),
		slice("itp", web, ep{ip: b.ip.String(), ready: true, node: "node-2"}))
	c.expectNoAnswer(client.ns, "tcp", ap("10.96.0.18:80"))
}

// Hairpin: a pod reaches itself through its service.
func caseHairpin(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 8080)
	c.write(nodeManifest, svc{name: "web", typ: "ClusterIP", clusterIP: "10.96.0.20", ports: web}.yaml(),
		slice("web", web, ep{ip: a.ip.String(), ready: true}))
	c.startSink()
	c.expectFrom(a.ns, "tcp", ap("10.96.0.20:80"), "pod-a")
}

// Conformance: changing the type ClusterIP -> NodePort -> ClusterIP, and to
// and from ExternalName.
func caseTypeChanges(t *testing.T) {
	c := newCluster(t)
	ports := []port{{"http", "TCP", 80, 8080, 30084}}
	a := c.addPod("pod-a", 8080)
	client := c.addPod("client")
	write := func(typ string) {
		c.write(nodeManifest, svc{name: "chg", typ: typ, clusterIP: "10.96.0.21", ports: ports}.yaml(),
			slice("chg", ports, ep{ip: a.ip.String(), ready: true}))
	}
	write("ClusterIP")
	c.startSink()
	c.expectFrom(client.ns, "tcp", ap("10.96.0.21:80"), "pod-a")
	c.expectNoAnswer(c.ext, "tcp", ap("192.168.1.10:30084"))
	write("NodePort")
	c.expectFrom(c.ext, "tcp", ap("192.168.1.10:30084"), "pod-a")
	write("ClusterIP")
	c.expectNoAnswer(c.ext, "tcp", ap("192.168.1.10:30084"))
	c.expectFrom(client.ns, "tcp", ap("10.96.0.21:80"), "pod-a")
	write("ExternalName")
	c.expectNoAnswer(client.ns, "tcp", ap("10.96.0.21:80"))
	write("ClusterIP")
	c.expectFrom(client.ns, "tcp", ap("10.96.0.21:80"), "pod-a")
	write("ExternalName")
	c.expectNoAnswer(client.ns, "tcp", ap("10.96.0.21:80"))
	write("NodePort")
	c.expectFrom(c.ext, "tcp", ap("192.168.1.10:30084"), "pod-a")
	write("ExternalName")
	c.expectNoAnswer(c.ext, "tcp", ap("192.168.1.10:30084"))
}

// Network programming latency, as kube-proxy measures it: from the
// EndpointSlice's last-change-trigger-time to the kernel being programmed.
// A trigger time from before the sink started is not counted. In the
// real-API mode the controller writes the trigger times (the manifests'
// annotations are not used).
func caseNetworkProgrammingLatency(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 8080)
	b := c.addPod("pod-b", 8080)
	client := c.addPod("client")
	web1 := svc{name: "web", typ: "ClusterIP", clusterIP: "10.96.0.25", ports: web}.yaml()
	c.write(nodeManifest, web1, withTrigger(slice("web", web, ep{ip: a.ip.String(), ready: true}), time.Now().Add(-time.Hour)))
	c.startSink()
	c.expectFrom(client.ns, "tcp", ap("10.96.0.25:80"), "pod-a")
	if n, err := c.metric("kubeproxy_network_programming_duration_seconds_count"); err != nil || n != 0 {
		t.Fatalf("after the initial sync: %v observations (%v), want 0: the trigger time is from before the start", n, err)
	}
	trigger := time.Now()
	c.write(nodeManifest, web1, withTrigger(slice("web", web, ep{ip: a.ip.String(), ready: true}, ep{ip: b.ip.String(), ready: true}), trigger))
	c.expectFrom(client.ns, "tcp", ap("10.96.0.25:80"), "pod-b")
	elapsed := time.Since(trigger).Seconds()
	var n, sum float64
	c.eventually(10*time.Second, func() error {
		var err error
		if n, err = c.metric("kubeproxy_network_programming_duration_seconds_count"); err == nil && n != 1 {
			err = fmt.Errorf("%v observations, want 1", n)
		}
		return err
	})
	sum, err := c.metric("kubeproxy_network_programming_duration_seconds_sum")
	if err != nil {
		t.Fatal(err)
	}
	// The sink observes right after programming, which may come a moment
	// after pod-b first answers: allow a second beyond it. From a real
	// controller the trigger time is pod-b's Ready transition, a
	// metav1.Time of whole seconds: up to a second earlier than the write.
	slack := 1.0
	if apiMode() {
		slack = 2
	}
	if sum <= 0 || sum > elapsed+slack {
		t.Errorf("programming latency %.3fs, want in (0, %.3fs]: about the time from the trigger to pod-b answering", sum, elapsed+slack)
	}
	t.Logf("network programming latency %.3fs (change written to pod-b answering: %.3fs)", sum, elapsed)
}

// Restart: killing and restarting the sink drops no request and the new
// process writes nothing to the kernel.
func caseRestartNoWritesNoDrops(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 8080)
	client := c.addPod("client")
	c.write(nodeManifest, svc{name: "web", typ: "ClusterIP", clusterIP: "10.96.0.22", ports: web}.yaml(),
		slice("web", web, ep{ip: a.ip.String(), ready: true}))
	c.startSink()
	c.expectFrom(client.ns, "tcp", ap("10.96.0.22:80"), "pod-a")

	stop := c.keepRequesting(target{client.ns, ap("10.96.0.22:80")})
	time.Sleep(300 * time.Millisecond)
	c.stopSink()
	time.Sleep(300 * time.Millisecond)
	c.startSink()
	c.eventually(30*time.Second, func() error {
		v, err := c.metric("proxysinks_sync_kernel_operations")
		if err != nil {
			return err
		}
		if last, err := c.metric("kubeproxy_sync_proxy_rules_last_timestamp_seconds"); err != nil || last == 0 {
			return fmt.Errorf("no sync yet")
		}
		if v != 0 {
			return fmt.Errorf("restarted sink wrote %v kernel objects, want 0", v)
		}
		return nil
	})
	if total, err := c.metric("proxysinks_kernel_operations_total"); err != nil || total != 0 {
		t.Errorf("restarted sink: kernel operations total %v (%v), want 0", total, err)
	}
	time.Sleep(300 * time.Millisecond)
	if ok, failed := stop(); failed != 0 || ok == 0 {
		t.Errorf("during the restart %d requests failed and %d succeeded; want no failure", failed, ok)
	}
}

// Dual stack: one service with an IPv4 and an IPv6 cluster IP, each family
// served by the same pod's address of that family, from a dual-stack client.
func caseDualStack(t *testing.T) {
	c := newCluster(t)
	a := c.addPod("pod-a", 8080)
	client := c.addPod("client")
	c.node.MustRun(t, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	a6 := c.addIPv6(a)
	c.addIPv6(client)
	svc := `apiVersion: v1
kind: Service
metadata: {name: dual, namespace: default}
spec:
  type: ClusterIP
  clusterIP: 10.96.0.24
  clusterIPs: [10.96.0.24, "fd00:96::24"]
  ipFamilies: [IPv4, IPv6]
  ipFamilyPolicy: RequireDualStack
  ports:
  - {name: http, protocol: TCP, port: 80, targetPort: 8080}`
	slice6 := `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: dual-v6
  namespace: default
  labels: {kubernetes.io/service-name: dual}
addressType: IPv6
ports:
- {name: http, protocol: TCP, port: 8080}
endpoints:
- addresses: ["%s"]
  nodeName: node-1
  conditions: {ready: true}`
	slice6 = fmt.Sprintf(slice6, a6)
	c.write(nodeManifest, svc, slice("dual", web, ep{ip: a.ip.String(), ready: true}), slice6)
	c.startSink("--node-address", "fd00:1::10")
	c.expectFrom(client.ns, "tcp", ap("10.96.0.24:80"), "pod-a")
	r := c.expectFrom(client.ns, "tcp", ap("[fd00:96::24]:80"), "pod-a")
	if !r.Client.Addr().Is6() {
		t.Errorf("the IPv6 service reached the backend over %s", r.Client.Addr())
	}
	if sinkKernel() != IPVS {
		return
	}
	out := c.node.MustRun(t, "ipset", "list", "KUBE-6-CLUSTER-IP")
	if !strings.Contains(out, "fd00:96::24,tcp:80") {
		t.Errorf("KUBE-6-CLUSTER-IP lacks the IPv6 cluster IP:\n%s", out)
	}
}
