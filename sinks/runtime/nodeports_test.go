package runtime

import (
	"bytes"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/proxysinks/proxysinks/client"
)

var addrCmp = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmpopts.EquateEmpty(),
}

func ips(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func cidrs(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

// TestParseNodePortAddresses: CIDRs and kube-proxy v1.37's keywords,
// each keyword at most once.
func TestParseNodePortAddresses(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    []netip.Prefix
		primary bool
		err     string
	}{
		{in: nil},
		{in: []string{"10.0.0.0/8,fd00::/64"}, want: cidrs("10.0.0.0/8", "fd00::/64")},
		{in: []string{"primary"}, primary: true},
		{in: []string{"primary", "192.168.0.0/16"}, want: cidrs("192.168.0.0/16"), primary: true},
		{in: []string{"localhost"}, want: cidrs("127.0.0.0/8", "::1/128")},
		{in: []string{"all"}, want: cidrs("0.0.0.0/0", "::/0")},
		{in: []string{"primary,primary"}, err: `"primary" given twice`},
		{in: []string{"primry"}, err: `"primry" is not a CIDR (nor primary, localhost or all)`},
	} {
		got, primary, err := parseNodePortAddresses(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.in, err)
			continue
		}
		if d := cmp.Diff(tc.want, got, addrCmp); d != "" || primary != tc.primary {
			t.Errorf("%v: primary %v (want %v), CIDRs (-want +got):\n%s", tc.in, primary, tc.primary, d)
		}
	}
}

// TestNodePortAddressesDefault: without --nodeport-addresses a sink of
// mode nftables serves NodePorts on the primary IPs, as kube-proxy's
// nftables mode; the other modes on every address; a list given, even
// all, is taken as it is.
func TestNodePortAddressesDefault(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		args    []string
		primary bool
		want    []netip.Prefix
	}{
		{mode: "ipvs"},
		{mode: "iptables"},
		{mode: "nftables", primary: true},
		{mode: "nftables", args: []string{"--nodeport-addresses", "10.0.0.0/8"}, want: cidrs("10.0.0.0/8")},
		{mode: "nftables", args: []string{"--nodeport-addresses", "all"}, want: cidrs("0.0.0.0/0", "::/0")},
	} {
		var got Config
		sink := testSink(func(e Env) (Built, error) { got = e.Config; return Built{Controller: cfgSink{}}, nil })
		sink.Mode = tc.mode
		var out, errs bytes.Buffer
		args := append([]string{"test-sink", "--dry-run", "--from-file", "../../examples/demo/cluster.yaml", "--node-name", "demo-node"}, tc.args...)
		if status := Main(sink, args, &out, &errs); status != 0 {
			t.Fatalf("%s %v: status %d\n%s", tc.mode, tc.args, status, errs.String())
		}
		if d := cmp.Diff(tc.want, got.NodePortAddresses, addrCmp); d != "" || got.NodePortPrimary != tc.primary {
			t.Errorf("%s %v: primary %v (want %v), CIDRs (-want +got):\n%s", tc.mode, tc.args, got.NodePortPrimary, tc.primary, d)
		}
	}
}

