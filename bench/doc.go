// Package bench holds benchmarks of the sinks against each other and
// against the libraries kube-proxy uses (moby/ipvs, ipset restore,
// vishvananda/netlink), on fake kernels, the host's kernel in a fresh
// network namespace and the VM's kernel, and the soak test (make soak).
package bench
