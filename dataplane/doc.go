// Package dataplane will hold what both IPVS sinks share: rendering a service
// into kernel objects, node setup (modules, sysctls, kube-ipvs0, ipsets,
// iptables base rules) and batched, ownership-aware apply (issue 5).
package dataplane
