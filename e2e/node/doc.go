// Package node is the node end-to-end harness and its traffic case table
// (Cases), run against any sink binary (Sinks, keyed by sink name: the
// kernel each programs). A node is built as one with a bridge CNI looks:
// the node address on a bridge (br0) that an external client's link is a
// port of, a second external network routed over its own link, and the
// "pods", each a network namespace on a veth port of the pod bridge cbr0
// (hairpin mode on, br_netfilter calling iptables, as kubelet and the
// bridge plugin set them up). The sink's binary runs on the node and the
// cases send real TCP, UDP and SCTP traffic through what it programs.
//
// Where a sink's cases run follows its kernel's needs (Kernel.NeedsVM):
// the IPVS sinks' in the test VM (e2e/vmtests runs this package's tests
// there with -sink and the binary on $PATH; elsewhere they skip), the
// iptables sink's in fresh network namespaces of the host
// (e2e/hostnode's TestTraffic calls Use and RunCases). A test package
// using the harness has Main as its TestMain (the pods are its own
// binary). The tests here beside TestTraffic check the IPVS sinks'
// kernel side (cleanup, VIP binding, the hostile suite, a warning).
//
// The cases write manifests. By default the sink reads them as files
// (--from-file). With a kubeconfig (e2e/vmtests' TestNodeE2EAPIVM) the
// same cases run against a real control plane on the host, reached
// through the VM's NIC: the manifests' Services are created and updated
// through the API, each endpoint of their EndpointSlices becomes a Pod
// (node, IPs, Ready, terminating), upstream's EndpointSlice controller
// (e2e/cluster's endpointslice-controller) writes the slices, and the sink runs with
// --kubeconfig (the shipped ServiceAccount's) through a relay in the
// node's namespace.
package node
