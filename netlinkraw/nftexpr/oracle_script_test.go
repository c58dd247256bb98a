package nftexpr

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// scriptTable is a table's content both as an nft script for the oracle
// and as input to the compiler.
type scriptTable struct {
	family   nft.Family
	name     string
	comment  string
	chains   []chainDef
	sets     []SetDef
	counters []string
	rules    []ruleDef
	elems    []elemDef
}

type chainDef struct{ name, typ, hook, prio, comment string }

type ruleDef struct{ chain, text, comment string }

type elemDef struct{ set, key, value, comment string }

func quote(s string) string { return `"` + s + `"` }

// script renders the table as `nft -f` reads it: the table block with
// chains, sets and counters, then one command per rule and element.
func (st *scriptTable) script() string {
	var b strings.Builder
	fam := familyName(st.family)
	fmt.Fprintf(&b, "table %s %s {\n", fam, st.name)
	if st.comment != "" {
		fmt.Fprintf(&b, "  comment %s\n", quote(st.comment))
	}
	for _, c := range st.chains {
		var parts []string
		if c.typ != "" {
			p, _ := ParsePriority(c.prio)
			parts = append(parts, fmt.Sprintf("type %s hook %s priority %d ;", c.typ, c.hook, p))
		}
		if c.comment != "" {
			parts = append(parts, "comment "+quote(c.comment)+" ;")
		}
		fmt.Fprintf(&b, "  chain %s { %s }\n", c.name, strings.Join(parts, " "))
	}
	for _, s := range st.sets {
		kind := "set"
		if strings.Contains(s.Type, ":") {
			kind = "map"
		}
		parts := []string{"type " + s.Type + " ;"}
		if len(s.Flags) > 0 {
			parts = append(parts, "flags "+strings.Join(s.Flags, ",")+" ;")
		}
		if s.Timeout > 0 {
			parts = append(parts, fmt.Sprintf("timeout %ds ;", s.Timeout/time.Second))
		}
		if s.Comment != "" {
			parts = append(parts, "comment "+quote(s.Comment)+" ;")
		}
		fmt.Fprintf(&b, "  %s %s { %s }\n", kind, s.Name, strings.Join(parts, " "))
	}
	for _, c := range st.counters {
		fmt.Fprintf(&b, "  counter %s { }\n", c)
	}
	b.WriteString("}\n")
	for _, r := range st.rules {
		fmt.Fprintf(&b, "add rule %s %s %s %s", fam, st.name, r.chain, r.text)
		if r.comment != "" {
			b.WriteString(" comment " + quote(r.comment))
		}
		b.WriteString("\n")
	}
	for _, e := range st.elems {
		fmt.Fprintf(&b, "add element %s %s %s { %s", fam, st.name, e.set, e.key)
		if e.comment != "" {
			b.WriteString(" comment " + quote(e.comment))
		}
		if e.value != "" {
			b.WriteString(" : " + e.value)
		}
		b.WriteString(" }\n")
	}
	return b.String()
}

// compiled is the compiler's output for a scriptTable, in the order nft
// sends and prints the objects.
type compiled struct {
	table  nft.Table
	chains []nft.Chain
	sets   []nft.Set
	rules  []Rule
	elems  []nft.Elem
}

// compile compiles st the way nft numbers set IDs: named sets 1..n in
// order, then the anonymous sets as the rules create them.
func (st *scriptTable) compile(t testing.TB) compiled {
	t.Helper()
	var out compiled
	var err error
	if out.table, err = TableObject(st.family, st.name, st.comment); err != nil {
		t.Fatal(err)
	}
	for _, c := range st.chains {
		ch, err := Chain(c.name, c.typ, c.hook, c.prio, c.comment)
		if err != nil {
			t.Fatal(err)
		}
		out.chains = append(out.chains, ch)
	}
	tab, err := NewTable(st.family)
	if err != nil {
		t.Fatal(err)
	}
	id := uint32(0)
	newID := func() uint32 { id++; return id }
	for _, d := range st.sets {
		s, err := tab.AddSet(d, newID())
		if err != nil {
			t.Fatal(err)
		}
		out.sets = append(out.sets, s)
	}
	for _, r := range st.rules {
		cr, err := tab.Rule(r.chain, r.text, r.comment, newID)
		if err != nil {
			t.Fatal(err)
		}
		out.rules = append(out.rules, cr)
	}
	for _, e := range st.elems {
		el, err := tab.Elem(e.set, e.key, e.value, e.comment)
		if err != nil {
			t.Fatal(err)
		}
		out.elems = append(out.elems, el)
	}
	return out
}

// debugText prints the compiled objects as `nft -c --debug=netlink` does.
func (st *scriptTable) debugText(t testing.TB, c compiled) string {
	var b bytes.Buffer
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, ch := range c.chains {
		must(FormatChain(&b, st.family, ch))
	}
	for _, s := range c.sets {
		must(FormatSet(&b, st.name, s))
	}
	for _, r := range c.rules {
		for _, s := range r.Sets {
			must(FormatSet(&b, st.name, s.Set))
			must(FormatElems(&b, st.name, s.Set.Name, s.Elems))
		}
		must(FormatRule(&b, st.family, st.name, r.Rule))
	}
	for i, e := range c.elems {
		must(FormatElems(&b, st.name, st.elems[i].set, []nft.Elem{e}))
	}
	return b.String()
}

// checkOracle compiles st and compares it with what nft sends for the
// same script: the messages' objects (rule expressions byte for byte) and
// the debug text.
func checkOracle(t *testing.T, st *scriptTable) {
	t.Helper()
	script := st.script()
	got := st.compile(t)
	checkMessages(t, st, got, batchMsgs(parseMNL(t, runNFT(t, script, "mnl"))))
	want := debugBlocks(runNFT(t, script, "netlink"))
	if diff := cmp.Diff(want, debugBlocks(st.debugText(t, got))); diff != "" {
		t.Errorf("debug text differs from nft's (-nft +ours):\n%s", diff)
	}
}