// TestPrimaryIPs: kube-proxy's node IP detection: InternalIPs before
// ExternalIPs, the first of each family, --bind-address replacing its
// family's unless unspecified, loopback left out.
func TestPrimaryIPs(t *testing.T) {
	node := func(as ...client.NodeAddress) *client.Node { return &client.Node{Name: "n", Addresses: as} }
	in := func(a string) client.NodeAddress {
		return client.NodeAddress{Type: client.NodeInternalIP, Addr: netip.MustParseAddr(a)}
	}
	ex := func(a string) client.NodeAddress {
		return client.NodeAddress{Type: client.NodeExternalIP, Addr: netip.MustParseAddr(a)}
	}
	for _, tc := range []struct {
		name string
		node *client.Node
		bind string
		want []netip.Addr
	}{
		{name: "nothing known"},
		{name: "InternalIP before ExternalIP", node: node(ex("203.0.113.1"), in("10.0.0.1"), in("10.0.0.2")), want: ips("10.0.0.1")},
		{name: "ExternalIP when no InternalIP", node: node(ex("203.0.113.1")), want: ips("203.0.113.1")},
		{name: "dual-stack", node: node(in("fd00::1"), in("10.0.0.1"), in("fd00::2")), want: ips("10.0.0.1", "fd00::1")},
		{name: "other family from ExternalIP", node: node(in("10.0.0.1"), ex("2001:db8::1")), want: ips("10.0.0.1", "2001:db8::1")},
		{name: "bind replaces its family", node: node(in("10.0.0.1"), in("fd00::1")), bind: "192.168.1.5", want: ips("192.168.1.5", "fd00::1")},
		{name: "IPv6 bind", node: node(in("10.0.0.1")), bind: "fd00::9", want: ips("10.0.0.1", "fd00::9")},
		{name: "bind without Node", bind: "192.168.1.5", want: ips("192.168.1.5")},
		{name: "unspecified bind", node: node(in("10.0.0.1")), bind: "0.0.0.0", want: ips("10.0.0.1")},
		{name: "loopback bind", node: node(in("10.0.0.1")), bind: "127.0.0.1"},
	} {
		var bind netip.Addr
		if tc.bind != "" {
			bind = netip.MustParseAddr(tc.bind)
		}
		if d := cmp.Diff(tc.want, PrimaryIPs(tc.node, bind), addrCmp); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}

// TestSelectNodePorts: kube-proxy v1.37's selection per IP family: a
// family without a CIDR (or with its zero CIDR) serves on every address
// but loopback and IPv6 link-local; a restricted family on its addresses
// in the CIDRs, loopback included when a CIDR holds it; primary adds the
// primary IPs as /32 and /128, and restricts nothing while none is known.
func TestSelectNodePorts(t *testing.T) {
	node := ips("127.0.0.1", "10.0.0.1", "10.1.0.1", "169.254.3.3", "192.168.1.5", "::1", "fd00::1", "fe80::1")
	for _, tc := range []struct {
		name    string
		c       Config
		primary []netip.Addr
		want    NodePorts
	}{
		{name: "unset", want: NodePorts{Addrs: ips("10.0.0.1", "10.1.0.1", "169.254.3.3", "192.168.1.5", "fd00::1")}},
		{name: "IPv4 CIDR: IPv6 unrestricted", c: Config{NodePortAddresses: cidrs("10.0.0.0/16")},
			want: NodePorts{CIDRs: cidrs("10.0.0.0/16"), Addrs: ips("10.0.0.1", "fd00::1")}},
		{name: "both families", c: Config{NodePortAddresses: cidrs("fe80::/10", "192.168.0.0/16")},
			want: NodePorts{CIDRs: cidrs("192.168.0.0/16", "fe80::/10"), Addrs: ips("192.168.1.5", "fe80::1")}},
		{name: "zero CIDR is unrestricted", c: Config{NodePortAddresses: cidrs("0.0.0.0/0", "10.0.0.0/16", "fd00::/8")},
			want: NodePorts{CIDRs: cidrs("fd00::/8"), Addrs: ips("10.0.0.1", "10.1.0.1", "169.254.3.3", "192.168.1.5", "fd00::1")}},
		{name: "localhost", c: Config{NodePortAddresses: cidrs("127.0.0.0/8", "::1/128")},
			want: NodePorts{CIDRs: cidrs("127.0.0.0/8", "::1/128"), Addrs: ips("127.0.0.1", "::1")}},
		{name: "primary", c: Config{NodePortPrimary: true}, primary: ips("10.1.0.1"),
			want: NodePorts{CIDRs: cidrs("10.1.0.1/32"), Addrs: ips("10.1.0.1", "fd00::1")}},
		{name: "primary dual-stack and a CIDR", c: Config{NodePortPrimary: true, NodePortAddresses: cidrs("192.168.0.0/16")}, primary: ips("10.1.0.1", "fd00::1"),
			want: NodePorts{CIDRs: cidrs("10.1.0.1/32", "192.168.0.0/16", "fd00::1/128"), Addrs: ips("10.1.0.1", "192.168.1.5", "fd00::1")}},
		{name: "primary not on the node", c: Config{NodePortPrimary: true}, primary: ips("10.9.9.9"),
			want: NodePorts{CIDRs: cidrs("10.9.9.9/32"), Addrs: ips("fd00::1")}},
		{name: "primary unknown", c: Config{NodePortPrimary: true},
			want: NodePorts{Addrs: ips("10.0.0.1", "10.1.0.1", "169.254.3.3", "192.168.1.5", "fd00::1")}},
	} {
		got := tc.c.SelectNodePorts(node, tc.primary)
		if d := cmp.Diff(tc.want, got, addrCmp); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}

// TestNodeAddrsFollow: the selection follows the node's addresses and,
// with primary, the Node's; a change that selects the same reports
// nothing.
func TestNodeAddrsFollow(t *testing.T) {
	c := Config{NodePortPrimary: true, NodePortAddresses: cidrs("192.168.0.0/16")}
	n := &nodeAddrs{c: c, local: ips("10.0.0.1", "192.168.1.5")}
	n.cur = c.SelectNodePorts(n.local, nil)
	if n.setLocal(ips("10.0.0.1", "192.168.1.5")) {
		t.Error("the same addresses: a change reported")
	}
	if !n.setLocal(ips("10.0.0.1", "192.168.1.5", "192.168.1.6")) {
		t.Error("an address added in the CIDR: no change reported")
	}
	if n.setLocal(ips("10.0.0.1", "10.0.0.2", "192.168.1.5", "192.168.1.6")) {
		t.Error("an address added outside the CIDRs (and primary unknown, IPv4 restricted): a change reported")
	}
	in := func(a string) *client.Node {
		return &client.Node{Addresses: []client.NodeAddress{{Type: client.NodeInternalIP, Addr: netip.MustParseAddr(a)}}}
	}
	if !n.setNode(in("10.0.0.1")) {
		t.Error("primary IP known: no change reported")
	}
	if d := cmp.Diff(ips("10.0.0.1", "192.168.1.5", "192.168.1.6"), n.cur.Addrs, addrCmp); d != "" {
		t.Errorf("with primary 10.0.0.1 (-want +got):\n%s", d)
	}
	if n.setNode(in("10.0.0.1")) || n.setNode(nil) {
		t.Error("the same Node, or none: a change reported")
	}
	if !n.setNode(in("10.0.0.2")) {
		t.Error("primary IP changed: no change reported (kube-proxy exits; the sink follows)")
	}
	if d := cmp.Diff(ips("10.0.0.2", "192.168.1.5", "192.168.1.6"), n.cur.Addrs, addrCmp); d != "" {
		t.Errorf("with primary 10.0.0.2 (-want +got):\n%s", d)
	}
}

// portsController records the snapshots and the NodePorts it is given.
type portsController struct {
	env   Env
	sets  []NodePorts
	snaps []*client.Snapshot
}

func (c *portsController) Snapshot(s *client.Snapshot) { c.snaps = append(c.snaps, s) }
func (c *portsController) Resync() SyncStats           { return SyncStats{} }
func (c *portsController) SetNodePorts(n NodePorts)    { c.sets = append(c.sets, n) }

// TestPrimaryFromNode: with --nodeport-addresses=primary the source is
// asked for the Node, whose InternalIP selects where NodePorts are served
// before the first snapshot is programmed; --bind-address wins over it.
func TestPrimaryFromNode(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "node.yaml"), []byte(`apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  addresses:
  - {type: Hostname, address: node-a}
  - {type: ExternalIP, address: 203.0.113.4}
  - {type: InternalIP, address: 192.168.1.10}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		first    []netip.Addr
		followed []NodePorts
	}{
		{name: "the Node's InternalIP", first: ips("10.0.0.5", "192.168.1.10", "203.0.113.4"),
			followed: []NodePorts{{CIDRs: cidrs("192.168.1.10/32"), Addrs: ips("192.168.1.10")}}},
		{name: "--bind-address", args: []string{"--bind-address", "10.0.0.5"}, first: ips("10.0.0.5")},
	} {
		ctl := &portsController{}
		sink := Sink{Name: "test-sink", Mode: "test", New: func(e Env) (Built, error) { ctl.env = e; return Built{Controller: ctl}, nil }}
		var stdout, stderr bytes.Buffer
		status := Main(sink, append([]string{"test-sink", "--dry-run", "--from-file", dir, "--node-name", "node-a",
			"--node-address", "10.0.0.5,192.168.1.10,203.0.113.4", "--nodeport-addresses", "primary"}, tc.args...), &stdout, &stderr)
		if status != 0 {
			t.Fatalf("%s: status %d: %s", tc.name, status, stderr.String())
		}
		if d := cmp.Diff(tc.first, ctl.env.NodePorts.Addrs, addrCmp); d != "" {
			t.Errorf("%s: Env.NodePorts (-want +got):\n%s", tc.name, d)
		}
		if d := cmp.Diff(tc.followed, ctl.sets, addrCmp); d != "" {
			t.Errorf("%s: SetNodePorts (-want +got):\n%s", tc.name, d)
		}
		if len(ctl.snaps) != 1 {
			t.Errorf("%s: %d snapshots, want 1", tc.name, len(ctl.snaps))
		}
	}
}

// TestNodePortsHandOver: a changed selection is handed to the controller
// with its last snapshot again, and waits while a split resync's read
// runs.
func TestNodePortsHandOver(t *testing.T) {
	c := Config{}
	ctl := &portsController{}
	r := &running{c: c, log: slog.New(slog.NewTextHandler(io.Discard, nil)), ctl: ctl,
		nodes: &nodeAddrs{c: c, local: ips("10.0.0.1")}}
	r.nodes.cur = c.SelectNodePorts(r.nodes.local, nil)
	r.last = client.NewSnapshot(nil, nil)
	r.nodes.setLocal(ips("10.0.0.1", "10.0.0.2"))
	r.nodePortsChanged(true, true)
	if len(ctl.sets)+len(ctl.snaps) != 0 {
		t.Fatalf("during a read: %d sets, %d snapshots; want none", len(ctl.sets), len(ctl.snaps))
	}
	r.nodePortsChanged(false, true)
	if d := cmp.Diff([]NodePorts{{Addrs: ips("10.0.0.1", "10.0.0.2")}}, ctl.sets, addrCmp); d != "" {
		t.Errorf("after the read (-want +got):\n%s", d)
	}
	if len(ctl.snaps) != 1 || ctl.snaps[0] != r.last {
		t.Errorf("snapshots %v, want the last one again", ctl.snaps)
	}
	r.nodePortsChanged(false, true)
	if len(ctl.sets) != 1 || len(ctl.snaps) != 1 {
		t.Errorf("nothing changed, yet handed again: %d sets, %d snapshots", len(ctl.sets), len(ctl.snaps))
	}
}
