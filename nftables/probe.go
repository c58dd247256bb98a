package nftables

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// probeTable is the table of the kernel probe, which is never committed.
const probeTable = "kube-proxy-probe"

// probeEnd labels the probe's last operation, made to fail: the kernel
// then refuses the whole transaction.
const probeEnd = "probe end (a chain that does not exist)"

// probeExtra are the rule forms of service chains that a ruleset without
// services lacks (FAM is the family, A1 and A2 two addresses of it).
var probeExtra = []string{
	"meta l4proto tcp dnat FAM addr . port to numgen random mod 2 map { 0 : A1 . 80 , 1 : A2 . 80 }",
	"FAM saddr @probe-affinity goto probe-endpoint",
	"numgen random mod 1 vmap { 0 : goto probe-endpoint }",
}

// probeKernel checks that the kernel takes every kind of object and
// expression the ruleset uses, writing nothing: the ruleset of no
// services (every base chain and static rule) plus the rule forms of
// service chains, as a transaction into a table of its own whose last
// operation fails, so that the kernel refuses it whole (after loading the
// modules it needs). Any other refused operation is a missing kernel
// feature: the error names it.
func probeKernel(k kernel, fam nft.Family, cfg ruleset.Config) error {
	v6 := fam == nft.FamilyIPv6
	rs, err := ruleset.RenderFamily(client.NewSnapshot(nil, nil), &cfg, v6)
	if err != nil {
		return fmt.Errorf("nftables: probe the kernel: %w", err)
	}
	rs.Table = probeTable
	famWord, a1, a2 := "ip", "10.0.0.1", "10.0.0.2"
	if v6 {
		famWord, a1, a2 = "ip6", "fd00::1", "fd00::2"
	}
	fill := strings.NewReplacer("FAM", famWord, "A1", a1, "A2", a2)
	probe := ruleset.Chain{Name: "probe"}
	for _, r := range probeExtra {
		probe.Rules = append(probe.Rules, ruleset.Rule{Text: fill.Replace(r)})
	}
	rs.Chains = append(rs.Chains, probe, ruleset.Chain{Name: "probe-endpoint",
		Rules: []ruleset.Rule{{Text: fmt.Sprintf("update @probe-affinity { %s saddr }", famWord)}}})
	addrType := "ipv4_addr"
	if v6 {
		addrType = "ipv6_addr"
	}
	rs.Sets = append(rs.Sets, ruleset.Set{Name: "probe-affinity", Type: addrType, Flags: []string{"dynamic", "timeout"}, Timeout: 3 * time.Hour})
	tc, err := exprCompiler{}.table(rs)
	if err != nil {
		return fmt.Errorf("nftables: probe the kernel: %w", err)
	}
	id := uint32(0)
	ops, _, err := plan(&applied{}, rs, tc, func() uint32 { id++; return id })
	if err != nil {
		return fmt.Errorf("nftables: probe the kernel: %w", err)
	}
	ops = append(ops, op{kind: opFlushChain, label: probeEnd, name: "no-such-chain"})
	g, err := k.generation()
	if err != nil {
		return fmt.Errorf("nftables: the kernel does not answer nf_tables requests (no nf_tables module?): %w", err)
	}
	_, err = k.commit(fam, probeTable, ops, g)
	var ce *nft.CommitError
	switch {
	case err == nil:
		return fmt.Errorf("nftables: probe the kernel: the probe transaction was committed (table %v %s): %w", fam, probeTable, errUnknown)
	case !errors.As(err, &ce):
		return fmt.Errorf("nftables: probe the kernel: %w", err)
	}
	var missing []string
	for _, f := range ce.Failed {
		if f.Label != probeEnd {
			missing = append(missing, f.Error())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("nftables: the kernel cannot run the ruleset (%v); it refused: %s", fam, strings.Join(missing, "; "))
	}
	return nil
}
