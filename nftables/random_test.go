package nftables

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// randomRuleset returns a ruleset drawn from small pools of chains, rules,
// set definitions and elements, so that successive draws share, change
// and drop parts.
func randomRuleset(r *rand.Rand) *ruleset.Ruleset {
	rs := &ruleset.Ruleset{Family: "ip", Table: "kube-proxy", Comment: "rules for kube-proxy"}
	if r.IntN(20) == 0 {
		rs.Comment = "another comment"
	}
	rules := []string{"dnat to 10.0.0.1", "dnat to 10.0.0.2", "counter", "jump c01", "drop"}
	if r.IntN(3) > 0 {
		rs.Chains = append(rs.Chains, ruleset.Chain{Name: "base", Type: "nat", Hook: "prerouting", Priority: "dstnat",
			Rules: []ruleset.Rule{{Text: "jump services"}}})
	}
	for i := range 12 {
		if r.IntN(3) == 0 {
			continue
		}
		c := ruleset.Chain{Name: fmt.Sprintf("c%02d", i)}
		for range r.IntN(4) {
			c.Rules = append(c.Rules, ruleset.Rule{Text: rules[r.IntN(len(rules))], Comment: []string{"", "x"}[r.IntN(2)]})
		}
		rs.Chains = append(rs.Chains, c)
	}
	for _, name := range []string{"s1", "m1", "m2"} {
		if r.IntN(5) == 0 {
			continue
		}
		s := ruleset.Set{Name: name, Type: "ipv4_addr", Map: name[0] == 'm'}
		if r.IntN(15) == 0 {
			s.Comment = "redefined"
		}
		for k := range 15 {
			if r.IntN(2) == 0 {
				continue
			}
			e := ruleset.Element{Key: fmt.Sprintf("10.96.0.%d", k)}
			if s.Map {
				e.Value = fmt.Sprintf("goto c%02d", r.IntN(3))
			}
			s.Elements = append(s.Elements, e)
		}
		rs.Sets = append(rs.Sets, s)
	}
	return rs
}

// foreignChange changes the fake kernel's table as another writer would.
func foreignChange(r *rand.Rand, k *fakeKernel) {
	kt := k.tables[nft.FamilyIPv4]
	if kt == nil {
		return
	}
	switch r.IntN(4) {
	case 0:
		kt.chains[fmt.Sprintf("stray%d", r.IntN(3))] = &kernelChain{chain: nft.Chain{Name: "stray"}}
	case 1:
		for _, c := range kt.chains {
			c.rules = append(c.rules, nft.Rule{Exprs: encExpr("fake", appendAttr(nil, 1, []byte("foreign")))})
			break
		}
	case 2:
		for _, s := range kt.sets {
			if len(s.elems) > 0 {
				s.elems = s.elems[1:]
			}
			s.elems = append(s.elems, nft.Elem{Key: []byte("10.96.9.9")})
			break
		}
	case 3:
		delete(kt.chains, "c03")
	}
	k.gen += 3
}

// TestSyncRandom drives a Proxier over a fake kernel through random
// rulesets, with other writers' changes, refused transactions, restarts
// and first writes in steps, and requires after every successful sync the
// table a fresh write of the same ruleset gives, and after a failed one
// the table as it was.
func TestSyncRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	k := newFakeKernel()
	var want *ruleset.Ruleset
	newProxier := func() *Proxier {
		p := &Proxier{cfg: Config{IPv4: true, ChunkChains: []int{0, 2, 5}[r.IntN(3)]}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			k: k, comp: &fakeCompiler{}, fams: []*family{{name: "ip", fam: nft.FamilyIPv4}},
			render: func(*client.Snapshot, bool) (*ruleset.Ruleset, error) { return want, nil }}
		return p
	}
	p := newProxier()
	var tot SyncStats
	for step := range 400 {
		want = randomRuleset(r)
		switch r.IntN(12) {
		case 0:
			foreignChange(r, k)
		case 1:
			k.failNext = true
		case 2:
			p = newProxier()
		}
		before := map[string]string{}
		if kt := k.tables[nft.FamilyIPv4]; kt != nil {
			before = canonTable(t, kt)
		}
		failing := k.failNext
		st, err := p.Snapshot(&client.Snapshot{})
		tot.add(st)
		got := map[string]string{}
		if kt := k.tables[nft.FamilyIPv4]; kt != nil {
			got = canonTable(t, kt)
		}
		if err != nil {
			// The first commit of the sync failed: nothing was written.
			if !failing {
				t.Fatalf("step %d: %v", step, err)
			}
			if diff := cmp.Diff(before, got); diff != "" {
				t.Fatalf("step %d: the table changed in a failed sync (-before +after):\n%s", step, diff)
			}
			continue
		}
		fresh := newFakeKernel()
		fp := &Proxier{cfg: Config{IPv4: true, ChunkChains: -1}, log: p.log, k: fresh, comp: &fakeCompiler{},
			fams: []*family{{name: "ip", fam: nft.FamilyIPv4}}, render: p.render}
		if _, err := fp.Snapshot(&client.Snapshot{}); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(canonTable(t, fresh.tables[nft.FamilyIPv4]), got); diff != "" {
			t.Fatalf("step %d: table (-fresh write +incremental):\n%s", step, diff)
		}
		if st, err := p.Resync(); err != nil || st.Transactions != 0 || st.Reads != 0 {
			t.Fatalf("step %d: resync after a sync: %+v, %v", step, st, err)
		}
	}
	t.Logf("%+v", tot)
	if tot.Failures == 0 || tot.ForeignChanges == 0 || tot.DeletedChains == 0 || tot.DeletedElements == 0 || tot.DeletedSets == 0 || tot.Reads < 10 {
		t.Errorf("the random walk missed a path: %+v", tot)
	}
}
