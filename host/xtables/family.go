// Package xtables holds the host tooling every netfilter sink shares for
// iptables: the address family (iptables or ip6tables), a Runner for the
// iptables-save and iptables-restore binaries, the back end a node already
// uses (nft or legacy, Detect), the nf_tables ruleset generation that
// tells whether anyone changed the rules (NFTGeneration), and kube-proxy's
// local-traffic detection the rules match (LocalTraffic).
//
// It knows no sink: the rules themselves are the sinks' (the IPVS sinks'
// static ruleset in dataplane/rules, the iptables sink's chains in
// iptables).
package xtables

// Family selects IPv4 (iptables) or IPv6 (ip6tables).
type Family int

// The families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// String returns "IPv4" or "IPv6".
func (f Family) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}
