package nftexpr

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

func testTable(t *testing.T, family nft.Family) *Table {
	t.Helper()
	tab, err := NewTable(family)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range kubeSets(family) {
		if _, err := tab.AddSet(d, uint32(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	return tab
}

func noID() uint32 { return 99 }

// TestRuleErrors: a rule that does not compile names its text and the
// token where compilation failed.
func TestRuleErrors(t *testing.T) {
	tab := testTable(t, nft.FamilyIPv4)
	for _, tc := range []struct {
		text, token, why string
	}{
		{"", "", "empty rule"},
		{"frobnicate drop", "frobnicate", "unknown expression"},
		{"ip daddr @nope drop", "@nope", "set not defined"},
		{"ip6 daddr ::1 drop", "ip6", "family"},
		{"meta foo 1", "foo", "unsupported meta key"},
		{"ip daddr 10.0.0.1 jump", "", "chain name"},
		{"ip daddr 10.0.0.300 drop", "10.0.0.300", "not an ipv4_addr"},
		{"ip daddr . meta l4proto vmap @service-ips", "@service-ips", "set key is ipv4_addr . inet_proto . inet_service"},
		{"ip daddr . meta l4proto . th dport @service-ips", "@service-ips", "needs vmap"},
		{"ip daddr @cluster-ips vmap @cluster-ips", "vmap", "unknown expression"},
		{"ip daddr vmap @cluster-ips", "@cluster-ips", "not a verdict map"},
		{"numgen random mod 0 vmap { 0 : drop }", "0", "numgen modulus"},
		{"numgen random mod 2 vmap { 0 : frob }", "frob", "not a verdict"},
		{"numgen random mod 2 vmap { 0 : goto a , }", "}", "empty element"},
		{"meta l4proto tcp dnat to 10.0.0.1:99999", "10.0.0.1:99999", "address[:port]"},
		{"meta l4proto tcp dnat to fd00::1", "fd00::1", "address[:port]"},
		{"meta l4proto tcp dnat ip6 to 10.0.0.1", "ip6", "family"},
		{"meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.0.1 . 80 , 1 : 10.0.0.2 }", "10.0.0.2", "ADDR . PORT"},
		{"ip daddr { 10.0.0.0/8", "", "unterminated"},
		{"ip saddr { fd00::1 , 10.0.0.1 } drop", "fd00::1", "not a value of type ipv4_addr"},
		{"ip saddr 10.0.0.0/33 drop", "10.0.0.0/33", "prefix"},
		{"mark set mark nand 1", "nand", "want or, xor or and"},
		{"meta l4proto . th dport drop", "drop", "concatenation needs a set"},
		{"update @cluster-ips { ip saddr . ip daddr }", "@cluster-ips", "set key is ipv4_addr"},
		{"update cluster-ips { ip saddr }", "cluster-ips", "want @set"},
		{"ct state bogus accept", "bogus", "not a ct_state"},
		{"iifname \"\" drop", `""`, "interface name"},
		{"meta l4proto { tcp , udp } drop", "{", "anonymous sets of this expression"},
	} {
		_, err := tab.Rule("c", tc.text, "", noID)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("rule %q: got %v, want an *Error", tc.text, err)
			continue
		}
		if e.Rule != tc.text || e.Token != tc.token || !strings.Contains(e.Error(), tc.why) || !strings.Contains(e.Error(), fmt.Sprintf("rule %q", tc.text)) {
			t.Errorf("rule %q: got error %q (token %q), want token %q and %q", tc.text, e, e.Token, tc.token, tc.why)
		}
	}
	if _, err := tab.Rule("c", "drop", strings.Repeat("x", 129), noID); err == nil {
		t.Errorf("a comment of 129 bytes compiled")
	}
}

func TestElemErrors(t *testing.T) {
	tab := testTable(t, nft.FamilyIPv4)
	for _, tc := range []struct{ set, key, value, why string }{
		{"nope", "1.2.3.4", "", "not defined"},
		{"cluster-ips", "1.2.3", "", "not an ipv4_addr"},
		{"cluster-ips", "1.2.3.4", "drop", "value \"drop\" for a set"},
		{"service-ips", "1.2.3.4 . tcp", "drop", "2 fields, want 3"},
		{"service-ips", "1.2.3.4 . tcpx . 80", "drop", "not an inet_proto"},
		{"service-ips", "1.2.3.4 . tcp . 65536", "drop", "not an inet_service"},
		{"service-ips", "1.2.3.4 . tcp . 80", "goto", "verdict"},
		{"service-ips", "1.2.3.4 . tcp . 80", "drop x", "verdict"},
	} {
		_, err := tab.Elem(tc.set, tc.key, tc.value, "")
		if err == nil || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), tc.set) {
			t.Errorf("element %q of %s: got %v, want an error naming the set and %q", tc.key, tc.set, err, tc.why)
		}
	}
}

