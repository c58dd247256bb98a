// Package nftables is the nftables sink's controller: it programs
// kube-proxy v1.37's nftables-mode ruleset (package ruleset renders it)
// into the kernel as nf_tables transactions over netlink (packages
// netlinkraw/nft and netlinkraw/nftexpr), writing only what changed.
//
// A Proxier keeps, per family, what its table holds: the ruleset text it
// last wrote with the kernel objects compiled from it. A sync renders the
// snapshot (ruleset.Renderer: only changed services are rendered again)
// and commits one transaction with what changed: a changed chain is
// flushed and its rules added again, set and map elements are added and
// deleted, chains and sets that went are deleted after what referred to
// them. In the steady state the renderer hands over a ruleset.Delta (the
// changed services' chains and element additions and deletions) and
// planDelta (delta.go) turns it into the transaction and patches the
// state in place, at the cost of the change, not of the cluster. The
// full path, the reference the delta path is tested against, assembles
// the whole ruleset and merges it with the state by name and key
// (plan.go); it runs on the first sync, after a read of the kernel or a
// failed commit, after a configuration change, and when a changed key is
// shared between services. The transaction carries the nf_tables generation it
// was computed against, so the kernel refuses it if another writer
// committed meanwhile; a refused transaction applies nothing and its error
// names the refused objects. When these all belong to services, the
// services are quarantined and the rest committed (quarantine.go).
//
// The kernel is read only when the generation moved since the Proxier's
// last commit (first sync, another writer): the table is then compared
// with what the Proxier wrote, or with the ruleset compiled whole
// (compare.go, canonicalizing the kernel's dump), so that a restart with
// an unchanged cluster, or a table kube-proxy's nftables mode left,
// writes nothing, and another writer's changes are repaired and counted
// (SyncStats.ForeignChanges).
//
// Two kernel costs shape the writes: anonymous sets (kube-proxy's numgen
// map in each service chain) get names of their own, carrying a digest of
// their content (anon.go), and a large first write goes in steps that
// take effect together (chunk.go).
package nftables
