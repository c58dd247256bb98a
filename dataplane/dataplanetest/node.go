package dataplanetest

import (
	"net/netip"
	"testing"

	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset/ipsettest"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs/ipvstest"
)

// Families are the IP families a Node serves unless told otherwise: both.
var Families = []xtables.Family{xtables.IPv4, xtables.IPv6}

// Node is one fake node for the IPVS sinks: IPVS and ipsets on
// netlinkraw's fakes (the sinks' sets made, as Node.Setup makes them) and
// an in-memory dummy link. A sink process is started on it with Kernel
// and Reader; the node outlives the process, as a kernel does.
type Node struct {
	IPVS  *ipvstest.Kernel
	Sets  *ipsettest.Fake
	Links *Links
	// Families are the families the sets are made for and Reader reads.
	Families []xtables.Family
}

// NewNode returns a node serving families (nil: Families), its IPVS fake
// made with opts.
func NewNode(tb testing.TB, families []xtables.Family, opts ...ipvstest.Option) *Node {
	tb.Helper()
	if families == nil {
		families = Families
	}
	n := &Node{IPVS: ipvstest.New(opts...), Sets: ipsettest.New(), Links: NewLinks(), Families: families}
	if err := dataplane.CreateSets(n.Sets, families, 1024, 65536); err != nil {
		tb.Fatal(err)
	}
	return n
}

// Kernel returns the node as a dataplane.Kernel over a new IPVS
// connection (a started process's), closed when tb ends; the dummy link
// is kube-ipvs0.
func (n *Node) Kernel(tb testing.TB) *dataplane.Kernel {
	tb.Helper()
	conn, err := n.IPVS.Conn()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return &dataplane.Kernel{IPVSConn: conn, IPSet: n.Sets, Link: n.Links, Dummy: "kube-ipvs0"}
}

// Reader returns what reads k for a sink on the node serving node ports
// on addrs (dataplane.Node.Read).
func (n *Node) Reader(k *dataplane.Kernel, addrs ...netip.Addr) *dataplane.Node {
	return &dataplane.Node{Kernel: k, Cfg: dataplane.NodeConfig{Families: n.Families, NodeAddresses: addrs}}
}
