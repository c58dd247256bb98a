package hostnode

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/proxysinks/proxysinks/client/logbuf"
	"github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/e2e/vm"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// diffAPIAddr is where the proxies in their namespaces reach the
// apiserver: a relay (apiRelay) listening in the namespace's loopback.
const diffAPIAddr = "127.0.0.1:6443"

// TestKubeProxyDifferential programs the broad cluster (cluster.Broad, with
// iptablesShapes) with
// kube-proxy v1.37.2 --proxy-mode=iptables and with the iptables sink
// binary, each in a fresh network namespace with the same node address,
// against the same control plane, and requires the same iptables-save and
// ip6tables-save (counters dropped; rule order compared within chains
// where it matters) up to the reviewed
// differences in e2e/cluster/testdata/kubeproxy-iptables-differences.txt;
// an entry there that no longer occurs fails it too.
func TestKubeProxyDifferential(t *testing.T) {
	bin := cluster.Require(t)
	for _, tool := range []string{"ip", "iptables-save", "ip6tables-save"} {
		nstest.LookPath(t, tool)
	}
	root, err := vm.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	intended, err := cluster.ReadIntended(filepath.Join(root, "e2e", "cluster", "testdata", "kubeproxy-iptables-differences.txt"))
	if err != nil {
		t.Fatal(err)
	}
	sink := buildSink(t)
	c := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster.Broad(t, ctx, c)
	iptablesShapes(t, ctx, c)

	work := t.TempDir()
	server := "https://" + diffAPIAddr
	proxyKC := filepath.Join(work, "kube-proxy.kubeconfig")
	if err := os.WriteFile(proxyKC, c.Kubeconfig(server, c.AdminToken), 0o600); err != nil {
		t.Fatal(err)
	}
	sinkKC, err := c.SinkKubeconfig(ctx, server)
	if err != nil {
		t.Fatal(err)
	}

	ref := captureIPTables(t, c, filepath.Join(bin, "kube-proxy"),
		"--proxy-mode=iptables", "--kubeconfig="+proxyKC,
		"--hostname-override="+cluster.BroadNode, "--nodeport-addresses="+cluster.BroadNodeCIDR,
		"--conntrack-max-per-core=0", "--v=2")
	got := captureIPTables(t, c, sink,
		"--kubeconfig="+sinkKC, "--node-name="+cluster.BroadNode,
		"--nodeport-addresses="+cluster.BroadNodeCIDR)
	const name = "iptables"
	diffs := cluster.Diff(ref.state, got.state)
	unexplained, stale := cluster.Unexplained(name, diffs, intended)
	for _, d := range unexplained {
		t.Errorf("unexplained difference (- kube-proxy only, + iptables sink only): %s", d)
	}
	for _, in := range stale {
		t.Errorf("intended difference no longer seen (remove it from the list): %s %s", in.Sink, in.Diff)
	}
	// Rule order matters within a chain (the statistic probabilities of a
	// KUBE-SVC chain, a KUBE-SEP's masquerade before its DNAT, the
	// postrouting RETURN first); only the service rules of the top-level
	// chains are independent (kube-proxy writes them in map order), but
	// for nat KUBE-SERVICES' last rule, the jump to KUBE-NODEPORTS.
	independent := []string{"nat KUBE-NODEPORTS", "filter KUBE-SERVICES",
		"filter KUBE-EXTERNAL-SERVICES", "filter KUBE-NODEPORTS", "filter KUBE-PROXY-FIREWALL"}
	lastFixed := []string{"nat KUBE-SERVICES"}
	for _, section := range []string{cluster.SectionIPTables, cluster.SectionIP6} {
		for _, key := range cluster.OrderDifferences(ref.chains[section], got.chains[section], independent, lastFixed) {
			t.Errorf("%s %s: same rules in another order:\nkube-proxy:\n%s\niptables sink:\n%s", section, key,
				strings.Join(ref.chains[section][key], "\n"), strings.Join(got.chains[section][key], "\n"))
		}
	}
	n := 0
	for _, l := range ref.state {
		n += len(l)
	}
	t.Logf("%d kube-proxy lines compared, %d differences, %d of them intended", n, len(diffs), len(diffs)-len(unexplained))
}

// captureIPTables runs a proxy in a fresh namespace whose node address is
// cluster.BroadNodeIP and whose loopback reaches the apiserver at
// diffAPIAddr, waits until its rules have stopped changing for 3 s, and
// returns them (sections cluster.SectionIPTables and cluster.SectionIP6).
func captureIPTables(t *testing.T, c *cluster.Cluster, bin string, args ...string) capture {
	t.Helper()
	name := filepath.Base(bin)
	ns := nstest.New(t)
	must(t, ns, "ip", "link", "add", "node0", "type", "veth", "peer", "name", "node0p")
	must(t, ns, "ip", "addr", "add", cluster.BroadNodeIP+"/24", "dev", "node0")
	must(t, ns, "ip", "link", "set", "node0", "up")
	must(t, ns, "ip", "link", "set", "node0p", "up")
	relayLog := apiRelay(t, ns, fmt.Sprintf("127.0.0.1:%d", c.APIPort))

	log := &logbuf.Buffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// The child inherits the namespace of the thread that starts it (no
	// Pdeathsig: that thread exits right after).
	if err := ns.Do(cmd.Start); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	// exited is closed when the process has been waited for (waitErr
	// then holds its status), so any number of readers see it.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
			return
		default:
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()

	var raw map[string]string
	snapshot := func() cluster.State {
		st := cluster.State{}
		raw = map[string]string{}
		for section, tool := range map[string]string{cluster.SectionIPTables: "iptables-save", cluster.SectionIP6: "ip6tables-save"} {
			raw[section] = ns.MustRun(t, tool)
			st[section] = cluster.Normalize(section, raw[section], true)
		}
		return st
	}
	start := time.Now()
	var prev cluster.State
	stable := 0
	for stable < 3 {
		if time.Since(start) > 90*time.Second {
			// A goroutine dump (SIGQUIT) shows where a stalled proxy waits.
			cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
			}
			t.Fatalf("%s: rules not stable after 90 s; relay: %s; log:\n%s", name, relayLog.String(), tail(log.String(), 300))
		}
		select {
		case <-exited:
			t.Fatalf("%s exited: %v; log:\n%s", name, waitErr, tail(log.String(), 60))
		case <-time.After(time.Second):
		}
		cur := snapshot()
		if equalState(cur, prev) && hasServiceChains(cur) {
			stable++
		} else {
			stable = 0
		}
		prev = cur
	}
	t.Logf("%s: rules stable after %s", name, time.Since(start).Round(time.Second))
	if t.Failed() || testing.Verbose() {
		t.Logf("%s log (tail):\n%s", name, tail(log.String(), 30))
	}
	chains := map[string]map[string][]string{}
	for section, out := range raw {
		chains[section] = cluster.Chains(section, out, true)
	}
	return capture{state: prev, chains: chains}
}

