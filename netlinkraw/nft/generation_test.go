package nft

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// TestGenerationKernel: every commit that changes something moves the
// generation by one and Commit returns the new one (whether its first
// operation asks for the kernel's notifications, a flush first has a
// no-op message do it, or after a DelTable the generation is read
// afterwards); a commit that changes nothing leaves it; a commit
// against an older generation (another writer committed) is refused as
// such and applies nothing.
func TestGenerationKernel(t *testing.T) {
	c, ns := dial(t)
	gen, err := c.Generation()
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		build func(tx *Tx)
		gen   func() *uint32 // nil: no check
		delta uint32
	}{
		{"create the table", func(tx *Tx) { writeTx(tx, true) }, nil, 1},
		{"a flush first, checked", func(tx *Tx) {
			tx.FlushChain("", FamilyIPv4, "w", "svc")
			tx.AddRule("", FamilyIPv4, "w", Rule{Chain: "svc", Exprs: verdictExpr(VerdictAccept, "")})
		}, func() *uint32 { return &gen }, 1},
		{"an empty chain flushed first, checked", func(tx *Tx) {
			tx.AddChain("", FamilyIPv4, "w", Chain{Name: "empty"})
		}, nil, 1},
		{"nothing changed, a flush first, checked", func(tx *Tx) {
			tx.FlushChain("", FamilyIPv4, "w", "empty")
			tx.FlushChain("", FamilyIPv4, "w", "empty")
		}, func() *uint32 { return &gen }, 0},
		{"a set flushed first, checked", func(tx *Tx) {
			tx.FlushSet("", FamilyIPv4, "w", "vm")
		}, func() *uint32 { return &gen }, 1},
		{"an element added, checked", func(tx *Tx) {
			tx.AddElems("", FamilyIPv4, "w", Set{Name: "s4"}, []Elem{{Key: addr("10.9.9.9")}})
		}, func() *uint32 { return &gen }, 1},
		{"nothing changed, checked", func(tx *Tx) { tx.AddTable("", Table{Family: FamilyIPv4, Name: "w"}) }, func() *uint32 { return &gen }, 0},
		{"nothing changed", func(tx *Tx) { tx.AddTable("", Table{Family: FamilyIPv4, Name: "w"}) }, nil, 0},
		{"empty, checked", func(tx *Tx) {}, func() *uint32 { return &gen }, 0},
		{"a table deleted first", func(tx *Tx) {
			tx.DelTable("", FamilyIPv4, "w")
			tx.AddTable("", Table{Family: FamilyIPv4, Name: "w2"})
		}, nil, 1},
	}
	for _, s := range steps {
		tx := NewTx()
		s.build(tx)
		var want *uint32
		if s.gen != nil {
			want = s.gen()
		}
		got, err := c.Commit(tx, want)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		now, err := c.Generation()
		if err != nil {
			t.Fatal(err)
		}
		if got != now || now != gen+s.delta {
			t.Errorf("%s: Commit returned generation %d, the kernel has %d, want %d", s.name, got, now, gen+s.delta)
		}
		gen = now
	}

	// Another writer commits: a commit against the generation before is
	// refused, whole.
	before := listTable(t, ns, "ip", "w2")
	ns.MustRun(t, "nft", "add", "chain", "ip", "w2", "theirs")
	stale := gen
	tx := NewTx()
	tx.AddChain("ours", FamilyIPv4, "w2", Chain{Name: "ours"})
	_, err = c.Commit(tx, &stale)
	var ce *CommitError
	if !errors.Is(err, ErrGenerationChanged) || !errors.As(err, &ce) || len(ce.Failed) != 0 || !errors.Is(err, unix.ERESTART) {
		t.Fatalf("commit against generation %d after another writer's: %v, want ErrGenerationChanged", stale, err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("generation %d", stale)) {
		t.Errorf("error %q does not name the generation", err)
	}
	after := listTable(t, ns, "ip", "w2")
	if strings.Contains(after, "ours") || !strings.Contains(after, "theirs") || before == after {
		t.Errorf("after the refused commit, nft lists:\n%s", after)
	}
	if now, _ := c.Generation(); now != stale+1 {
		t.Errorf("generation %d after another writer's commit and a refused one, want %d", now, stale+1)
	}
	// Empty, against the old generation: refused too.
	if _, err := c.Commit(NewTx(), &stale); !errors.Is(err, ErrGenerationChanged) {
		t.Errorf("empty commit against an old generation: %v, want ErrGenerationChanged", err)
	}
	if g, err := ReadGeneration(ns.FD()); err != nil || g != stale+1 {
		t.Errorf("ReadGeneration: %d, %v, want %d", g, err, stale+1)
	}
}

