package ruleset

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/proxysinks/proxysinks/client"
)

// applyDelta returns rs with d applied (rs is left as it was).
func applyDelta(rs *Ruleset, d *Delta) *Ruleset {
	out := *rs
	chains := map[string]Chain{}
	for _, c := range rs.Chains {
		chains[c.Name] = c
	}
	for _, n := range d.DeletedChains {
		delete(chains, n)
	}
	for _, c := range d.Chains {
		chains[c.Name] = *c
	}
	out.Chains = nil
	for _, c := range chains {
		out.Chains = append(out.Chains, c)
	}
	slices.SortFunc(out.Chains, func(a, b Chain) int { return strings.Compare(a.Name, b.Name) })
	sets := map[string]Set{}
	for _, s := range rs.Sets {
		sets[s.Name] = s
	}
	for _, n := range d.DeletedSets {
		delete(sets, n)
	}
	for _, s := range d.Sets {
		sets[s.Name] = *s
	}
	for _, ed := range d.Elements {
		s := sets[ed.Set]
		els := slices.DeleteFunc(slices.Clone(s.Elements), func(e Element) bool { return slices.Contains(ed.Deleted, e) })
		els = append(els, ed.Added...)
		slices.SortFunc(els, func(a, b Element) int { return strings.Compare(a.Key, b.Key) })
		s.Elements = els
		sets[ed.Set] = s
	}
	out.Sets = nil
	for _, s := range sets {
		out.Sets = append(out.Sets, s)
	}
	slices.SortFunc(out.Sets, func(a, b Set) int { return strings.Compare(a.Name, b.Name) })
	return &out
}

// TestRenderDeltaMatchesRender: over a random sequence of snapshots
// (services changed, added, removed, sharing keys now and then, the
// service CIDRs changed), every Delta applied to the previous full render
// gives the next full render; a nil Delta is allowed only where keys are
// shared or the base table changed, and most steps have one.
func TestRenderDeltaMatchesRender(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	services := generated(150, 3, true).Services()
	extra := generated(300, 2, true).Services()[150:]
	cfg := Config{}
	r, err := NewRenderer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var prev [2]*Ruleset
	var cidrs []netip.Prefix
	deltas, steps := 0, 0
	for step := range 120 {
		services = mutate(rng, services, extra)
		if step%40 == 39 {
			cidrs = []netip.Prefix{netip.MustParsePrefix("10.96.0.0/" + []string{"12", "16"}[step/40%2])}
		}
		s := client.NewSnapshot(services, nil)
		s.ServiceCIDRs = cidrs
		for i, v6 := range []bool{false, true} {
			d, err := r.RenderDelta(s, v6)
			if err != nil {
				t.Fatal(err)
			}
			want, err := RenderFamily(s, &cfg, v6)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, r.Ruleset(v6)); diff != "" {
				t.Fatalf("step %d v6 %v: Ruleset (-RenderFamily +Renderer):\n%s", step, v6, diff)
			}
			if prev[i] != nil {
				steps++
				if d != nil {
					deltas++
					if diff := cmp.Diff(want, applyDelta(prev[i], d), cmpopts.EquateEmpty()); diff != "" {
						t.Fatalf("step %d v6 %v: delta applied (-RenderFamily +previous with Delta):\n%s", step, v6, diff)
					}
				}
			}
			prev[i] = want
		}
	}
	if deltas < steps*2/3 {
		t.Errorf("only %d of %d renders had a Delta", deltas, steps)
	}
}

// TestRenderDeltaSharedKey: a key two services share is the first
// service's; a change of either gives no Delta (a full write), and once
// the key is no longer shared Deltas come back.
func TestRenderDeltaSharedKey(t *testing.T) {
	services := generated(4, 2, false).Services()
	r, err := NewRenderer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	render := func() *Delta {
		t.Helper()
		d, err := r.RenderDelta(client.NewSnapshot(services, nil), false)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	withExternal := func(i int, ip string) {
		se := *services[i]
		svc := *se.Service
		svc.ExternalIPs = client.IPs{V4: []netip.Addr{netip.MustParseAddr(ip)}}
		se.Service = &svc
		services = slices.Clone(services)
		services[i] = &se
	}
	render()
	withExternal(1, "192.0.2.1")
	if d := render(); d == nil || len(d.Elements) == 0 {
		t.Fatalf("an external IP added: Delta %+v", d)
	}
	// Service 3's ports are service 1's (generated): the same key.
	if services[1].Service.Ports[0].Port != services[3].Service.Ports[0].Port {
		t.Skip("generated services differ in ports")
	}
	withExternal(3, "192.0.2.1")
	if d := render(); d != nil {
		t.Fatalf("a key shared: Delta %+v, want nil", d)
	}
	withExternal(3, "192.0.2.3")
	if d := render(); d != nil {
		t.Fatalf("a key no longer shared: Delta %+v, want nil (it was shared before)", d)
	}
	withExternal(3, "192.0.2.4")
	if d := render(); d == nil {
		t.Fatal("no key shared: no Delta")
	}
}
