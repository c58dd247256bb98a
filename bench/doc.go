// Package bench will hold benchmarks comparing the sinks with each other and
// with the libraries kube-proxy uses (moby/ipvs, vishvananda/netlink).
package bench