// TestRefusedKernel: a transaction with refused operations applies
// nothing, and its error names each refused operation by its label and
// index, once even when it took several messages, with the kernel's
// errno.
func TestRefusedKernel(t *testing.T) {
	c, ns := dial(t)
	gen, err := c.Generation()
	if err != nil {
		t.Fatal(err)
	}
	many := make([]Elem, 10000) // several messages
	for i := range many {
		many[i] = Elem{Key: []byte{10, 0, byte(i >> 8), byte(i)}}
	}
	tx := NewTx()
	tx.AddTable("", Table{Family: FamilyIPv4, Name: "r"})
	tx.AddChain("chain a", FamilyIPv4, "r", Chain{Name: "a"})
	tx.AddRule("rule in a missing chain", FamilyIPv4, "r", Rule{Chain: "nope", Exprs: verdictExpr(VerdictAccept, "")})
	tx.AddChain("chain b", FamilyIPv4, "r", Chain{Name: "b"})
	tx.AddElems("elements of a missing set", FamilyIPv4, "r", Set{Name: "nope"}, many)
	tx.AddRule("jump to a missing chain", FamilyIPv4, "r", Rule{Chain: "a", Exprs: verdictExpr(VerdictJump, "nope")})
	if tx.Messages() <= tx.Len() {
		t.Fatalf("%d messages for %d operations: the elements should take several", tx.Messages(), tx.Len())
	}
	_, err = c.Commit(tx, &gen)
	var ce *CommitError
	if !errors.As(err, &ce) || !errors.Is(err, unix.ENOENT) {
		t.Fatalf("commit: %v, want a CommitError matching ENOENT", err)
	}
	type failure struct {
		Index     int
		Op, Label string
		Errno     unix.Errno
	}
	var got []failure
	for _, f := range ce.Failed {
		var errno unix.Errno
		errors.As(f.Err, &errno)
		got = append(got, failure{f.Index, f.Op, f.Label, errno})
	}
	want := []failure{
		{2, "add rule", "rule in a missing chain", unix.ENOENT},
		{4, "add elements to", "elements of a missing set", unix.ENOENT},
		{5, "add rule", "jump to a missing chain", unix.ENOENT},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refused operations (-want +got):\n%s", diff)
	}
	if ce.Batch != nil || errors.Is(err, ErrGenerationChanged) {
		t.Errorf("batch error %v, want none", ce.Batch)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w.Op+" "+w.Label+": ") {
			t.Errorf("error %q does not name %s %s", err, w.Op, w.Label)
		}
	}
	if out := strings.TrimSpace(ns.MustRun(t, "nft", "list", "ruleset")); out != "" {
		t.Errorf("the refused transaction left:\n%s", out)
	}
	if now, _ := c.Generation(); now != gen {
		t.Errorf("generation %d after a refused commit, want %d", now, gen)
	}

	// A flush first in a missing table: its no-op first message (see
	// Tx.probe) creates the table, the flush fails, nothing stays.
	tx = NewTx()
	tx.FlushChain("", FamilyIPv4, "ghost", "c")
	_, err = c.Commit(tx, &gen)
	if !errors.As(err, &ce) || len(ce.Failed) != 1 || ce.Failed[0].Index != 0 || !errors.Is(err, unix.ENOENT) {
		t.Errorf("flushing a chain of a missing table: %v, want ENOENT for operation 0", err)
	}
	if out := strings.TrimSpace(ns.MustRun(t, "nft", "list", "ruleset")); out != "" {
		t.Errorf("the refused flush left:\n%s", out)
	}
}

