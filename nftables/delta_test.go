package nftables

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// cloneApplied copies a state deep enough that planning from the copy
// leaves the original as it was.
func cloneApplied(a *applied) applied {
	c := *a
	c.chains = make([]*appliedChain, len(a.chains))
	for i, ch := range a.chains {
		cc := *ch
		c.chains[i] = &cc
	}
	c.sets = append([]appliedSet(nil), a.sets...)
	for i := range c.sets {
		d := *c.sets[i].def
		d.Elements = append([]ruleset.Element(nil), d.Elements...)
		c.sets[i].def = &d
		c.sets[i].elems = append([]*nft.Elem(nil), c.sets[i].elems...)
	}
	return c
}

// deltaPools returns versions of n generated services: with 3, 1, 0 and 2
// endpoints (two of them with a first endpoint moved) and with session
// affinity; a test picks service i's version from them.
func deltaPools(n int) [][]*client.ServiceEndpoints {
	pools := [][]*client.ServiceEndpoints{
		generated(n, 3, netip.Addr{}).Services(),
		generated(n, 1, netip.MustParseAddr("10.99.0.1")).Services(),
		generated(n, 0, netip.Addr{}).Services(),
		generated(n, 2, netip.MustParseAddr("10.99.0.2")).Services(),
	}
	var affinity []*client.ServiceEndpoints
	for _, se := range generated(n, 2, netip.Addr{}).Services() {
		c := *se
		svc := *c.Service
		svc.SessionAffinity = &client.SessionAffinity{TimeoutSeconds: 60}
		c.Service = &svc
		affinity = append(affinity, &c)
	}
	return append(pools, affinity)
}

// TestPlanDeltaMatchesPlan: over a random sequence of snapshots (services
// whose endpoints come and go, session affinity set and unset, services
// removed and added), the delta
// plan of each render gives the operations the full plan gives (same
// order, same compiled bytes), and leaves the state the full plan leaves.
func TestPlanDeltaMatchesPlan(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 30
	pools := deltaPools(n)
	cur := make([]*client.ServiceEndpoints, n) // nil: absent
	copy(cur, pools[0])
	r, err := ruleset.NewRenderer(generatedConfig())
	if err != nil {
		t.Fatal(err)
	}
	var state applied
	var tc tableCompiler
	var ids uint32
	deltas, withSets := 0, 0
	opt := []cmp.Option{cmp.AllowUnexported(op{}, compiledRule{}, anonSet{}, applied{}, appliedChain{}, appliedSet{}), cmpopts.EquateEmpty(),
		cmpopts.IgnoreFields(appliedSet{}, "owned")}
	for step := range 30 {
		if step > 0 {
			changes := 1 + rng.IntN(3)
			if step%10 == 9 {
				changes = 20 // more than inPlace: merged into new lists
			}
			for range changes {
				i := rng.IntN(n)
				if k := rng.IntN(len(pools) + 1); k == len(pools) {
					cur[i] = nil
				} else {
					cur[i] = pools[k][i]
				}
			}
		}
		var ses []*client.ServiceEndpoints
		for _, se := range cur {
			if se != nil {
				ses = append(ses, se)
			}
		}
		d, err := r.RenderDelta(client.NewSnapshot(ses, nil), false)
		if err != nil {
			t.Fatal(err)
		}
		rs := r.Ruleset(false)
		full, err := exprCompiler{}.table(rs)
		if err != nil {
			t.Fatal(err)
		}
		fullIDs, deltaIDs := ids, ids
		before := cloneApplied(&state)
		want, next, err := plan(&before, rs, full, func() uint32 { fullIDs++; return fullIDs })
		if err != nil {
			t.Fatal(err)
		}
		ids = fullIDs
		if d == nil || tc == nil {
			state, tc = next, full
			continue
		}
		got, apply, _, err := planDelta(&state, d, tc, func() uint32 { deltaIDs++; return deltaIDs }, "ip")
		if errors.Is(err, errNoDelta) {
			state, tc = next, full
			continue
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if diff := cmp.Diff(want, got, opt...); diff != "" {
			t.Fatalf("step %d: operations (-plan +planDelta):\n%s", step, diff)
		}
		apply()
		if diff := cmp.Diff(next, state, opt...); diff != "" {
			t.Fatalf("step %d: state (-plan +planDelta):\n%s", step, diff)
		}
		deltas++
		if len(d.Sets)+len(d.DeletedSets) > 0 {
			withSets++
		}
	}
	if deltas < 20 || withSets == 0 {
		t.Errorf("only %d of 29 steps planned by Delta, %d of them adding or deleting sets", deltas, withSets)
	}
}
