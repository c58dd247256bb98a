// Package node holds the node end-to-end tests. In the test VM a node is
// built as one with a bridge CNI looks: the node address on a bridge (br0)
// that an external client's link is a port of, a second external network
// routed over its own link, and the "pods", each a network namespace on a
// veth port of the pod bridge cbr0 (hairpin mode on, br_netfilter calling
// iptables, as kubelet and the bridge plugin set them up). The
// ipvs-fullstate sink runs on the node from manifest files the tests
// rewrite, and the tests send real TCP, UDP and SCTP traffic through the
// services it programs. The tests skip outside the VM (make test-vm).
package node
