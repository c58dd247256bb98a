package hostnode

import (
	"net/netip"
	"testing"

	"github.com/proxysinks/proxysinks/e2e/node"
	"github.com/proxysinks/proxysinks/e2e/vm"
)

// TestMain serves the harness's pods (node.Main).
func TestMain(m *testing.M) { node.Main(m) }

// TestTraffic runs the traffic case table (e2e/node's Cases) against the
// built iptables sink binary, on the node e2e/node builds (a bridge CNI's
// node, pods and external clients as fresh network namespaces of this
// host: the iptables sink needs no VM).
func TestTraffic(t *testing.T) {
	node.Use(node.Options{Sink: "iptables", Bin: vm.BuildSink(t, "iptables")})
	node.RunCases(t)
}

func ap(a string, port int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr(a), uint16(port))
}