// debugBlocks splits debug text into blocks: each line, except that a
// rule's or an element list's lines make one block. The blocks of the
// element commands at the end are sorted, as nft reorders those commands;
// lines of stateful objects (counters), which the compiler does not make,
// are dropped.
func debugBlocks(s string) []string {
	var blocks []string
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "table (null)"):
		case i+1 < len(lines) && strings.HasPrefix(lines[i+1], "\telement"):
			blocks = append(blocks, l+"\n"+lines[i+1])
			i++
		case i+1 < len(lines) && strings.HasPrefix(lines[i+1], "  ["):
			b := l
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "  ") {
				b += "\n" + lines[i+1]
				i++
			}
			blocks = append(blocks, b)
		case l == "":
		default:
			blocks = append(blocks, l)
		}
	}
	// The trailing element lists (after the last rule) are sorted.
	last := len(blocks)
	for last > 0 && strings.Contains(blocks[last-1], "\n\telement") {
		last--
	}
	slices.Sort(blocks[last:])
	return blocks
}

func checkMessages(t *testing.T, st *scriptTable, got compiled, msgs []mnlMsg) {
	t.Helper()
	next := func(typ int, what string) (mnlMsg, bool) {
		for len(msgs) > 0 && msgType(msgs[0]) != typ && msgType(msgs[0]) != msgNewRule && msgType(msgs[0]) != msgNewSet && msgType(msgs[0]) != msgNewSetElem && msgType(msgs[0]) != msgNewChain {
			msgs = msgs[1:] // table, counters
		}
		if len(msgs) == 0 || msgType(msgs[0]) != typ {
			t.Errorf("%s: nft sent no message of type %d here (left: %d)", what, typ, len(msgs))
			return mnlMsg{}, false
		}
		m := msgs[0]
		msgs = msgs[1:]
		return m, true
	}
	if len(msgs) == 0 || msgType(msgs[0]) != msgNewTable {
		t.Fatalf("nft's batch does not start with its table")
	}
	if diff := cmp.Diff(decodeTable(t, msgs[0]), got.table); diff != "" {
		t.Errorf("table (-nft +ours):\n%s", diff)
	}
	msgs = msgs[1:]
	for _, c := range got.chains {
		if m, ok := next(msgNewChain, "chain "+c.Name); ok {
			if diff := cmp.Diff(decodeChain(t, m), c); diff != "" {
				t.Errorf("chain %s (-nft +ours):\n%s", c.Name, diff)
			}
		}
	}
	for _, s := range got.sets {
		if m, ok := next(msgNewSet, "set "+s.Name); ok {
			if diff := cmp.Diff(decodeSet(t, m), s); diff != "" {
				t.Errorf("set %s (-nft +ours):\n%s", s.Name, diff)
			}
		}
	}
	for i, r := range got.rules {
		what := fmt.Sprintf("rule %q", st.rules[i].text)
		for _, s := range r.Sets {
			if m, ok := next(msgNewSet, what+" anonymous set"); ok {
				if diff := cmp.Diff(decodeSet(t, m), s.Set); diff != "" {
					t.Errorf("%s: anonymous set (-nft +ours):\n%s", what, diff)
				}
			}
			if m, ok := next(msgNewSetElem, what+" anonymous set elements"); ok {
				name, id, elems := decodeElems(t, m)
				if name != s.Set.Name || id != s.Set.ID {
					t.Errorf("%s: elements of %s/%d, want %s/%d", what, name, id, s.Set.Name, s.Set.ID)
				}
				if diff := cmp.Diff(elems, s.Elems); diff != "" {
					t.Errorf("%s: anonymous set elements (-nft +ours):\n%s", what, diff)
				}
			}
		}
		if m, ok := next(msgNewRule, what); ok {
			want := decodeRule(t, m)
			if !bytes.Equal(want.Exprs, r.Exprs) || !bytes.Equal(want.UserData, r.UserData) || want.Chain != r.Chain {
				var a, b bytes.Buffer
				_ = FormatRule(&a, st.family, st.name, want)
				_ = FormatRule(&b, st.family, st.name, r.Rule)
				t.Errorf("%s: bytes differ\nnft:  %x %x\nours: %x %x\nnft:\n%s\nours:\n%s", what, want.Exprs, want.UserData, r.Exprs, r.UserData, a.String(), b.String())
			}
		}
	}
	// nft reorders element commands: compare them as sets of
	// (set, element).
	type setElem struct {
		Set  string
		Elem nft.Elem
	}
	var want, have []setElem
	for i, e := range got.elems {
		have = append(have, setElem{st.elems[i].set, e})
		if m, ok := next(msgNewSetElem, fmt.Sprintf("element %q of %s", st.elems[i].key, st.elems[i].set)); ok {
			set, _, elems := decodeElems(t, m)
			for _, e := range elems {
				want = append(want, setElem{set, e})
			}
		}
	}
	order := func(a, b setElem) int {
		if c := strings.Compare(a.Set, b.Set); c != 0 {
			return c
		}
		return bytes.Compare(a.Elem.Key, b.Elem.Key)
	}
	slices.SortFunc(want, order)
	slices.SortFunc(have, order)
	if diff := cmp.Diff(want, have); diff != "" {
		t.Errorf("elements (-nft +ours):\n%s", diff)
	}
	if len(msgs) != 0 {
		t.Errorf("nft sent %d messages more than compared", len(msgs))
	}
}
