package vmtests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/e2e/vm"
)

// diffSinks are the IPVS sinks compared with kube-proxy: a main package
// under sinks/ each.
var diffSinks = []string{"ipvs-fullstate"}

// The node the proxies run as, and its address (on a dummy link in the
// guest).
const (
	diffNode     = "node-a"
	diffNodeIP   = "192.168.50.10"
	diffNodeCIDR = "192.168.50.0/24"
)

// TestKubeProxyDifferential programs one broad cluster with kube-proxy
// v1.37.2 --proxy-mode=ipvs and with each IPVS sink, each in a fresh VM
// against the same control plane on the host, and requires the same
// kernel state (IPVS, ipsets, kube-ipvs0 addresses, iptables) up to the
// reviewed differences in e2e/cluster/testdata/kubeproxy-ipvs-differences.txt.
func TestKubeProxyDifferential(t *testing.T) {
	vm.Require(t)
	bin := cluster.Require(t)
	c := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	broadCluster(t, ctx, c)

	work := t.TempDir()
	server := "https://" + cluster.GuestAPIAddr
	if err := os.WriteFile(filepath.Join(work, "kube-proxy.kubeconfig"), c.Kubeconfig(server, c.AdminToken), 0o600); err != nil {
		t.Fatal(err)
	}
	sinkKC, err := c.SinkKubeconfig(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sinkKC, filepath.Join(work, "sink.kubeconfig")); err != nil {
		t.Fatal(err)
	}
	root, err := vm.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	intended, err := cluster.ReadIntended(filepath.Join(root, "e2e", "cluster", "testdata", "kubeproxy-ipvs-differences.txt"))
	if err != nil {
		t.Fatal(err)
	}

	ref := captureProxy(t, c, work, filepath.Join(bin, "kube-proxy"),
		"--proxy-mode=ipvs", "--kubeconfig=/job/work/kube-proxy.kubeconfig",
		"--hostname-override="+diffNode, "--nodeport-addresses="+diffNodeCIDR,
		"--conntrack-max-per-core=0", "--v=2")
	for _, sink := range diffSinks {
		t.Run(sink, func(t *testing.T) {
			got := captureProxy(t, c, work, buildStatic(t, root, sink),
				"--kubeconfig=/job/work/sink.kubeconfig", "--node-name="+diffNode,
				"--nodeport-addresses="+diffNodeCIDR)
			diffs := cluster.Diff(ref, got)
			unexplained, stale := cluster.Unexplained(sink, diffs, intended)
			for _, d := range unexplained {
				t.Errorf("unexplained difference (- kube-proxy only, + %s only): %s", sink, d)
			}
			for _, in := range stale {
				t.Errorf("intended difference no longer seen (remove it from the list): %s %s", in.Sink, in.Diff)
			}
			t.Logf("%d lines compared, %d differences, %d of them intended", lines(ref), len(diffs), len(diffs)-len(unexplained))
		})
	}
}

func lines(s cluster.State) int {
	n := 0
	for _, l := range s {
		n += len(l)
	}
	return n
}

// buildStatic builds a sink's main package as a static binary.
func buildStatic(t *testing.T, root, sink string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), sink)
	cmd := exec.Command("go", "build", "-o", out, "./sinks/"+sink)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./sinks/%s: %v\n%s", sink, err, b)
	}
	return out
}

// proxyScript runs the proxy ($PROXY with its arguments) on a node with
// the address diffNodeIP, waits until its kernel state has stopped
// changing for 8 s (at most 5 min), and prints the capture.
const proxyScript = `for m in ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh nf_conntrack; do modprobe $m; done
ip link add node0 type dummy && ip addr add ` + diffNodeIP + `/24 dev node0 && ip link set node0 up
proxy "$@" > /tmp/proxy.log 2>&1 &
pid=$!
state() { ipvsadm -Sn; ipset save; ip -o addr show dev kube-ipvs0 2>/dev/null; iptables-save | grep -v '^[#:]' | sed 's/\[[0-9:]*\]//g'; ip6tables-save | grep -v '^[#:]' | sed 's/\[[0-9:]*\]//g'; }
prev= stable=0 i=0
while [ $i -lt 150 ]; do
	sleep 2; i=$((i+1))
	kill -0 $pid 2>/dev/null || { echo "proxy exited"; cat /tmp/proxy.log; exit 1; }
	cur=$(state | md5sum)
	if [ "$cur" = "$prev" ] && [ -n "$(ipvsadm -Sn)" ]; then stable=$((stable+1)); else stable=0; fi
	prev=$cur
	[ $stable -ge 4 ] && break
done
echo "state stable after $((i*2)) s"
` + cluster.CaptureScript + `
echo "=== proxy log (tail)"
tail -n 40 /tmp/proxy.log
kill $pid
`

