// Package hostnode runs the iptables sink's node tests on this host's
// kernel, without the VM. TestTraffic runs the traffic case table of
// e2e/node (Cases) against the built iptables sink binary, on e2e/node's
// bridge-CNI node made of fresh network namespaces of this host.
// TestBinary runs the binary on a routed topology of its own (a node, a
// second node, an external client and pods as namespaces joined by veth
// pairs): restarts that write nothing, drift repair, a partial sync,
// --cleanup. TestKubeProxyDifferential is the iptables mode of
// e2e/differential: the binary's rules against a real kube-proxy v1.37.2
// in iptables mode on the same cluster (e2e/cluster). The nftables sink
// has the same three: TestNFTablesTraffic, TestNFTablesBinary and
// TestKubeProxyNFTablesDifferential (with its hostile and settings runs).
// Run it as root: go test ./e2e/hostnode/.
package hostnode
