// Package iptables is the iptables sink's Proxier: NewProxier,
// Proxier.Snapshot and Proxier.Resync program kube-proxy v1.37's
// iptables-mode ruleset for the services of client snapshots;
// CleanupLeftovers removes it and CanUseIPTablesProxier checks the node.
// Seed 002's other entry points (OnServiceUpdate, OnEndpointsUpdate, Sync,
// SyncLoop) are thin wrappers in package seed.
//
// Rendering (render.go) is pure and writes rules in a canonical form
// (canonical.go: iptables-save's, with host addresses and probabilities as
// short as iptables reads them back); a sync compares them with what it
// last wrote (partial sync) or with the kernel (full sync, iptables-save's
// output brought to the canonical form) and applies the difference with
// iptables-restore --noflush, touching only the chains it owns. See
// README.md and docs/design/iptables.md for the chains and the differences
// from kube-proxy, docs/bench/iptables.md for the measurements.
package iptables