func TestSetErrors(t *testing.T) {
	tab := testTable(t, nft.FamilyIPv4)
	for _, d := range []SetDef{
		{Name: "a", Type: "ipv4_addr . bogus"},
		{Name: "b", Type: "ipv4_addr", Flags: []string{"sticky"}},
		{Name: "c", Type: "ipv4_addr : nothing"},
	} {
		if _, err := tab.AddSet(d, 0); err == nil || !strings.Contains(err.Error(), "set "+d.Name) {
			t.Errorf("set %+v: got %v, want an error naming it", d, err)
		}
	}
	if err := tab.SetID("nope", 1); err == nil {
		t.Errorf("SetID of an unknown set succeeded")
	}
}

func TestChain(t *testing.T) {
	for _, tc := range []struct {
		typ, hook, prio string
		want            nft.Chain
		err             bool
	}{
		{"", "", "", nft.Chain{Name: "x"}, false},
		{"nat", "prerouting", "dstnat", nft.Chain{Name: "x", Type: "nat", Hook: 0, HasHook: true, Priority: -100, Policy: 1}, false},
		{"filter", "output", "dstnat - 10", nft.Chain{Name: "x", Type: "filter", Hook: 3, HasHook: true, Priority: -110, Policy: 1}, false},
		{"filter", "output", "dstnat-10", nft.Chain{Name: "x", Type: "filter", Hook: 3, HasHook: true, Priority: -110, Policy: 1}, false},
		{"filter", "input", "filter + 5", nft.Chain{Name: "x", Type: "filter", Hook: 1, HasHook: true, Priority: 5, Policy: 1}, false},
		{"nat", "postrouting", "srcnat", nft.Chain{Name: "x", Type: "nat", Hook: 4, HasHook: true, Priority: 100, Policy: 1}, false},
		{"filter", "forward", "-110", nft.Chain{Name: "x", Type: "filter", Hook: 2, HasHook: true, Priority: -110, Policy: 1}, false},
		{"filter", "forward", "mangle", nft.Chain{Name: "x", Type: "filter", Hook: 2, HasHook: true, Priority: -150, Policy: 1}, false},
		{"filter", "sideways", "0", nft.Chain{}, true},
		{"bogus", "input", "0", nft.Chain{}, true},
		{"filter", "input", "dstnat * 2", nft.Chain{}, true},
		{"filter", "input", "later", nft.Chain{}, true},
	} {
		got, err := Chain("x", tc.typ, tc.hook, tc.prio, "")
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), "chain x") {
				t.Errorf("%s %s %q: got %v, want an error naming the chain", tc.typ, tc.hook, tc.prio, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s %q: %v", tc.typ, tc.hook, tc.prio, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s %s %q (-want +got):\n%s", tc.typ, tc.hook, tc.prio, diff)
		}
	}
}

// TestNamedSetReference: a rule refers to a named set by name alone when
// the set's ID is 0 (a set created in an earlier transaction), and by name
// and ID otherwise.
func TestNamedSetReference(t *testing.T) {
	tab := testTable(t, nft.FamilyIPv4)
	withID, err := tab.Rule("c", "ip daddr @cluster-ips reject", "", noID)
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.SetID("cluster-ips", 0); err != nil {
		t.Fatal(err)
	}
	byName, err := tab.Rule("c", "ip daddr @cluster-ips reject", "", noID)
	if err != nil {
		t.Fatal(err)
	}
	var a, b strings.Builder
	_ = FormatRule(&a, nft.FamilyIPv4, "t", withID.Rule)
	_ = FormatRule(&b, nft.FamilyIPv4, "t", byName.Rule)
	if a.String() != b.String() || len(byName.Exprs) != len(withID.Exprs)-8 {
		t.Errorf("by name: %d bytes\n%s\nwith ID: %d bytes\n%s", len(byName.Exprs), b.String(), len(withID.Exprs), a.String())
	}
}

// TestNameAnonymous: with NameAnonymous, anonymous sets and the lookups of
// them carry the table's names; otherwise nft's patterns.
func TestNameAnonymous(t *testing.T) {
	tab := testTable(t, nft.FamilyIPv4)
	ids := uint32(10)
	newID := func() uint32 { ids++; return ids }
	text := "ip saddr != { 10.0.0.0/8 , 1.2.3.4 } numgen random mod 2 vmap { 0 : drop , 1 : accept }"
	for _, tc := range []struct{ prefix, set, vmap string }{
		{"", "__set%d", "__map%d"},
		{"p", "__setp11", "__mapp12"},
	} {
		ids = 10
		if err := tab.NameAnonymous(tc.prefix); err != nil {
			t.Fatal(err)
		}
		r, err := tab.Rule("c", text, "", newID)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := FormatRule(&b, nft.FamilyIPv4, "t", r.Rule); err != nil {
			t.Fatal(err)
		}
		if len(r.Sets) != 2 || r.Sets[0].Set.Name != tc.set || r.Sets[1].Set.Name != tc.vmap ||
			!strings.Contains(b.String(), "set "+tc.set+" 0x1 ]") || !strings.Contains(b.String(), "set "+tc.vmap+" dreg 0 ]") {
			t.Errorf("prefix %q: sets %q, %q, rule:\n%s", tc.prefix, r.Sets[0].Set.Name, r.Sets[1].Set.Name, b.String())
		}
	}
	if err := tab.NameAnonymous("7"); err == nil {
		t.Errorf("a prefix starting with a digit was taken")
	}
}
