package nftables

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// fakeCompiler compiles text into bytes that are the text, counting what
// it compiles.
type fakeCompiler struct {
	rules, elems int
	fail         string // a rule text it refuses
}

func (f *fakeCompiler) table(*ruleset.Ruleset) (tableCompiler, error) { return fakeTable{f}, nil }

func (f *fakeCompiler) chain(c *ruleset.Chain) (nft.Chain, error) {
	return nft.Chain{Name: c.Name, Type: c.Type, HasHook: c.Hook != "", UserData: []byte(c.Comment)}, nil
}

func (f *fakeCompiler) set(s *ruleset.Set) (nft.Set, error) {
	return nft.Set{Name: s.Name, UserData: []byte(s.Type + s.Comment)}, nil
}

func (f *fakeCompiler) elem(s *ruleset.Set, e *ruleset.Element) (nft.Elem, error) {
	f.elems++
	return nft.Elem{Key: []byte(e.Key), Data: []byte(e.Value), UserData: []byte(e.Comment)}, nil
}

func (f *fakeCompiler) rule(chain string, r *ruleset.Rule, newID func() uint32) (compiledRule, error) {
	if r.Text == f.fail {
		return compiledRule{}, fmt.Errorf("unknown token %q", r.Text)
	}
	f.rules++
	return compiledRule{rule: nft.Rule{Chain: chain, Exprs: encExpr("fake", appendAttr(nil, 1, []byte(r.Text))), UserData: []byte(r.Comment)}}, nil
}

// fakeTable makes the fake compiler a tableCompiler for a given table.
type fakeTable struct{ *fakeCompiler }

func (f fakeTable) table() (nft.Table, error) { return nft.Table{Name: "kube-proxy"}, nil }

// summary lists a transaction's operations in order, one line each.
func summary(ops []op) []string {
	var out []string
	for _, o := range ops {
		s := o.kind.String()
		switch o.kind {
		case opAddRule:
			s += " " + o.name + ": " + fakeText(o.rule.rule.Exprs)
		case opAddElems, opDelElems:
			var keys []string
			for _, e := range o.elems {
				keys = append(keys, string(e.Key))
			}
			s += " " + o.name + ": " + strings.Join(keys, ", ")
		case opAddChain:
			s += " " + o.chain.Name
		case opAddSet:
			s += " " + o.set.Name
		case opAddTable, opDelTable:
		default:
			s += " " + o.name
		}
		out = append(out, s)
	}
	return out
}

// fakeText returns the text of a rule the fake compiler compiled.
func fakeText(exprs []byte) string {
	list, _ := parseAttrs(exprs)
	parts, _ := parseAttrs(list[0].data)
	data, _ := parseAttrs(parts[1].data)
	return string(data[0].data)
}

