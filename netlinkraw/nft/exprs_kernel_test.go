package nft

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDumpedExprsKernel: the kernel dumps a rule's expressions as they
// were sent except for NLA_F_NESTED, which it does not set on the nests:
// NormalizeExprs of what was sent is what a dump returns.
// Expressions the kernel normalizes (counter values, lookup flags,
// anonymous set names) are not covered here.
func TestDumpedExprsKernel(t *testing.T) {
	c, _ := dial(t)
	tx := NewTx()
	writeTx(tx, false)
	tx.AddChain("", FamilyIPv4, "w", Chain{Name: "x"})
	sent := []Rule{
		{Chain: "svc", Exprs: verdictExpr(VerdictJump, "x")},
		{Chain: "svc", Exprs: cat(ipDaddrExpr(), verdictExpr(VerdictReturn, ""))},
		{Chain: "svc", Exprs: counterExpr()},
	}
	for _, r := range sent {
		tx.AddRule("", FamilyIPv4, "w", r)
	}
	if _, err := c.Commit(tx, nil); err != nil {
		t.Fatal(err)
	}
	got, err := c.Rules(FamilyIPv4, "w", "svc")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(sent) {
		t.Fatalf("%d rules, want %d", len(got), len(sent))
	}
	for i := range sent {
		if diff := cmp.Diff(NormalizeExprs(sent[i].Exprs), got[i].Exprs); diff != "" {
			t.Errorf("rule %d: dumped expressions (-sent without NLA_F_NESTED +dumped):\n%s", i, diff)
		}
	}
}
