package hostnode

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/e2e/differential"
	"github.com/proxysinks/proxysinks/e2e/vm"
)

// nodePortRule matches KUBE-SERVICES' jump to KUBE-NODEPORTS for one
// node address, as iptables-save prints it.
func nodePortRule(addr string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^-A KUBE-SERVICES -d ` + regexp.QuoteMeta(addr) + `/32 .*-j KUBE-NODEPORTS$`)
}

// nodePortServed reports whether a sink's kernel state on the node serves
// node ports on addr, and returns that state (for the failure message).
type nodePortServed func(t *testing.T, n *network, addr string) (bool, string)

// iptablesNodePort looks for the address's KUBE-SERVICES jump to
// KUBE-NODEPORTS (the iptables sink).
func iptablesNodePort(t *testing.T, n *network, addr string) (bool, string) {
	nat := n.node.MustRun(t, "iptables-save", "-t", "nat")
	return nodePortRule(addr).MatchString(nat), nat
}

// nftNodePort looks for the address in the nodeport-ips set of table ip
// kube-proxy (the nftables sink).
func nftNodePort(t *testing.T, n *network, addr string) (bool, string) {
	out := n.node.MustRun(t, "nft", "list", "set", "ip", "kube-proxy", "nodeport-ips")
	return slices.Contains(differential.NormalizeNFT(out).Lines, "set nodeport-ips: element "+addr), out
}

// waitRule waits up to within for the node's kernel state to serve
// (present) or not node ports on addr, as served reads it, and returns
// how long it took.
func waitRule(t *testing.T, n *network, p *sinkProcess, served nodePortServed, addr string, present bool, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, state := served(t, n, addr)
		if ok == present {
			return time.Since(start)
		}
		if p.cmd.ProcessState != nil {
			t.Fatalf("sink exited: %v\n%s", p.cmd.ProcessState, p.log.String())
		}
		if time.Since(start) > within {
			t.Fatalf("node ports on %s present=%v not reached within %s; state:\n%s\nlog:\n%s", addr, present, within, state, p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// nodeManifest is the binary test's cluster with node A's Node carrying
// internalIP.
func nodeManifest(internalIP string) string {
	node := "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\nstatus:\n  addresses:\n  - {type: InternalIP, address: " + internalIP + "}\n"
	return strings.Replace(binaryCluster, "apiVersion: v1\nkind: Node\nmetadata: {name: node-a}\n", node, 1)
}

// TestNodeAddressChange: the iptables sink follows the node's addresses
// without a restart (nodeAddressChange, its KUBE-NODEPORTS rules).
func TestNodeAddressChange(t *testing.T) {
	nodeAddressChange(t, vm.BuildSink(t, "iptables"), iptablesNodePort)
}

// TestNFTablesNodeAddressChange: the nftables sink follows the node's
// addresses without a restart (nodeAddressChange, its nodeport-ips set).
func TestNFTablesNodeAddressChange(t *testing.T) {
	nodeAddressChange(t, nftablesBin(t), nftNodePort)
}

// nodeAddressChange: the sink bin follows the node's addresses without a
// restart. With --nodeport-addresses=192.168.50.0/24, an address added to
// node A's link in that range serves node ports (served) within 2 s, and
// to a client; its removal takes them away within 2 s; an address outside
// the range gets none. With primary, node ports follow the Node's
// InternalIP when it changes (where kube-proxy exits).
func nodeAddressChange(t *testing.T, bin string, served nodePortServed) {
	n := newNetwork(t)
	manifests := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(manifests, []byte(nodeManifest(nodeA.String())), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--from-file", manifests, "--node-name", "node-a", "--cluster-cidr", "10.244.0.0/16",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", ""}

	t.Run("CIDR", func(t *testing.T) {
		p := startSink(t, n, bin, append(args, "--nodeport-addresses", "192.168.50.0/24")...)
		p.waitSynced(t)
		waitRule(t, n, p, served, nodeA.String(), true, 0)
		must(t, n.node, "ip", "addr", "add", "192.168.50.3/24", "dev", "ext0")
		must(t, n.node, "ip", "addr", "add", "10.1.1.1/32", "dev", "nb0")
		t.Logf("address added: rule after %s", waitRule(t, n, p, served, "192.168.50.3", true, 2*time.Second))
		if r := mustGet(t, n.client, "tcp", ap("192.168.50.3", 30080)); r.Name == "" {
			t.Errorf("node port on the new address: no name in %+v", r)
		}
		must(t, n.node, "ip", "addr", "del", "192.168.50.3/24", "dev", "ext0")
		t.Logf("address removed: rule gone after %s", waitRule(t, n, p, served, "192.168.50.3", false, 2*time.Second))
		if ok, state := served(t, n, "10.1.1.1"); ok {
			t.Errorf("an address outside --nodeport-addresses serves node ports:\n%s", state)
		}
		waitRule(t, n, p, served, nodeA.String(), true, 0)
		must(t, n.node, "ip", "addr", "del", "10.1.1.1/32", "dev", "nb0")
		p.stop(t)
	})

	t.Run("primary", func(t *testing.T) {
		p := startSink(t, n, bin, append(args, "--nodeport-addresses", "primary")...)
		p.waitSynced(t)
		waitRule(t, n, p, served, nodeA.String(), true, 0)
		must(t, n.node, "ip", "addr", "add", "192.168.50.4/24", "dev", "ext0")
		time.Sleep(500 * time.Millisecond)
		if ok, state := served(t, n, "192.168.50.4"); ok {
			t.Errorf("an address that is not the primary IP serves node ports:\n%s", state)
		}
		if err := os.WriteFile(manifests, []byte(nodeManifest("192.168.50.4")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("primary IP changed: rule after %s", waitRule(t, n, p, served, "192.168.50.4", true, 3*time.Second))
		waitRule(t, n, p, served, nodeA.String(), false, 2*time.Second)
		if r := mustGet(t, n.client, "tcp", ap("192.168.50.4", 30080)); r.Name == "" {
			t.Errorf("node port on the new primary IP: no name in %+v", r)
		}
		p.stop(t)
	})
}
