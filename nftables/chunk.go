package nftables

import "github.com/proxysinks/proxysinks/nftables/ruleset"

// The first write of a large table is split. The kernel binds each
// anonymous set (kube-proxy's numgen map, one per service chain) to its
// rule by walking every operation of the transaction so far
// (__nft_set_trans_bind), so that one transaction of n service chains
// costs O(n²): 10,000 services took 7 s of kernel time in one
// transaction on this project's build host. A first write (no table yet)
// therefore goes in steps: the table, its sets and all its chains, empty;
// then the rules of regular chains, ChunkChains chains a transaction;
// then the last transaction adds the base chains' rules and every set and
// map element. Until that last one nothing reaches the new chains (only
// base chains, hooked and empty, see packets; map elements and jumps make
// the others reachable), so the ruleset still takes effect at once. A
// failed step leaves what the earlier ones wrote, which the Proxier
// knows: the next sync continues from it.

// defaultChunkChains is ChunkChains' default.
const defaultChunkChains = 1000

// firstSteps returns the intermediate rulesets of a first write of rs in
// steps of n regular chains (see above), nil when one transaction does:
// n is 0 or rs has no more than n regular chains with rules.
func firstSteps(rs *ruleset.Ruleset, n int) []*ruleset.Ruleset {
	var regular []int
	for i := range rs.Chains {
		if rs.Chains[i].Hook == "" && len(rs.Chains[i].Rules) > 0 {
			regular = append(regular, i)
		}
	}
	if n <= 0 || len(regular) <= n {
		return nil
	}
	step := func(filled int) *ruleset.Ruleset {
		s := *rs
		s.Chains = make([]ruleset.Chain, len(rs.Chains))
		for i := range rs.Chains {
			s.Chains[i] = rs.Chains[i]
			s.Chains[i].Rules = nil
		}
		for _, i := range regular[:filled] {
			s.Chains[i].Rules = rs.Chains[i].Rules
		}
		s.Sets = make([]ruleset.Set, len(rs.Sets))
		for i := range rs.Sets {
			s.Sets[i] = rs.Sets[i]
			s.Sets[i].Elements = nil
		}
		return &s
	}
	out := []*ruleset.Ruleset{step(0)}
	for filled := n; filled < len(regular); filled += n {
		out = append(out, step(filled))
	}
	return append(out, step(len(regular)))
}