func rsWith(mut func(rs *ruleset.Ruleset)) *ruleset.Ruleset {
	rs := &ruleset.Ruleset{Family: "ip", Table: "kube-proxy", Comment: "rules for kube-proxy",
		Chains: []ruleset.Chain{
			{Name: "nat-prerouting", Type: "nat", Hook: "prerouting", Priority: "dstnat", Rules: []ruleset.Rule{{Text: "jump services"}}},
			{Name: "service-A", Rules: []ruleset.Rule{{Text: "dnat to 10.0.0.1", Comment: "a"}}},
			{Name: "service-B", Rules: []ruleset.Rule{{Text: "dnat to 10.0.0.2"}, {Text: "counter"}}},
			{Name: "services", Rules: []ruleset.Rule{{Text: "ip daddr . meta l4proto . th dport vmap @service-ips"}}},
		},
		Sets: []ruleset.Set{
			{Name: "cluster-ips", Type: "ipv4_addr", Elements: []ruleset.Element{{Key: "10.96.0.1"}, {Key: "10.96.0.2"}}},
			{Name: "service-ips", Type: "ipv4_addr . inet_proto . inet_service : verdict", Map: true, Elements: []ruleset.Element{
				{Key: "10.96.0.1 . tcp . 80", Value: "goto service-A"}, {Key: "10.96.0.2 . tcp . 80", Value: "goto service-B"}}},
		},
	}
	if mut != nil {
		mut(rs)
	}
	return rs
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mut       func(rs *ruleset.Ruleset)
		want      []string
		rules     int // rules compiled by the second plan
		elems     int // elements compiled by the second plan
		wantError string
	}{
		{name: "unchanged"},
		{
			name: "one endpoint changed",
			mut:  func(rs *ruleset.Ruleset) { rs.Chains[2].Rules[0].Text = "dnat to 10.0.0.3" },
			want: []string{"add table", "flush chain service-B", "add rule service-B: dnat to 10.0.0.3", "add rule service-B: counter"},
			// the unchanged second rule keeps its compiled form
			rules: 1,
		},
		{
			name: "service removed",
			mut: func(rs *ruleset.Ruleset) {
				rs.Chains = append(rs.Chains[:2], rs.Chains[3:]...)
				rs.Sets[0].Elements = rs.Sets[0].Elements[:1]
				rs.Sets[1].Elements = rs.Sets[1].Elements[:1]
			},
			want: []string{"add table", "delete elements cluster-ips: 10.96.0.2", "delete elements service-ips: 10.96.0.2 . tcp . 80",
				"flush chain service-B", "delete chain service-B"},
		},
		{
			name: "service added",
			mut: func(rs *ruleset.Ruleset) {
				rs.Chains = append(rs.Chains, ruleset.Chain{Name: "service-C", Rules: []ruleset.Rule{{Text: "dnat to 10.0.0.9"}}})
				rs.Sets[1].Elements = append(rs.Sets[1].Elements, ruleset.Element{Key: "10.96.0.3 . tcp . 80", Value: "goto service-C"})
			},
			want: []string{"add table", "add chain service-C", "add elements service-ips: 10.96.0.3 . tcp . 80", "add rule service-C: dnat to 10.0.0.9"},
			// unsorted input is sorted (service-C after services)
			rules: 1, elems: 1,
		},
		{
			name:  "element value changed",
			mut:   func(rs *ruleset.Ruleset) { rs.Sets[1].Elements[0].Value = "goto service-B" },
			want:  []string{"add table", "delete elements service-ips: 10.96.0.1 . tcp . 80", "add elements service-ips: 10.96.0.1 . tcp . 80"},
			elems: 1,
		},
		{
			name: "set removed after its references",
			mut: func(rs *ruleset.Ruleset) {
				rs.Sets = rs.Sets[:1]
				rs.Chains[3].Rules = nil
			},
			want: []string{"add table", "flush chain services", "delete set service-ips"},
		},
		{
			name: "set definition changed replaces the table",
			mut:  func(rs *ruleset.Ruleset) { rs.Sets[0].Comment = "Active ClusterIPs" },
			want: []string{"delete table", "add table", "add set cluster-ips", "add set service-ips",
				"add chain nat-prerouting", "add chain service-A", "add chain service-B", "add chain services",
				"add elements cluster-ips: 10.96.0.1, 10.96.0.2",
				"add elements service-ips: 10.96.0.1 . tcp . 80, 10.96.0.2 . tcp . 80",
				"add rule nat-prerouting: jump services", "add rule service-A: dnat to 10.0.0.1",
				"add rule service-B: dnat to 10.0.0.2", "add rule service-B: counter",
				"add rule services: ip daddr . meta l4proto . th dport vmap @service-ips"},
			rules: 5, elems: 4,
		},
		{
			name:      "compile error names the rule",
			mut:       func(rs *ruleset.Ruleset) { rs.Chains[1].Rules[0].Text = "bogus" },
			wantError: `compile rule 1 of chain service-A ("bogus"): unknown token "bogus"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := &fakeCompiler{fail: "bogus"}
			id := uint32(0)
			newID := func() uint32 { id++; return id }
			ops, cur, err := plan(&applied{}, rsWith(nil), fakeTable{fc}, newID)
			if err != nil {
				t.Fatal(err)
			}
			if ops[0].kind != opAddTable || len(ops) != 14 {
				t.Fatalf("first plan: %q", summary(ops))
			}
			fc.rules, fc.elems = 0, 0
			ops, _, err = plan(&cur, rsWith(tc.mut), fakeTable{fc}, newID)
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) {
					t.Fatalf("error %v, want %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summary(ops)); diff != "" {
				t.Errorf("ops (-want +got):\n%s", diff)
			}
			if fc.rules != tc.rules || fc.elems != tc.elems {
				t.Errorf("compiled %d rules and %d elements, want %d and %d", fc.rules, fc.elems, tc.rules, tc.elems)
			}
		})
	}
}

// TestPlanConverges checks that the state a plan returns is the ruleset:
// planning the same ruleset again writes nothing.
func TestPlanConverges(t *testing.T) {
	fc := &fakeCompiler{}
	newID := func() uint32 { return 0 }
	var cur applied
	for i, mut := range []func(*ruleset.Ruleset){nil,
		func(rs *ruleset.Ruleset) { rs.Sets[1].Elements[0].Value = "goto service-B" },
		func(rs *ruleset.Ruleset) { rs.Chains = rs.Chains[:1] },
		func(rs *ruleset.Ruleset) { rs.Comment = "other" },
		nil,
	} {
		rs := rsWith(mut)
		_, next, err := plan(&cur, rs, fakeTable{fc}, newID)
		if err != nil {
			t.Fatal(err)
		}
		ops, _, err := plan(&next, rsWith(mut), fakeTable{fc}, newID)
		if err != nil || len(ops) != 0 {
			t.Fatalf("step %d: planning the same ruleset again: %q, %v", i, summary(ops), err)
		}
		cur = next
	}
}

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		release string
		want    bool
	}{{"6.18.0-1-amd64", true}, {"5.13.0", true}, {"5.12.19", false}, {"4.19.0", false}, {"5.15", true}, {"10.0", true}} {
		if got := versionAtLeast(tc.release, MinKernel); got != tc.want {
			t.Errorf("versionAtLeast(%q, %q) = %v, want %v", tc.release, MinKernel, got, tc.want)
		}
	}
}

// TestFirstSteps checks the steps of a first write: all chains and sets
// first, empty; then the regular chains' rules, n chains at a time; the
// base chains' rules and the elements only in the ruleset itself.
func TestFirstSteps(t *testing.T) {
	rs := rsWith(nil) // one base chain, three regular chains
	if got := firstSteps(rs, 3); got != nil {
		t.Errorf("3 regular chains in steps of 3: %d steps, want none", len(got))
	}
	steps := firstSteps(rs, 2)
	var got []string
	for _, s := range steps {
		var l []string
		for _, c := range s.Chains {
			l = append(l, fmt.Sprintf("%s:%d", c.Name, len(c.Rules)))
		}
		for _, x := range s.Sets {
			l = append(l, fmt.Sprintf("%s:%d", x.Name, len(x.Elements)))
		}
		got = append(got, strings.Join(l, " "))
	}
	want := []string{
		"nat-prerouting:0 service-A:0 service-B:0 services:0 cluster-ips:0 service-ips:0",
		"nat-prerouting:0 service-A:1 service-B:2 services:0 cluster-ips:0 service-ips:0",
		"nat-prerouting:0 service-A:1 service-B:2 services:1 cluster-ips:0 service-ips:0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
}

// TestSyncFirstWriteInSteps: a first write in steps ends with the same
// table as one transaction, and the next sync writes nothing.
func TestSyncFirstWriteInSteps(t *testing.T) {
	var mut func(*ruleset.Ruleset)
	one := newFakeKernel()
	p1 := fakeProxier(one, &mut)
	p1.cfg.ChunkChains = -1
	mustSync(t, p1, false)
	steps := newFakeKernel()
	p2 := fakeProxier(steps, &mut)
	p2.cfg.ChunkChains = 2
	if st := mustSync(t, p2, false); st.Transactions != 4 {
		t.Errorf("first write in steps of 2 chains: %+v", st)
	}
	if diff := cmp.Diff(canonTable(t, one.tables[nft.FamilyIPv4]), canonTable(t, steps.tables[nft.FamilyIPv4])); diff != "" {
		t.Errorf("table written in steps (-one transaction +steps):\n%s", diff)
	}
	if st := mustSync(t, p2, true); st.Transactions != 0 {
		t.Errorf("resync after a write in steps: %+v", st)
	}
}
