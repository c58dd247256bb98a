package nft

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// The concatenation ipv4_addr . inet_proto . inet_service: nft's type id
// (each type 6 bits) and its key length (each field in a 4-byte register).
const (
	concatType = 7<<12 | 12<<6 | 13
	concatLen  = 12
)

// writeTx builds the test table with this package: the same objects as
// dumpScript (without the table comment) and, with rules, rules with
// hand-encoded expressions and the anonymous map created in the
// transaction.
func writeTx(tx *Tx, rules bool) {
	const fam, table = FamilyIPv4, "w"
	tx.AddTable("", Table{Family: fam, Name: table})
	tx.AddSet("set s4", fam, table, Set{Name: "s4", KeyType: 7, KeyLen: 4})
	tx.AddElems("", fam, table, Set{Name: "s4"}, []Elem{{Key: addr("10.0.0.1")}, {Key: addr("10.0.0.2")}})
	tx.AddChain("", fam, table, Chain{Name: "svc"})
	tx.AddChain("", fam, table, Chain{Name: "pre", Type: "nat", HasHook: true, Hook: HookPrerouting, Priority: -100, Policy: 1})
	tx.AddSet("map vm", fam, table, Set{Name: "vm", Flags: SetMap, KeyType: concatType, KeyLen: concatLen, DataType: DataVerdict})
	tx.AddElems("", fam, table, Set{Name: "vm"}, []Elem{
		{Key: key(addr("10.0.0.1"), []byte{unix.IPPROTO_TCP}, be16(80)), Verdict: &Verdict{Code: VerdictJump, Chain: "svc"}},
	})
	if !rules {
		return
	}
	tx.AddRule("svc rule", fam, table, Rule{Chain: "svc", Exprs: cat(counterExpr(), verdictExpr(VerdictAccept, ""))})
	anon := Set{Name: "__map%d", ID: tx.NewSetID(), Flags: SetAnonymous | SetConstant | SetMap, KeyType: 7, KeyLen: 4, DataType: DataVerdict, Size: 2}
	tx.AddSet("anonymous map", fam, table, anon)
	tx.AddElems("anonymous map elements", fam, table, anon, []Elem{
		{Key: addr("10.0.0.3"), Verdict: &Verdict{Code: VerdictAccept}},
		{Key: addr("10.0.0.4"), Verdict: &Verdict{Code: VerdictDrop}},
	})
	tx.AddRule("pre vmap rule", fam, table, Rule{Chain: "pre", Exprs: cat(ipDaddrExpr(), vmapExpr(anon.Name, anon.ID))})
	tx.AddRule("pre jump rule", fam, table, Rule{Chain: "pre", Exprs: verdictExpr(VerdictJump, "svc")})
}

// listTable is `nft list table`, trimmed.
func listTable(t *testing.T, ns *nstest.NetNS, fam, name string) string {
	t.Helper()
	nstest.LookPath(t, "nft")
	return trimLines(ns.MustRun(t, "nft", "list", "table", fam, name))
}

// TestWriteKernel: what this package writes, nft lists as the text that
// describes it: base and regular chains, a set, a concatenated verdict
// map with its element, rules (counter, verdicts, jump), and an anonymous
// verdict map created in the same transaction and referred to by ID.
func TestWriteKernel(t *testing.T) {
	c, ns := dial(t)
	tx := NewTx()
	writeTx(tx, true)
	if _, err := c.Commit(tx, nil); err != nil {
		t.Fatal(err)
	}
	want := trimLines(`
table ip w {
	set s4 {
		type ipv4_addr
		elements = { 10.0.0.1, 10.0.0.2 }
	}

	map vm {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.0.0.1 . tcp . 80 : jump svc }
	}

	chain svc {
		counter packets 0 bytes 0 accept
	}

	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr vmap { 10.0.0.3 : accept, 10.0.0.4 : drop }
		jump svc
	}
}`)
	if diff := cmp.Diff(want, listTable(t, ns, "ip", "w")); diff != "" {
		t.Errorf("nft list table ip w (-want +got):\n%s", diff)
	}

	// Adding the same objects again changes nothing (nft's "add").
	tx = NewTx()
	writeTx(tx, false)
	if _, err := c.Commit(tx, nil); err != nil {
		t.Fatalf("adding the same objects again: %v", err)
	}
	if diff := cmp.Diff(want, listTable(t, ns, "ip", "w")); diff != "" {
		t.Errorf("after adding the same objects again (-want +got):\n%s", diff)
	}
}

// TestDeleteKernel: deleting an element and a rule by its handle,
// flushing a chain and a set, deleting chains, sets and the table, each
// checked with nft list.
func TestDeleteKernel(t *testing.T) {
	c, ns := dial(t)
	tx := NewTx()
	writeTx(tx, true)
	tx.AddRule("second svc rule", FamilyIPv4, "w", Rule{Chain: "svc", Exprs: verdictExpr(VerdictReturn, "")})
	if _, err := c.Commit(tx, nil); err != nil {
		t.Fatal(err)
	}
	rules, err := c.Rules(FamilyIPv4, "w", "svc")
	if err != nil || len(rules) != 2 {
		t.Fatalf("rules of svc: %v, %v", rules, err)
	}
	commit := func(build func(tx *Tx)) {
		t.Helper()
		tx := NewTx()
		build(tx)
		if _, err := c.Commit(tx, nil); err != nil {
			t.Fatal(err)
		}
	}
	commit(func(tx *Tx) {
		tx.DelElems("", FamilyIPv4, "w", "s4", []Elem{{Key: addr("10.0.0.1")}})
		tx.DelElems("", FamilyIPv4, "w", "vm", []Elem{{Key: key(addr("10.0.0.1"), []byte{unix.IPPROTO_TCP}, be16(80))}})
		tx.DelRule("", FamilyIPv4, "w", "svc", rules[0].Handle)
		tx.FlushChain("", FamilyIPv4, "w", "pre")
	})
	want := trimLines(`
table ip w {
	set s4 {
		type ipv4_addr
		elements = { 10.0.0.2 }
	}

	map vm {
		type ipv4_addr . inet_proto . inet_service : verdict
	}

	chain svc {
		return
	}

	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
	}
}`)
	if diff := cmp.Diff(want, listTable(t, ns, "ip", "w")); diff != "" {
		t.Errorf("after deleting an element, a rule, flushing a chain (-want +got):\n%s", diff)
	}
	commit(func(tx *Tx) {
		tx.FlushSet("", FamilyIPv4, "w", "s4")
		tx.FlushChain("", FamilyIPv4, "w", "svc")
		tx.DelChain("", FamilyIPv4, "w", "svc")
		tx.DelSet("", FamilyIPv4, "w", "vm")
	})
	want = trimLines(`
table ip w {
	set s4 {
		type ipv4_addr
	}

	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
	}
}`)
	if diff := cmp.Diff(want, listTable(t, ns, "ip", "w")); diff != "" {
		t.Errorf("after flushing a set, deleting a chain and a map (-want +got):\n%s", diff)
	}
	commit(func(tx *Tx) { tx.DelTable("", FamilyIPv4, "w") })
	if out := strings.TrimSpace(ns.MustRun(t, "nft", "list", "ruleset")); out != "" {
		t.Errorf("after deleting the table, nft lists:\n%s", out)
	}
	// Deleting what is not there is refused, naming it.
	tx = NewTx()
	tx.DelTable("", FamilyIPv4, "w")
	_, err = c.Commit(tx, nil)
	if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "delete table ip w: ") {
		t.Errorf("deleting a missing table: %v, want ENOENT naming it", err)
	}
}
