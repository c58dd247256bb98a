package hostnode

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/e2e/differential"
	"github.com/proxysinks/proxysinks/e2e/node"
	"github.com/proxysinks/proxysinks/e2e/vm"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// nftablesBin builds the nftables sink's binary, or skips the test naming
// what is missing: the sink's main package while it is not in this tree
// yet, or nft (the tests read the kernel with it).
func nftablesBin(t *testing.T) string {
	t.Helper()
	root, err := vm.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "sinks", "nftables", "main.go")); errors.Is(err, fs.ErrNotExist) {
		t.Skip("the nftables sink is not in this tree yet (sinks/nftables/main.go missing): nothing to run")
	}
	nstest.LookPath(t, "nft")
	return vm.BuildSink(t, "nftables")
}

// longNFTablesCases are the traffic cases TestNFTablesTraffic runs only
// in a long run: the iptables sink's run covers the same node behaviour
// and the nftables sink's rules are checked case by case against
// kube-proxy's by the differential; these add the least to it.
var longNFTablesCases = []string{"Balanced", "Multiport", "TypeChanges", "NetworkProgrammingLatency",
	"EndpointRemovalGraceful", "ExternalTrafficLocalNoLocalEndpoint", "UDPStaleConntrackFlushed",
	"UDPFirstEndpointConntrackCleared", "UDPNodePortStaleConntrackCleared"}

// TestNFTablesTraffic runs the traffic case table (e2e/node's Cases)
// against the built nftables sink binary on e2e/node's bridge-CNI node of
// fresh network namespaces of this host (nf_tables needs no VM). Without
// PROXYSINKS_LONG=1 the cases of longNFTablesCases skip, saying so.
func TestNFTablesTraffic(t *testing.T) {
	known := map[string]bool{}
	for _, c := range node.Cases {
		known[c.Name] = true
	}
	for _, c := range longNFTablesCases {
		if !known[c] {
			t.Errorf("longNFTablesCases names %q, which is not a case of node.Cases", c)
		}
	}
	bin := nftablesBin(t)
	skip := map[string]string{}
	if os.Getenv("PROXYSINKS_LONG") != "1" {
		for _, c := range longNFTablesCases {
			skip[c] = "a long case for the nftables sink: make test-long runs it (PROXYSINKS_LONG=1)"
		}
	}
	node.Use(node.Options{Sink: "nftables", Bin: bin})
	node.RunCasesExcept(t, skip)
}

// nftTables returns the node's nf_tables tables, each normalized
// (differential.NormalizeNFT) by "<family> <name>".
func nftTables(t *testing.T, ns *nstest.NetNS) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(ns.MustRun(t, "nft", "list", "tables")), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "table" {
			continue
		}
		out[f[1]+" "+f[2]] = differential.NormalizeNFT(ns.MustRun(t, "nft", "list", "table", f[1], f[2])).Lines
	}
	return out
}

// foreignNFT is a table of another program: a nat chain at its own
// priority with a rule, and a set with an element.
const foreignNFT = `table ip foreign {
	set blocked {
		type ipv4_addr
		elements = { 203.0.113.98 }
	}
	chain pre {
		type nat hook prerouting priority -50; policy accept;
		ip saddr 203.0.113.99 return
	}
}
`

