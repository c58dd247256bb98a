package nft

import (
	"errors"
	"net/netip"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"
)

// The test table, as nft writes it: a set, a concatenated verdict map, a
// regular chain and a base chain whose rules use the map and an anonymous
// map.
const dumpScript = `table ip t {
	comment "tbl"
	set s4 {
		type ipv4_addr
		elements = { 10.0.0.1, 10.0.0.2 }
	}
	map vm {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.0.0.1 . tcp . 80 : jump svc }
	}
	chain svc {
		counter accept
	}
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr . meta l4proto . th dport vmap @vm
		ip daddr vmap { 10.0.0.3 : accept, 10.0.0.4 : drop }
	}
}`

// addr returns an IPv4 address's bytes.
func addr(s string) []byte { a := netip.MustParseAddr(s).As4(); return a[:] }

// nftHandles returns the handles `nft -a list table` prints, by the line's
// first words ("chain svc", "set s4", or a rule's text up to " # handle").
func nftHandles(t *testing.T, out string) map[string]uint64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s*(.*?)\s*(?:\{ )?# handle (\d+)$`)
	m := map[string]uint64{}
	for _, g := range re.FindAllStringSubmatch(out, -1) {
		h, _ := strconv.ParseUint(g[2], 10, 64)
		m[g[1]] = h
	}
	return m
}

// TestDumpsKernel: a table nft wrote, read back by the dumps: every
// object with the fields nft's script gave it, the anonymous map among the
// sets, elements with their concatenated keys and verdicts, rules with
// their expressions, and the same handles `nft -a list` prints.
func TestDumpsKernel(t *testing.T) {
	c, ns := dial(t)
	nftScript(t, ns, dumpScript)
	handles := nftHandles(t, ns.MustRun(t, "nft", "-a", "list", "table", "ip", "t"))

	tables, err := c.Tables(0)
	if err != nil {
		t.Fatal(err)
	}
	wantTables := []Table{{Family: FamilyIPv4, Name: "t", UserData: []byte{0, 4, 't', 'b', 'l', 0}, Handle: handles["table ip t"]}}
	if diff := cmp.Diff(wantTables, tables); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}

	chains, err := c.Chains(FamilyIPv4, "t")
	if err != nil {
		t.Fatal(err)
	}
	wantChains := []Chain{
		{Name: "svc", Handle: handles["chain svc"]},
		{Name: "pre", Type: "nat", Hook: HookPrerouting, HasHook: true, Priority: -100, Policy: 1, Handle: handles["chain pre"]},
	}
	if diff := cmp.Diff(wantChains, chains); diff != "" {
		t.Errorf("chains (-want +got):\n%s", diff)
	}

	sets, err := c.Sets(FamilyIPv4, "t")
	if err != nil {
		t.Fatal(err)
	}
	// nft's user data (key byte order, typeof) is not checked here.
	wantSets := []Set{
		{Name: "s4", KeyType: 7, KeyLen: 4, Handle: handles["set s4"]},
		{Name: "vm", Flags: SetMap, KeyType: 7<<12 | 12<<6 | 13, KeyLen: 12, DataType: DataVerdict, DataLen: 16, Handle: handles["map vm"]},
		{Name: "__map0", Flags: SetAnonymous | SetConstant | SetMap, KeyType: 7, KeyLen: 4, DataType: DataVerdict, DataLen: 16, Size: 2},
	}
	if diff := cmp.Diff(wantSets, sets, cmpopts.IgnoreFields(Set{}, "UserData", "Handle"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("sets (-want +got):\n%s", diff)
	}
	for i := range min(len(sets), 2) {
		if sets[i].Handle != wantSets[i].Handle || len(sets[i].UserData) == 0 {
			t.Errorf("set %s: handle %d (nft: %d), user data %x", sets[i].Name, sets[i].Handle, wantSets[i].Handle, sets[i].UserData)
		}
	}

	sortElems := cmpopts.SortSlices(func(a, b Elem) bool { return string(a.Key) < string(b.Key) })
	for _, tc := range []struct {
		set  string
		want []Elem
	}{
		{"s4", []Elem{{Key: addr("10.0.0.1")}, {Key: addr("10.0.0.2")}}},
		{"vm", []Elem{{Key: key(addr("10.0.0.1"), []byte{unix.IPPROTO_TCP}, be16(80)), Verdict: &Verdict{Code: VerdictJump, Chain: "svc"}}}},
		{"__map0", []Elem{{Key: addr("10.0.0.3"), Verdict: &Verdict{Code: VerdictAccept}}, {Key: addr("10.0.0.4"), Verdict: &Verdict{Code: VerdictDrop}}}},
	} {
		got, err := c.Elems(FamilyIPv4, "t", tc.set)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got, sortElems); diff != "" {
			t.Errorf("elements of %s (-want +got):\n%s", tc.set, diff)
		}
	}

	rules, err := c.Rules(FamilyIPv4, "t", "")
	if err != nil {
		t.Fatal(err)
	}
	type ruleSummary struct {
		Chain  string
		Exprs  []string
		Handle uint64
	}
	var got []ruleSummary
	for _, r := range rules {
		got = append(got, ruleSummary{r.Chain, exprNames(t, r.Exprs), r.Handle})
	}
	want := []ruleSummary{
		{"svc", []string{"counter", "immediate"}, handles["counter packets 0 bytes 0 accept"]},
		{"pre", []string{"payload", "meta", "payload", "lookup"}, handles["ip daddr . meta l4proto . th dport vmap @vm"]},
		{"pre", []string{"payload", "lookup"}, handles["ip daddr vmap { 10.0.0.3 : accept, 10.0.0.4 : drop }"]},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	pre, err := c.Rules(FamilyIPv4, "t", "pre")
	if err != nil {
		t.Fatal(err)
	}
	if len(pre) != 2 || pre[0].Handle != want[1].Handle {
		t.Errorf("rules of chain pre: %+v, want the two of pre", pre)
	}
	// Dumps filter: a missing table has no rules, chains or sets.
	if r, err := c.Rules(FamilyIPv4, "missing", ""); len(r) != 0 || err != nil {
		t.Errorf("rules of a missing table: %v, %v, want none", r, err)
	}
	if _, err := c.Elems(FamilyIPv4, "t", "missing"); !errors.Is(err, unix.ENOENT) {
		t.Errorf("elements of a missing set: %v, want ENOENT", err)
	}
}
