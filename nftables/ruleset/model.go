// Package ruleset renders the nftables sink's ruleset, kube-proxy v1.37's
// nftables mode, from client snapshots: one Ruleset per family, in nft's
// own text (the rules, set types and elements as `nft -f` reads them).
// Rendering is pure; package nftables compiles and writes it.
package ruleset

import "time"

// Ruleset is everything the sink owns in one family: the table, its
// chains with their rules, and its sets and maps with their elements.
// Chains and Sets are sorted by name.
type Ruleset struct {
	// Family is "ip" or "ip6".
	Family string
	// Table is the table's name ("kube-proxy").
	Table string
	// Comment is the table's comment.
	Comment string
	Chains  []Chain
	Sets    []Set
}

// Chain is a chain and its rules, in order.
type Chain struct {
	Name string
	// Type, Hook and Priority are set on base chains only, in nft's words
	// ("nat", "prerouting", "dstnat - 10" or a number).
	Type, Hook, Priority string
	Comment              string
	Rules                []Rule
}

// Rule is one rule in nft's syntax, without its comment.
type Rule struct {
	Text    string
	Comment string
}

// Set is a set or map. Type is nft's type expression, with ": <type>"
// for maps ("ipv4_addr . inet_proto . inet_service : verdict").
type Set struct {
	Name  string
	Type  string
	Map   bool
	Flags []string
	// Timeout is the set's default element timeout (0: none).
	Timeout  time.Duration
	Comment  string
	Elements []Element
}

// Element is one element: its key in nft's syntax ("10.96.0.10 . tcp .
// 80"), a map's value ("goto service-…"), and its comment. Elements are
// sorted by key.
type Element struct {
	Key, Value, Comment string
}
