// Package nftables is the nftables sink's controller: it programs
// kube-proxy v1.37's nftables-mode ruleset (package ruleset renders it)
// into the kernel as nf_tables transactions over netlink (packages
// netlinkraw/nft and netlinkraw/nftexpr), writing only what changed.
package nftables
