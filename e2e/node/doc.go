// Package node holds the node end-to-end tests: in the test VM, a node, its
// "pods" and external clients are network namespaces joined by veth links;
// the ipvs-fullstate sink runs on the node from manifest files the tests
// rewrite, and the tests send real TCP, UDP and SCTP traffic through the
// services it programs. The tests skip outside the VM (make test-vm).
package node
