package hostnode

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client/logbuf"
	"github.com/proxysinks/proxysinks/e2e/vm"
)

// sinkProcess is the iptables sink binary running in node A's namespace.
type sinkProcess struct {
	cmd  *exec.Cmd
	log  *logbuf.Buffer
	http *http.Client
}

// startSink starts the binary in the node's namespace with args; its
// metrics are on 127.0.0.1:10249 there.
func startSink(t *testing.T, n *network, bin string, args ...string) *sinkProcess {
	t.Helper()
	p := &sinkProcess{cmd: exec.Command(bin, args...), log: &logbuf.Buffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	// The child inherits the namespace of the thread that starts it.
	if err := n.node.Do(p.cmd.Start); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	p.http = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := n.node.Do(func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}}
	return p
}

// get fetches a path of the sink's metrics address.
func (p *sinkProcess) get(path string) (string, error) {
	resp, err := p.http.Get("http://127.0.0.1:10249" + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// metric returns the value of a metric line ("name" or `name{label="x"}`),
// or -1 when absent. A name without labels matches its first series: the
// sinks' per-family ones (ip_family) hold the same values.
func metric(text, name string) float64 {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || f[0] != name && (strings.Contains(name, "{") || !strings.HasPrefix(f[0], name+"{")) {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			return v
		}
	}
	return -1
}

// reached returns the pods that answered n requests from pod to addr.
func reached(t *testing.T, pod *pod, proto string, addr netip.AddrPort, n int) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for range n {
		seen[mustGet(t, pod.ns, proto, addr).Name] = true
	}
	return seen
}

// runCleanup runs bin --cleanup on the node; it must exit 0.
func runCleanup(t *testing.T, n *network, bin string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(bin, "--cleanup")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := n.node.Do(cmd.Run); err != nil {
		t.Fatalf("--cleanup: %v\n%s", err, out.String())
	}
}

// waitSynced waits until the sink reports a successful sync and returns
// its metrics.
func (p *sinkProcess) waitSynced(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if p.cmd.ProcessState != nil {
			t.Fatalf("sink exited: %v\n%s", p.cmd.ProcessState, p.log.String())
		}
		if m, err := p.get("/metrics"); err == nil && metric(m, "kubeproxy_sync_proxy_rules_last_timestamp_seconds") > 0 {
			return m
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no successful sync in 20 s; log:\n%s", p.log.String())
	return ""
}

// stop sends SIGTERM and checks the exit status is 0.
func (p *sinkProcess) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("sink exit: %v; log:\n%s", err, p.log.String())
	}
}

// counters are the packet counters iptables-save prints on chain lines.
var counters = regexp.MustCompile(`\[\d+:\d+\]`)

// saveAll returns iptables-save of the node (both families), without
// counters and comments, by "tool table".
func saveAll(t *testing.T, n *network) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		table := ""
		for _, l := range strings.Split(n.node.MustRun(t, tool), "\n") {
			switch {
			case strings.HasPrefix(l, "#") || l == "":
			case strings.HasPrefix(l, "*"):
				table = tool + " " + l[1:]
			default:
				out[table] += counters.ReplaceAllString(l, "") + "\n"
			}
		}
	}
	return out
}

// onlyEmptyBuiltins reports whether a saved table has nothing but its
// built-in chains' policies (a table iptables-save lists once it has been
// loaded).
func onlyEmptyBuiltins(table string) bool {
	for _, l := range strings.Split(strings.TrimSpace(table), "\n") {
		if l == "COMMIT" {
			continue
		}
		f := strings.Fields(l)
		if !strings.HasPrefix(l, ":") || len(f) < 2 || f[1] == "-" {
			return false
		}
	}
	return true
}

const binaryCluster = `apiVersion: v1
kind: Node
metadata: {name: node-a}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: NodePort
  clusterIP: 10.96.0.10
  clusterIPs: [10.96.0.10]
  ports:
  - {name: http, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30080}
  - {name: dns, protocol: UDP, port: 53, targetPort: 8081}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: default
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports:
- {name: http, protocol: TCP, port: 8080}
- {name: dns, protocol: UDP, port: 8081}
endpoints:
- {addresses: [10.244.1.2], conditions: {ready: true}, nodeName: node-a}
- {addresses: [10.244.1.6], conditions: {ready: true}, nodeName: node-a}
- {addresses: [10.244.2.2], conditions: {ready: true}, nodeName: node-b}
`

