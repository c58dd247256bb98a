package nftables

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// fakeProxier returns an IPv4 Proxier on kernel k whose render returns
// rsWith(*mut).
func fakeProxier(k kernel, mut *func(*ruleset.Ruleset)) *Proxier {
	return &Proxier{cfg: Config{IPv4: true}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), k: k,
		comp: &fakeCompiler{}, fams: []*family{{name: "ip", fam: nft.FamilyIPv4}},
		render: func(*client.Snapshot, bool) (*ruleset.Ruleset, error) {
			return rsWith(*mut), nil
		}}
}

func mustSync(t *testing.T, p *Proxier, resync bool) SyncStats {
	t.Helper()
	var st SyncStats
	var err error
	if resync {
		st, err = p.Resync()
	} else {
		st, err = p.Snapshot(&client.Snapshot{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// canonTable is a kernel table in a comparable form.
func canonTable(t *testing.T, kt *kernelTable) map[string]string {
	t.Helper()
	out := map[string]string{}
	for n, c := range kt.chains {
		var l []string
		for _, r := range c.rules {
			s, err := canonRule(r.Exprs, kt.resolve)
			if err != nil {
				t.Fatal(err)
			}
			l = append(l, s+string(r.UserData))
		}
		out["chain "+n] = strings.Join(l, "\n")
	}
	for n, s := range kt.sets {
		out["set "+n] = canonSet(&s.set, s.elems)
	}
	return out
}

func TestSync(t *testing.T) {
	k := newFakeKernel()
	var mut func(*ruleset.Ruleset)
	p := fakeProxier(k, &mut)
	st := mustSync(t, p, false)
	if st.Transactions != 1 || st.Reads != 1 || st.Rules != 5 || st.AddedElements != 4 {
		t.Fatalf("first sync: %+v", st)
	}
	if st := mustSync(t, p, true); st.Transactions != 0 || st.Reads != 0 {
		t.Errorf("resync of an unchanged kernel read or wrote: %+v", st)
	}
	mut = func(rs *ruleset.Ruleset) { rs.Chains[2].Rules[0].Text = "dnat to 10.0.0.3" }
	before := k.ops
	if st := mustSync(t, p, false); st.Transactions != 1 || st.Reads != 0 || st.FlushedChains != 1 || st.Rules != 2 || k.ops-before != 4 {
		t.Errorf("one endpoint changed: %+v, %d ops", st, k.ops-before)
	}

	// A restart: a new Proxier reads the table and writes nothing.
	p2 := fakeProxier(k, &mut)
	if st := mustSync(t, p2, false); st.Transactions != 0 || st.Reads != 1 || st.ForeignChanges != 0 {
		t.Errorf("restart: %+v", st)
	}
}

func TestSyncRepairsForeignChanges(t *testing.T) {
	k := newFakeKernel()
	var mut func(*ruleset.Ruleset)
	p := fakeProxier(k, &mut)
	mustSync(t, p, false)
	want := canonTable(t, k.tables[nft.FamilyIPv4])

	// Another writer deletes an element, changes an element's value,
	// rewrites a chain and adds a chain and an element.
	kt := k.tables[nft.FamilyIPv4]
	ips := kt.sets["service-ips"]
	ips.elems = ips.elems[:1]
	ips.elems[0].Data = []byte("goto service-B")
	kt.sets["cluster-ips"].elems = append(kt.sets["cluster-ips"].elems, nft.Elem{Key: []byte("10.96.0.99")})
	kt.chains["service-A"].rules[0].Exprs = encExpr("fake", appendAttr(nil, 1, []byte("drop")))
	kt.chains["stale"] = &kernelChain{chain: nft.Chain{Name: "stale"}, rules: []nft.Rule{{Exprs: encExpr("fake", nil)}}}
	k.gen += 5

	st := mustSync(t, p, true)
	if st.Reads != 1 || st.ForeignChanges != 1 || st.Transactions != 1 {
		t.Errorf("resync after a foreign writer: %+v", st)
	}
	if diff := cmp.Diff(want, canonTable(t, k.tables[nft.FamilyIPv4])); diff != "" {
		t.Errorf("table after the repair (-want +got):\n%s", diff)
	}
	if st := mustSync(t, p, true); st.Transactions != 0 || st.Reads != 0 {
		t.Errorf("resync after the repair: %+v", st)
	}
}

func TestSyncRefusedTransaction(t *testing.T) {
	k := newFakeKernel()
	var mut func(*ruleset.Ruleset)
	p := fakeProxier(k, &mut)
	mustSync(t, p, false)
	want := canonTable(t, k.tables[nft.FamilyIPv4])
	gen := k.gen
	mut = func(rs *ruleset.Ruleset) {
		rs.Chains = append(rs.Chains, ruleset.Chain{Name: "service-C", Rules: []ruleset.Rule{{Text: "dnat to 10.0.0.9"}}})
	}
	k.refuse = "rule 1 of chain service-C (dnat to 10.0.0.9)"
	st, err := p.Snapshot(&client.Snapshot{})
	if err == nil || !strings.Contains(err.Error(), k.refuse) || !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("refused transaction: error %v", err)
	}
	if st.Failures != 1 || k.gen != gen {
		t.Errorf("refused transaction: %+v, generation %d -> %d", st, gen, k.gen)
	}
	if diff := cmp.Diff(want, canonTable(t, k.tables[nft.FamilyIPv4])); diff != "" {
		t.Errorf("table after a refused transaction (-want +got):\n%s", diff)
	}
	k.refuse = ""
	if st := mustSync(t, p, true); st.Transactions != 1 || st.Chains != 1 || st.Reads != 0 {
		t.Errorf("retry: %+v", st)
	}
}

func TestSyncStaleGeneration(t *testing.T) {
	k := newFakeKernel()
	var mut func(*ruleset.Ruleset)
	p := fakeProxier(k, &mut)
	mustSync(t, p, false)
	mut = func(rs *ruleset.Ruleset) { rs.Chains[1].Rules[0].Text = "dnat to 10.0.0.7" }
	// Another writer commits between the sync's generation read and its
	// commit: the commit is refused, the table read and the commit made
	// again.
	k.before = func() { k.gen++; k.before = nil }
	st := mustSync(t, p, false)
	if st.Failures != 1 || st.Reads != 1 || st.Transactions != 1 || st.ForeignChanges != 0 {
		t.Errorf("stale generation: %+v", st)
	}
	if st := mustSync(t, p, true); st.Transactions != 0 || st.Reads != 0 {
		t.Errorf("resync after the retry: %+v", st)
	}
}