// capture is a proxy's rules: normalized and sorted, and by chain in
// their order.
type capture struct {
	state  cluster.State
	chains map[string]map[string][]string // section, "<table> <chain>", rules
}

// equalState reports whether two captures are the same.
func equalState(a, b cluster.State) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// hasServiceChains reports whether a capture has a service chain of the
// broad cluster (a proxy that has synced it).
func hasServiceChains(st cluster.State) bool {
	for _, l := range st[cluster.SectionIPTables] {
		if strings.HasPrefix(l, "nat -A KUBE-SVC-") {
			return true
		}
	}
	return false
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// apiRelay listens on diffAPIAddr inside ns and copies each connection to
// target, which the test process dials from the host's namespace (a fresh
// namespace cannot reach the host's loopback).
func apiRelay(t *testing.T, ns *nstest.NetNS, target string) *logbuf.Buffer {
	t.Helper()
	var l net.Listener
	if err := ns.Do(func() error {
		var err error
		l, err = net.Listen("tcp", diffAPIAddr)
		return err
	}); err != nil {
		t.Fatalf("relay to the apiserver: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	rlog := &logbuf.Buffer{}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(rlog, "%s accept %s; ", time.Now().Format("15:04:05.000"), in.RemoteAddr())
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", target)
				if err != nil {
					fmt.Fprintf(rlog, "dial: %v; ", err)
					return
				}
				defer out.Close()
				go func() { io.Copy(out, in); out.(*net.TCPConn).CloseWrite() }()
				n, err := io.Copy(in, out)
				fmt.Fprintf(rlog, "%s closed %s after %d bytes (%v); ", time.Now().Format("15:04:05.000"), in.RemoteAddr(), n, err)
			}()
		}
	}()
	return rlog
}

// iptablesShapes adds to the broad cluster the shapes whose iptables
// rules have no IPVS counterpart: a NodePort service without endpoints
// (REJECT in filter KUBE-SERVICES and KUBE-EXTERNAL-SERVICES), a service
// whose only endpoint is terminating but serving (the terminating
// fallback), internalTrafficPolicy=Local with no local endpoint (DROP), and
// a LoadBalancer without source ranges and with eTP=Cluster.
func iptablesShapes(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	tcp := func(port, nodePort int32) []corev1.ServicePort {
		return []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromString("http"), NodePort: nodePort}}
	}
	iLocal := corev1.ServiceInternalTrafficPolicyLocal
	services := []corev1.ServiceSpec{
		{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.11.1", Ports: tcp(80, 30090)},
		{ClusterIP: "10.96.11.2", Ports: tcp(80, 0)},
		{ClusterIP: "10.96.11.3", InternalTrafficPolicy: &iLocal, Ports: tcp(80, 0)},
		{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.11.4", Ports: tcp(80, 30091)},
	}
	names := []string{"empty", "term-only", "itp-remote", "lb-open"}
	for i, spec := range services {
		spec.Selector = map[string]string{"app": names[i]}
		spec.ClusterIPs = []string{spec.ClusterIP}
		o, err := c.Admin.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: names[i]}, Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create service %s: %v", names[i], err)
		}
		if names[i] == "lb-open" {
			o.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.40"}}
			if _, err := c.Admin.CoreV1().Services("default").UpdateStatus(ctx, o, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("set the ingress IP of service lb-open: %v", err)
			}
		}
	}
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
	for _, p := range []cluster.Pod{
		{Name: "term-only-a", Node: cluster.BroadNode, IPs: []string{"10.244.0.30"}, Labels: map[string]string{"app": "term-only"}},
		{Name: "itp-remote-b", Node: "node-b", IPs: []string{"10.244.1.31"}, Labels: map[string]string{"app": "itp-remote"}},
		{Name: "lb-open-b", Node: "node-b", IPs: []string{"10.244.1.32"}, Labels: map[string]string{"app": "lb-open"}},
	} {
		p.Namespace, p.Ports = "default", ports
		if err := c.CreatePod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"itp-remote", "lb-open", "term-only"} {
		if _, err := c.WaitSlices(ctx, "default", name, func(sl []discoveryv1.EndpointSlice) bool {
			return len(cluster.ReadyAddresses(sl)) == 1
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.TerminatePod(ctx, "default", "term-only-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitSlices(ctx, "default", "term-only", func(sl []discoveryv1.EndpointSlice) bool {
		for _, s := range sl {
			for _, e := range s.Endpoints {
				if e.Conditions.Terminating != nil && *e.Conditions.Terminating {
					return true
				}
			}
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
}
