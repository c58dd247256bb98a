// Package hostnode runs the iptables sink's traffic tests on this host's
// kernel, without the VM: a node, a second node, an external client and pods
// are fresh network namespaces joined by routed veth pairs; the test drives
// iptables.Proxier in-process with the node's namespace as its kernel and
// sends real TCP, UDP and SCTP traffic (e2e/netexec) through the rules it
// programs. TestBinary runs the built iptables sink binary (sinks/iptables)
// in the node's namespace instead. TestKubeProxyDifferential compares the
// binary's rules with those of a real kube-proxy v1.37.2 in iptables mode
// on the same cluster (e2e/cluster). Run it as root: go test ./e2e/hostnode/.
package hostnode
