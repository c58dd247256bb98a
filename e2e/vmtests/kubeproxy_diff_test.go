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
var diffSinks = []string{"ipvs-fullstate", "ipvs-incremental"}

// The node the proxies run as, and its address (on a dummy link in the
// guest).
const (
	diffNode     = cluster.BroadNode
	diffNodeIP   = cluster.BroadNodeIP
	diffNodeCIDR = cluster.BroadNodeCIDR
)

// TestKubeProxyDifferential programs one broad cluster with kube-proxy
// v1.37.2 --proxy-mode=ipvs and with each IPVS sink, each in a fresh VM
// against the same control plane on the host, and requires the same
// kernel state (IPVS, ipsets, kube-ipvs0 addresses, iptables) up to the
// reviewed differences in e2e/cluster/testdata/kubeproxy-ipvs-differences.txt.
func TestKubeProxyDifferential(t *testing.T) {
	t.Parallel()
	vm.Require(t)
	bin := cluster.Require(t)
	c := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cluster.Broad(t, ctx, c)
	ipvsShapes(t, ctx, c)

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

// ipvsShapes adds to the broad cluster the shapes where kube-proxy's IPVS
// mode has rules of its own: a NodePort service with
// internalTrafficPolicy=Local and no endpoint on this node (its cluster IP
// gets the cluster endpoints), the same with both policies Local, and a
// service whose only endpoint is on this node and terminating (the
// serving-terminating fallback, and its KUBE-LOOP-BACK entry).
func ipvsShapes(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	local := corev1.ServiceInternalTrafficPolicyLocal
	tcp := func(nodePort int32) []corev1.ServicePort {
		return []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http"), NodePort: nodePort}}
	}
	services := map[string]corev1.ServiceSpec{
		"itp-np-remote":     {Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.12.1", InternalTrafficPolicy: &local, Ports: tcp(30096)},
		"both-local-remote": {Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.12.2", InternalTrafficPolicy: &local, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, Ports: tcp(30097)},
		"ipvs-term-only":    {ClusterIP: "10.96.12.3", Ports: tcp(0)},
	}
	pods := []cluster.Pod{
		{Name: "itp-np-remote-b", Node: "node-b", IPs: []string{"10.244.1.40"}},
		{Name: "both-local-remote-b", Node: "node-b", IPs: []string{"10.244.1.41"}},
		{Name: "ipvs-term-only-a", Node: cluster.BroadNode, IPs: []string{"10.244.0.42"}},
	}
	names := []string{"itp-np-remote", "both-local-remote", "ipvs-term-only"}
	for i, name := range names {
		spec := services[name]
		spec.Selector = map[string]string{"app": name}
		spec.ClusterIPs = []string{spec.ClusterIP}
		if _, err := c.Admin.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create service %s: %v", name, err)
		}
		p := pods[i]
		p.Namespace, p.Labels = "default", map[string]string{"app": name}
		p.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
		if err := c.CreatePod(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitSlices(ctx, "default", name, func(sl []discoveryv1.EndpointSlice) bool {
			return len(cluster.ReadyAddresses(sl)) == 1
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.TerminatePod(ctx, "default", "ipvs-term-only-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitSlices(ctx, "default", "ipvs-term-only", func(sl []discoveryv1.EndpointSlice) bool {
		got := cluster.ReadyAddresses(sl)
		return len(got) == 1 && strings.HasSuffix(got[0], "(terminating)")
	}); err != nil {
		t.Fatal(err)
	}
}