// captureProxy runs one proxy binary in a fresh VM with a NIC reaching the
// cluster's apiserver and returns its normalized kernel state.
func captureProxy(t *testing.T, c *cluster.Cluster, work, bin string, args ...string) cluster.State {
	t.Helper()
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + a + "'"
	}
	script := strings.Replace(proxyScript, `proxy "$@"`, "proxy "+strings.Join(quoted, " "), 1)
	start := time.Now()
	status, out := vm.RunShell(t, script, vm.Options{
		Files:    map[string]string{"proxy": bin},
		WorkDir:  work,
		MemoryMB: 3072,
		Timeout:  12 * time.Minute,
		NIC:      &vm.NIC{Forwards: []vm.Forward{{Guest: cluster.GuestAPIAddr, Host: fmt.Sprintf("127.0.0.1:%d", c.APIPort)}}},
	})
	if status != 0 {
		t.Fatalf("%s in the VM: exit status %d", filepath.Base(bin), status)
	}
	st, err := cluster.ParseCapture(out)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(bin), err)
	}
	t.Logf("%s: VM run %s", filepath.Base(bin), time.Since(start).Round(time.Second))
	return st
}

// broadCluster creates every service shape the sinks handle, and the pods
// behind them on diffNode and another node, and waits for the
// EndpointSlices.
func broadCluster(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.CreateNode(ctx, diffNode, "zone-a", diffNodeIP))
	must(c.CreateNode(ctx, "node-b", "zone-b", "192.168.50.11"))
	tcp := func(name string, port int32, target intstr.IntOrString, nodePort int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port, TargetPort: target, NodePort: nodePort}
	}
	local := corev1.ServiceExternalTrafficPolicyLocal
	iLocal := corev1.ServiceInternalTrafficPolicyLocal
	dual := corev1.IPFamilyPolicyRequireDualStack
	timeout := int32(600)
	svc := func(name string, spec corev1.ServiceSpec) *corev1.Service {
		if spec.Selector == nil && spec.Type != corev1.ServiceTypeExternalName {
			spec.Selector = map[string]string{"app": name}
		}
		if spec.ClusterIP != "" && spec.ClusterIP != corev1.ClusterIPNone && len(spec.ClusterIPs) == 0 {
			spec.ClusterIPs = []string{spec.ClusterIP}
		}
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: spec}
	}
	services := []*corev1.Service{
		svc("web", corev1.ServiceSpec{ClusterIP: "10.96.10.1", Ports: []corev1.ServicePort{
			tcp("http", 80, intstr.FromString("http"), 0), tcp("https", 443, intstr.FromInt32(8443), 0)}}),
		svc("np", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.10.2", ExternalIPs: []string{"192.0.2.10"},
			Ports: []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 30080),
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromString("dns"), NodePort: 30053}}}),
		// A /32 source range is left out: kube-proxy's entry for one
		// (198.51.100.7/32) was present in one run and absent in the
		// next, so it cannot serve as a reference.
		svc("lb", corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.10.3", ExternalTrafficPolicy: local,
			HealthCheckNodePort: 32000, LoadBalancerSourceRanges: []string{"203.0.113.0/24", "198.51.100.0/25"},
			Ports: []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 30081)}}),
		svc("np-local", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.10.4", ExternalTrafficPolicy: local,
			ExternalIPs: []string{"192.0.2.30"}, Ports: []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 30082)}}),
		svc("itp", corev1.ServiceSpec{ClusterIP: "10.96.10.5", InternalTrafficPolicy: &iLocal,
			Ports: []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 0)}}),
		svc("aff", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.10.6",
			SessionAffinity:       corev1.ServiceAffinityClientIP,
			SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}},
			Ports:                 []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 30083)}}),
		svc("dual", corev1.ServiceSpec{ClusterIP: "10.96.10.7", ClusterIPs: []string{"10.96.10.7", "fd00:96::7"}, IPFamilyPolicy: &dual,
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports:      []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 0)}}),
		svc("sctp", corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.10.8",
			Ports: []corev1.ServicePort{{Name: "sctp", Protocol: corev1.ProtocolSCTP, Port: 2905, TargetPort: intstr.FromString("sctp"), NodePort: 30084}}}),
		svc("headless", corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{tcp("http", 80, intstr.FromString("http"), 0)}}),
		svc("extname", corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}),
	}
	for _, s := range services {
		o, err := c.Admin.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create service %s: %v", s.Name, err)
		}
		if s.Name == "lb" {
			o.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.20"}}
			if _, err := c.Admin.CoreV1().Services("default").UpdateStatus(ctx, o, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("set the ingress IP of service lb: %v", err)
			}
		}
	}

	ports := []corev1.ContainerPort{
		{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
		{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP},
		{Name: "sctp", ContainerPort: 2906, Protocol: corev1.ProtocolSCTP},
	}
	type pod struct {
		app, name, node string
		ips             []string
		notReady, term  bool
	}
	pods := []pod{
		{app: "web", name: "web-a", node: diffNode, ips: []string{"10.244.0.10"}},
		{app: "web", name: "web-b", node: "node-b", ips: []string{"10.244.1.10"}},
		{app: "web", name: "web-c", node: "node-b", ips: []string{"10.244.1.11"}, notReady: true},
		{app: "web", name: "web-d", node: diffNode, ips: []string{"10.244.0.11"}, term: true},
		{app: "np", name: "np-a", node: diffNode, ips: []string{"10.244.0.12"}},
		{app: "np", name: "np-b", node: "node-b", ips: []string{"10.244.1.12"}},
		{app: "lb", name: "lb-a", node: diffNode, ips: []string{"10.244.0.13"}},
		{app: "lb", name: "lb-b", node: "node-b", ips: []string{"10.244.1.13"}},
		{app: "np-local", name: "np-local-b", node: "node-b", ips: []string{"10.244.1.14"}},
		{app: "itp", name: "itp-a", node: diffNode, ips: []string{"10.244.0.15"}},
		{app: "itp", name: "itp-b", node: "node-b", ips: []string{"10.244.1.15"}},
		{app: "aff", name: "aff-b", node: "node-b", ips: []string{"10.244.1.16"}},
		{app: "dual", name: "dual-a", node: diffNode, ips: []string{"10.244.0.17", "fd00:244::17"}},
		{app: "dual", name: "dual-b", node: "node-b", ips: []string{"10.244.1.17", "fd00:244:1::17"}},
		{app: "sctp", name: "sctp-b", node: "node-b", ips: []string{"10.244.1.18"}},
		{app: "headless", name: "headless-b", node: "node-b", ips: []string{"10.244.1.19"}},
	}
	for _, p := range pods {
		must(c.CreatePod(ctx, cluster.Pod{Namespace: "default", Name: p.name, Node: p.node, IPs: p.ips,
			Labels: map[string]string{"app": p.app}, Ports: ports, NotReady: p.notReady}))
	}
	for _, p := range pods {
		if p.term {
			must(c.TerminatePod(ctx, "default", p.name))
		}
	}
	// Every service with pods has its slices: ready and terminating
	// endpoints (the dual-stack service has one slice per family).
	want := map[string]int{}
	for _, p := range pods {
		if !p.notReady {
			want[p.app] += len(p.ips)
		}
	}
	for _, s := range services {
		if n := want[s.Name]; n > 0 {
			if _, err := c.WaitSlices(ctx, "default", s.Name, func(sl []discoveryv1.EndpointSlice) bool {
				return len(cluster.ReadyAddresses(sl)) == n
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