// TestBinary runs the built iptables sink binary in node A's namespace
// with --from-file: real traffic to a cluster IP (TCP and UDP, from a pod)
// and a node port (from outside, masqueraded), /proxyMode and the
// iptables metrics; the nftables mode's tables removed at start; a restart with the same cluster writes nothing, nor do
// its resyncs until a chain is flushed and the jump to it deleted by
// hand, which one repairs; an
// edit of the manifest is a partial sync; and
// --cleanup removes every KUBE- chain and jump and leaves a foreign chain
// and its jump alone.
func TestBinary(t *testing.T) {
	bin := vm.BuildSink(t, "iptables")
	n := newNetwork(t)
	pod0 := n.pods[0]
	must(t, n.node, "iptables", "-t", "nat", "-N", "FOREIGN")
	must(t, n.node, "iptables", "-t", "nat", "-A", "FOREIGN", "-s", "203.0.113.99", "-j", "RETURN")
	must(t, n.node, "iptables", "-t", "nat", "-I", "PREROUTING", "-j", "FOREIGN")
	must(t, n.node, "iptables", "-t", "filter", "-N", "FOREIGN-F")
	must(t, n.node, "iptables", "-t", "filter", "-I", "INPUT", "-j", "FOREIGN-F")
	// What kube-proxy's nftables mode left, which the sink removes at start
	// as kube-proxy's iptables mode does, and a table of another owner.
	must(t, n.node, "nft", "add table ip kube-proxy; add chain ip kube-proxy services; add table ip6 kube-proxy; add table ip foreign")
	before := saveAll(t, n)

	manifests := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(manifests, []byte(binaryCluster), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--from-file", manifests, "--node-name", "node-a", "--cluster-cidr", "10.244.0.0/16",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", ""}
	p := startSink(t, n, bin, args...)
	m := p.waitSynced(t)
	if mode, err := p.get("/proxyMode"); err != nil || mode != "iptables" {
		t.Errorf("/proxyMode = %q, %v; want iptables", mode, err)
	}
	if tables := n.node.MustRun(t, "nft", "list", "tables"); strings.Contains(tables, "kube-proxy") || !strings.Contains(tables, "table ip foreign") {
		t.Errorf("nft tables after the start, want the nftables mode's removed and the foreign one kept:\n%s", tables)
	}
	if v := metric(m, `kubeproxy_sync_proxy_rules_iptables_total{ip_family="IPv4",table="nat"}`); v < 10 {
		t.Errorf("nat rules gauge %v, want the ruleset's rules\n%s", v, m)
	}
	if v := metric(m, `kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv4"}`); v != 0 {
		t.Errorf("restore failures %v, want 0", v)
	}
	if v := metric(m, "proxysinks_kernel_operations_total"); v <= 0 {
		t.Errorf("first run wrote %v kernel objects, want > 0", v)
	}

	vip, nodePort := ap("10.96.0.10", 80), ap(nodeA.String(), 30080)
	seen := reached(t, pod0, "tcp", vip, 30)
	if len(seen) != 3 {
		t.Errorf("cluster IP from a pod reached %v, want the three pods", seen)
	}
	if r := mustGet(t, pod0.ns, "udp", ap("10.96.0.10", 53)); r.Name == "" {
		t.Errorf("UDP cluster IP: no name in %+v", r)
	}
	r := mustGet(t, n.client, "tcp", nodePort)
	if r.Client.Addr() == clientAddr {
		t.Errorf("node port from outside reached %s keeping the client address, want masquerade (cluster policy)", r.Name)
	}
	programmed := saveAll(t, n)
	p.stop(t)

	// Restart with the same cluster: nothing written, same rules, traffic
	// still flows. The resyncs (every second here) write nothing either,
	// until a chain is flushed by hand: the next resync repairs it.
	p = startSink(t, n, bin, append(args, "--sync-period", "1s")...)
	m = p.waitSynced(t)
	if v := metric(m, "proxysinks_kernel_operations_total"); v != 0 {
		t.Errorf("restart wrote %v kernel objects, want 0; log:\n%s", v, p.log.String())
	}
	if strings.Contains(p.log.String(), "msg=sync ") {
		t.Errorf("restart logged a sync that wrote:\n%s", p.log.String())
	}
	if diff := cmp.Diff(programmed, saveAll(t, n)); diff != "" {
		t.Errorf("restart changed the rules (-before +after):\n%s", diff)
	}
	mustGet(t, pod0.ns, "tcp", vip)
	time.Sleep(1500 * time.Millisecond)
	if m, err := p.get("/metrics"); err != nil || metric(m, "proxysinks_kernel_operations_total") != 0 {
		t.Errorf("resyncs of an unchanged cluster wrote (%v):\n%s", err, m)
	}
	// On nf_tables they do not even read the tables back: the
	// namespace's generation has not moved.
	if v, err := n.node.Run("iptables", "-V"); err == nil && strings.Contains(v, "nf_tables") {
		if m, err := p.get("/metrics"); err != nil || metric(m, "proxysinks_iptables_resync_reads_skipped_total") <= 0 {
			t.Errorf("resyncs of an unchanged cluster on nf_tables read the tables (%v):\n%s", err, m)
		}
	}
	// Drift: a chain flushed and the jump to it deleted by hand.
	must(t, n.node, "iptables", "-t", "nat", "-F", "KUBE-SERVICES")
	must(t, n.node, "iptables", "-t", "nat", "-D", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")
	waitWrites(t, p, 0)
	// A resync between the two commands repairs the first alone; the
	// next one, a second later, the other.
	if diff := waitEqual(programmed, func() map[string]string { return saveAll(t, n) }); diff != "" {
		t.Errorf("drift not repaired (-programmed +now):\n%s", diff)
	}
	mustGet(t, pod0.ns, "tcp", vip)

	// An edit of the manifest removing node B's endpoint is a partial
	// sync; traffic then reaches node A's pods only.
	edited := strings.Replace(binaryCluster, "- {addresses: [10.244.2.2], conditions: {ready: true}, nodeName: node-b}\n", "", 1)
	if edited == binaryCluster {
		t.Fatal("the manifest edit changed nothing")
	}
	if err := os.WriteFile(manifests, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m, err := p.get("/metrics"); err == nil && metric(m, `kubeproxy_sync_partial_proxy_rules_duration_seconds_count{ip_family="IPv4"}`) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if m, _ := p.get("/metrics"); metric(m, `kubeproxy_sync_partial_proxy_rules_duration_seconds_count{ip_family="IPv4"}`) < 1 {
		t.Errorf("no partial sync after the manifest edit; log:\n%s", p.log.String())
	}
	seen = reached(t, pod0, "tcp", vip, 20)
	if seen[n.pods[2].name] || len(seen) != 2 {
		t.Errorf("after removing node B's endpoint, traffic reached %v, want pod0 and pod1", seen)
	}
	p.stop(t)

	// --cleanup: exit 0, no KUBE- chain or jump left but KUBE-FIREWALL
	// (kept as kube-proxy keeps it: it guards route_localnet, which
	// stays set), the rest as before.
	runCleanup(t, n, bin)
	after := saveAll(t, n)
	for table, text := range after {
		text = withoutFirewall(text)
		after[table] = text
		if strings.Contains(text, "KUBE-") {
			t.Errorf("after --cleanup, %s:\n%s", table, text)
		}
		if _, ok := before[table]; !ok && !onlyEmptyBuiltins(text) {
			t.Errorf("after --cleanup, %s has rules or chains:\n%s", table, text)
		}
	}
	for table, text := range before {
		if diff := cmp.Diff(text, after[table]); diff != "" {
			t.Errorf("--cleanup changed %s from before the sink ran (-before +after):\n%s", table, diff)
		}
	}
	if len(before) < 2 {
		t.Errorf("the foreign rules are not in the saved tables: %v", before)
	}
	mustFail(t, pod0.ns, "tcp", vip)
}

// withoutFirewall returns iptables-save text without the lines of
// KUBE-FIREWALL: its chain, its rules and the jumps to it.
func withoutFirewall(text string) string {
	lines := strings.SplitAfter(text, "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool { return strings.Contains(l, "KUBE-FIREWALL") })
	return strings.Join(lines, "")
}
