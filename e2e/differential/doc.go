// Package differential is the kube-proxy differential oracle, one harness
// for every proxy mode: a real control plane (e2e/cluster) holds the broad
// cluster (cluster.Broad) plus the mode's own shapes; kube-proxy v1.37.2
// in that mode and then each sink of the mode program a fresh node (a host
// network namespace or a fresh VM, as the mode's kernel needs) until its
// kernel state is stable; the captures are compared, and every difference
// must be listed, with its reason, in the mode's differences file under
// e2e/cluster/testdata (an entry that no longer occurs fails too).
//
// A mode (Modes, keyed by its name) is its kube-proxy --proxy-mode, its
// sinks, its shapes, its differences file, where it runs and how that
// place captures and normalizes the kernel state; Sinks maps every sink to
// its mode. The runners are e2e/hostnode's TestKubeProxyDifferential
// (iptables, host network namespaces), TestKubeProxyNFTablesDifferential
// (nftables, host network namespaces, nft's listing normalized by
// NormalizeNFT, and the takeover of a node kube-proxy left) and
// e2e/vmtests' (ipvs, the VM).
package differential
