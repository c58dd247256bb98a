// Package nftables is the nftables sink's controller: it programs
// kube-proxy v1.37's nftables-mode ruleset (package ruleset renders it)
// into the kernel as nf_tables transactions over netlink (packages
// netlinkraw/nft and netlinkraw/nftexpr), writing only what changed.
//
// A Proxier keeps, per family, what its table holds: the ruleset text it
// last wrote with the kernel objects compiled from it. A sync renders the
// snapshot (ruleset.Renderer: only changed services are rendered again),
// merges the result with that state by name and key, compiles only what
// is new or changed, and commits one transaction (plan.go): a changed
// chain is flushed and its rules added again, set and map elements are
// added and deleted, chains and sets that went are deleted after what
// referred to them. The transaction carries the nf_tables generation it
// was computed against, so the kernel refuses it if another writer
// committed meanwhile; a refused transaction applies nothing and its error
// names the refused objects.
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
