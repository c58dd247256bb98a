package nftexpr

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// TestKernelRoundTrip writes a kube-proxy-shaped table twice, each into a
// fresh namespace: once with `nft -f`, once compiled here and committed
// through netlinkraw/nft in one transaction (named sets referred to by
// name, anonymous ones by the transaction's IDs). `nft list ruleset` must
// print the same text for both: the kernel holds the same objects, and
// nft reads the same USERDATA back (set key types, comments). The same
// holds with anonymous sets named by the compiler (NameAnonymous).
func TestKernelRoundTrip(t *testing.T) {
	nftPath := nstest.LookPath(t, "nft")
	for _, tc := range []struct {
		name, anon string
		family     nft.Family
	}{{"ip", "", nft.FamilyIPv4}, {"ip6", "", nft.FamilyIPv6}, {"ip-named-anonymous", "p", nft.FamilyIPv4}, {"ip6-named-anonymous", "p", nft.FamilyIPv6}} {
		t.Run(tc.name, func(t *testing.T) {
			st := kubeShaped(tc.family, 12, 3)
			want := listRuleset(t, nftPath, func(ns *nstest.NetNS) error {
				// nft runs inside the namespace (never the host's).
				return ns.Do(func() error {
					cmd := exec.Command(nftPath, "-f", "-")
					cmd.Stdin = strings.NewReader(st.script())
					if out, err := cmd.CombinedOutput(); err != nil {
						return fmt.Errorf("nft -f: %w: %s", err, out)
					}
					return nil
				})
			})
			got := listRuleset(t, nftPath, func(ns *nstest.NetNS) error {
				c, err := nft.Dial(&nft.Config{NetNS: ns.FD()})
				if err != nil {
					return err
				}
				defer c.Close()
				_, err = c.Commit(buildTx(t, st, tc.anon), nil)
				return err
			})
			if diff := cmp.Diff(strings.Split(want, "\n"), strings.Split(got, "\n")); diff != "" {
				t.Errorf("nft list ruleset (-written by nft +written from the compiler's objects):\n%s", diff)
			}
		})
	}
}

// listRuleset runs write in a fresh namespace and returns `nft list
// ruleset` there.
func listRuleset(t *testing.T, nftPath string, write func(*nstest.NetNS) error) string {
	t.Helper()
	ns := nstest.New(t)
	if err := write(ns); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := ns.Do(func() error {
		cmd := exec.Command(nftPath, "list", "ruleset")
		cmd.Stdout, cmd.Stderr = &out, &out
		return cmd.Run()
	})
	if err != nil {
		t.Fatalf("nft list ruleset: %v: %s", err, out.String())
	}
	return out.String()
}

// buildTx compiles st into one transaction, in the order nft sends it.
func buildTx(t *testing.T, st *scriptTable, anonPrefix string) *nft.Tx {
	t.Helper()
	tx := nft.NewTx()
	tab, err := NewTable(st.family)
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.NameAnonymous(anonPrefix); err != nil {
		t.Fatal(err)
	}
	to, err := TableObject(st.family, st.name, st.comment)
	if err != nil {
		t.Fatal(err)
	}
	tx.AddTable("", to)
	for _, c := range st.chains {
		ch, err := Chain(c.name, c.typ, c.hook, c.prio, c.comment)
		if err != nil {
			t.Fatal(err)
		}
		tx.AddChain("", st.family, st.name, ch)
	}
	for _, d := range st.sets {
		s, err := tab.AddSet(d, 0)
		if err != nil {
			t.Fatal(err)
		}
		tx.AddSet("", st.family, st.name, s)
	}
	for _, r := range st.rules {
		cr, err := tab.Rule(r.chain, r.text, r.comment, tx.NewSetID)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range cr.Sets {
			tx.AddSet("", st.family, st.name, s.Set)
			tx.AddElems("", st.family, st.name, s.Set, s.Elems)
		}
		tx.AddRule("", st.family, st.name, cr.Rule)
	}
	for _, e := range st.elems {
		el, err := tab.Elem(e.set, e.key, e.value, e.comment)
		if err != nil {
			t.Fatal(err)
		}
		tx.AddElems("", st.family, st.name, nft.Set{Name: e.set}, []nft.Elem{el})
	}
	return tx
}