// TestCommitErrorMapping: kernel errors at message indexes map to their
// operations (an operation of several messages once), and ERESTART on the
// batch with a generation given is ErrGenerationChanged.
func TestCommitErrorMapping(t *testing.T) {
	tx := NewTx()
	tx.AddTable("t", Table{Family: FamilyIPv4, Name: "t"})
	big := make([]Elem, 6000)
	for i := range big {
		big[i] = Elem{Key: []byte{1, 2, byte(i >> 8), byte(i)}}
	}
	tx.AddElems("", FamilyIPv4, "t", Set{Name: "s"}, big)
	tx.DelChain("", FamilyIPv6, "t", "c")
	n := tx.Messages()
	if n < 4 {
		t.Fatalf("%d messages, want the elements split", n)
	}
	errs := make([]error, n)
	errs[1], errs[2], errs[n-1] = unix.ENOENT, unix.ENOENT, unix.EBUSY
	err := tx.commitError(&nlcore.TransactionError{Errors: errs, Failed: 3}, nil)
	want := "nft: commit of 3 operations refused, nothing applied; add elements to ip t s: no such file or directory; delete chain ip6 t c: device or resource busy"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	gen := uint32(7)
	err = tx.commitError(&nlcore.TransactionError{Errors: make([]error, n), Batch: unix.ERESTART}, &gen)
	if !errors.Is(err, ErrGenerationChanged) {
		t.Errorf("ERESTART on the batch: %v, want ErrGenerationChanged", err)
	}
	if err := tx.commitError(&nlcore.TransactionError{Errors: make([]error, n), Batch: unix.ERESTART}, nil); errors.Is(err, ErrGenerationChanged) {
		t.Errorf("ERESTART without a generation given: %v, not ErrGenerationChanged", err)
	}
	if err := tx.commitError(unix.ENOBUFS, nil); !errors.Is(err, unix.ENOBUFS) || !strings.Contains(err.Error(), "commit of 3 operations") {
		t.Errorf("transport error: %v", err)
	}
}

// TestRefusedElementKernel: the kernel names the element it refused (an
// extended ACK's attribute offset), and the error names it by its index
// in the operation's elements, in whichever of the operation's messages
// it was.
func TestRefusedElementKernel(t *testing.T) {
	c, ns := dial(t)
	tx := NewTx()
	writeTx(tx, false)
	if _, err := c.Commit(tx, nil); err != nil {
		t.Fatal(err)
	}
	before := listTable(t, ns, "ip", "w")
	many := make([]Elem, 10000)
	for i := range many {
		many[i] = Elem{Key: []byte{10, 1, byte(i >> 8), byte(i)}}
	}
	many[7777].Key = []byte{10, 1, 2} // the wrong length
	tx = NewTx()
	tx.AddElems("s4 elements", FamilyIPv4, "w", Set{Name: "s4"}, many)
	tx.AddElems("vm elements", FamilyIPv4, "w", Set{Name: "vm"}, []Elem{
		{Key: key(addr("10.0.0.9"), []byte{unix.IPPROTO_TCP}, be16(80)), Verdict: &Verdict{Code: VerdictJump, Chain: "svc"}},
		{Key: key(addr("10.0.0.9"), []byte{unix.IPPROTO_TCP}, be16(81)), Verdict: &Verdict{Code: VerdictJump, Chain: "nope"}},
	})
	tx.DelElems("s4 deletions", FamilyIPv4, "w", "s4", []Elem{{Key: addr("10.0.0.1")}, {Key: addr("10.0.0.2")}, {Key: addr("10.0.0.77")}})
	_, err := c.Commit(tx, nil)
	var ce *CommitError
	if !errors.As(err, &ce) {
		t.Fatalf("commit: %v, want a CommitError", err)
	}
	type failure struct {
		Index int
		Label string
		Elem  int
		Errno unix.Errno
	}
	var got []failure
	for _, f := range ce.Failed {
		var errno unix.Errno
		errors.As(f.Err, &errno)
		got = append(got, failure{f.Index, f.Label, f.Elem, errno})
	}
	want := []failure{
		{0, "s4 elements", 7777, unix.EINVAL},
		{1, "vm elements", 1, unix.ENOENT},
		{2, "s4 deletions", 2, unix.ENOENT},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refused elements (-want +got):\n%s", diff)
	}
	if !strings.Contains(err.Error(), "add elements to s4 elements: element 7777: invalid argument") {
		t.Errorf("error %q does not name element 7777", err)
	}
	if after := listTable(t, ns, "ip", "w"); after != before {
		t.Errorf("the refused transaction changed the table:\n%s", after)
	}
}