// waitEqual reads the state with get until it equals want, for up to 5
// seconds (five resyncs at the tests' 1 s period), and returns the last
// difference (-want +got), or "" once equal.
func waitEqual[S any](want S, get func() S) string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		diff := cmp.Diff(want, get())
		if diff == "" || time.Now().After(deadline) {
			return diff
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitWrites waits up to 10 s for the sink's kernel operations counter to
// pass from, and returns it.
func waitWrites(t *testing.T, p *sinkProcess, from float64) float64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m, err := p.get("/metrics"); err == nil {
			if v := metric(m, "proxysinks_kernel_operations_total"); v > from {
				return v
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no kernel write in 10 s; log:\n%s", p.log.String())
	return 0
}

// TestNFTablesBinary runs the built nftables sink binary in node A's
// namespace with --from-file, beside a foreign table: real traffic to a
// cluster IP (TCP and UDP, from a pod) and a node port (from outside,
// masqueraded), /proxyMode; a restart with the same cluster writes
// nothing and keeps the tables as they are, nor do its resyncs until a
// chain is flushed and an element deleted by hand, which one repairs; an
// edit of the manifest writes fewer objects than the first sync and moves
// the traffic; --cleanup removes the kube-proxy tables and nothing else.
// The foreign table is the same throughout.
func TestNFTablesBinary(t *testing.T) {
	bin := nftablesBin(t)
	n := newNetwork(t)
	pod0 := n.pods[0]
	foreign := filepath.Join(t.TempDir(), "foreign.nft")
	if err := os.WriteFile(foreign, []byte(foreignNFT), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, n.node, "nft", "-f", foreign)
	before := nftTables(t, n.node)
	if len(before["ip foreign"]) < 4 {
		t.Fatalf("the foreign table is not there: %v", before)
	}

	manifests := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(manifests, []byte(binaryCluster), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--from-file", manifests, "--node-name", "node-a", "--cluster-cidr", "10.244.0.0/16",
		"--nodeport-addresses", "192.168.50.0/24", "--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", ""}
	p := startSink(t, n, bin, args...)
	m := p.waitSynced(t)
	if mode, err := p.get("/proxyMode"); err != nil || mode != "nftables" {
		t.Errorf("/proxyMode = %q, %v; want nftables", mode, err)
	}
	first := metric(m, "proxysinks_kernel_operations_total")
	if first <= 0 {
		t.Errorf("first run wrote %v kernel objects, want > 0", first)
	}
	vip, nodePort := ap("10.96.0.10", 80), ap(nodeA.String(), 30080)
	seen := reached(t, pod0, "tcp", vip, 30)
	if len(seen) != 3 {
		t.Errorf("cluster IP from a pod reached %v, want the three pods", seen)
	}
	if r := mustGet(t, pod0.ns, "udp", ap("10.96.0.10", 53)); r.Name == "" {
		t.Errorf("UDP cluster IP: no name in %+v", r)
	}
	if r := mustGet(t, n.client, "tcp", nodePort); r.Client.Addr() == clientAddr {
		t.Errorf("node port from outside reached %s keeping the client address, want masquerade (cluster policy)", r.Name)
	}
	programmed := nftTables(t, n.node)
	for _, table := range []string{"ip kube-proxy", "ip6 kube-proxy"} {
		if len(programmed[table]) == 0 {
			t.Errorf("no table %s after the first sync: %v", table, programmed)
		}
	}
	p.stop(t)

	p = startSink(t, n, bin, append(args, "--sync-period", "1s")...)
	nftRestartAndDrift(t, n, p, programmed)

	// An edit of the manifest removing node B's endpoint writes less than
	// the first sync; traffic then reaches node A's pods only.
	edited := strings.Replace(binaryCluster, "- {addresses: [10.244.2.2], conditions: {ready: true}, nodeName: node-b}\n", "", 1)
	m, _ = p.get("/metrics")
	from := metric(m, "proxysinks_kernel_operations_total")
	if err := os.WriteFile(manifests, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if wrote := waitWrites(t, p, from) - from; wrote >= first {
		t.Errorf("removing one endpoint wrote %v kernel objects, the first sync %v: want fewer", wrote, first)
	}
	seen = reached(t, pod0, "tcp", vip, 20)
	if seen[n.pods[2].name] || len(seen) != 2 {
		t.Errorf("after removing node B's endpoint, traffic reached %v, want pod0 and pod1", seen)
	}
	p.stop(t)

	runCleanup(t, n, bin)
	if diff := cmp.Diff(before, nftTables(t, n.node)); diff != "" {
		t.Errorf("after --cleanup, the tables differ from before the sink ran (-before +after):\n%s", diff)
	}
	mustFail(t, pod0.ns, "tcp", vip)
}

// nftRestartAndDrift checks a sink p just restarted with a 1 s resync
// period on the tables it programmed: its first sync and resyncs write
// nothing and change nothing, traffic flows; then a chain flushed and an
// element deleted by hand are repaired by the next resync.
func nftRestartAndDrift(t *testing.T, n *network, p *sinkProcess, programmed map[string][]string) {
	t.Helper()
	m := p.waitSynced(t)
	if v := metric(m, "proxysinks_kernel_operations_total"); v != 0 {
		t.Errorf("restart wrote %v kernel objects, want 0; log:\n%s", v, p.log.String())
	}
	if diff := cmp.Diff(programmed, nftTables(t, n.node)); diff != "" {
		t.Errorf("restart changed the tables (-before +after):\n%s", diff)
	}
	vip := ap("10.96.0.10", 80)
	mustGet(t, n.pods[0].ns, "tcp", vip)
	time.Sleep(1500 * time.Millisecond)
	if m, err := p.get("/metrics"); err != nil || metric(m, "proxysinks_kernel_operations_total") != 0 {
		t.Errorf("resyncs of an unchanged cluster wrote (%v):\n%s", err, m)
	}
	must(t, n.node, "nft", "flush", "chain", "ip", "kube-proxy", "services")
	must(t, n.node, "nft", "delete", "element", "ip", "kube-proxy", "cluster-ips", "{ 10.96.0.10 }")
	waitWrites(t, p, 0)
	// A resync between the two commands repairs the first alone; the
	// next one, a second later, the other.
	if diff := waitEqual(programmed, func() map[string][]string { return nftTables(t, n.node) }); diff != "" {
		t.Errorf("drift not repaired (-programmed +now):\n%s", diff)
	}
	mustGet(t, n.pods[0].ns, "tcp", vip)
}

// nftHostile are the hostile changes TestNFTablesHostileKernel makes by
// hand to the nftables sink's tables, one at a time, each an nft command.
var nftHostile = []struct{ name, cmd string }{
	{"flush a chain", "flush chain ip kube-proxy services"},
	{"flush every chain", "flush table ip kube-proxy"},
	{"delete a map element", "delete element ip kube-proxy service-ips { 10.96.0.10 . tcp . 80 }"},
	{"flush a map", "flush map ip kube-proxy service-ips"},
	{"flush a set", "flush set ip kube-proxy cluster-ips"},
	{"add a rule", "add rule ip kube-proxy services ip saddr 203.0.113.7 drop"},
	{"add an element", "add element ip kube-proxy cluster-ips { 10.96.99.99 }"},
	{"delete a base chain's rule", "flush chain ip kube-proxy nat-prerouting"},
	{"delete the IPv4 table", "delete table ip kube-proxy"},
	{"delete the IPv6 table", "delete table ip6 kube-proxy"},
}

// TestNFTablesHostileKernel runs the nftables sink (resync every second)
// beside a foreign table and makes each change of nftHostile by hand in
// turn: the first resync after it must leave every table exactly as the
// sink programmed it (the foreign one included) and the cluster IP must
// answer again; then a restart writes nothing.
func TestNFTablesHostileKernel(t *testing.T) {
	bin := nftablesBin(t)
	n := newNetwork(t)
	foreign := filepath.Join(t.TempDir(), "foreign.nft")
	if err := os.WriteFile(foreign, []byte(foreignNFT), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, n.node, "nft", "-f", foreign)
	manifests := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(manifests, []byte(binaryCluster), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--from-file", manifests, "--node-name", "node-a", "--cluster-cidr", "10.244.0.0/16", "--sync-period", "1s",
		"--nodeport-addresses", "192.168.50.0/24", "--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", ""}
	p := startSink(t, n, bin, args...)
	m := p.waitSynced(t)
	vip := ap("10.96.0.10", 80)
	mustGet(t, n.pods[0].ns, "tcp", vip)
	programmed := nftTables(t, n.node)
	writes := metric(m, "proxysinks_kernel_operations_total")
	for _, h := range nftHostile {
		start := time.Now()
		must(t, n.node, "nft", h.cmd)
		// The change is seen by the writes that undo it (an unchanged
		// cluster's resyncs write nothing): it may be undone before the
		// tables could be read here.
		writes = waitWrites(t, p, writes)
		// The write that repairs may be one of several in a transaction:
		// the tables are compared once they stop changing.
		var now map[string][]string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if now = nftTables(t, n.node); cmp.Equal(programmed, now) {
				break
			}
		}
		if diff := cmp.Diff(programmed, now); diff != "" {
			t.Errorf("%s: not repaired (-programmed +now):\n%s", h.name, diff)
			continue
		}
		mustGet(t, n.pods[0].ns, "tcp", vip)
		t.Logf("%s: repaired after %s", h.name, time.Since(start).Round(time.Millisecond))
	}
	if strings.Contains(p.log.String(), "file exists") {
		t.Errorf("the sink logged \"file exists\":\n%s", p.log.String())
	}
	p.stop(t)
	p = startSink(t, n, bin, args...)
	if v := metric(p.waitSynced(t), "proxysinks_kernel_operations_total"); v != 0 {
		t.Errorf("restart after the repairs wrote %v kernel objects, want 0; log:\n%s", v, p.log.String())
	}
	p.stop(t)
}
