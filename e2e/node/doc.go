// Package node holds the node end-to-end tests. In the test VM a node is
// built as one with a bridge CNI looks: the node address on a bridge (br0)
// that an external client's link is a port of, a second external network
// routed over its own link, and the "pods", each a network namespace on a
// veth port of the pod bridge cbr0 (hairpin mode on, br_netfilter calling
// iptables, as kubelet and the bridge plugin set them up). An IPVS sink
// runs on the node and the tests send real TCP, UDP and SCTP traffic
// through the services it programs. The tests skip outside the VM (make
// test-vm).
//
// The cases write manifests. By default the sink reads them as files
// (--from-file). With -kubeconfig (e2e/vmtests' TestNodeE2EAPIVM) the same
// cases run against a real control plane on the host, reached through the
// VM's NIC: the manifests' Services are created and updated through the
// API, each endpoint of their EndpointSlices becomes a Pod (node, IPs,
// Ready, terminating), kube-controller-manager's EndpointSlice controller
// writes the slices, and the sink runs with --kubeconfig (the shipped
// ServiceAccount's) through a relay in the node's namespace.
package node
