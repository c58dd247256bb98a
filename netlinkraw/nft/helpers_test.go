package nft

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// dial opens a Conn in a fresh network namespace.
func dial(t testing.TB) (*Conn, *nstest.NetNS) {
	t.Helper()
	ns := nstest.New(t)
	c, err := Dial(&Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ns
}

// nftScript loads an nft -f script into the namespace.
func nftScript(t testing.TB, ns *nstest.NetNS, script string) {
	t.Helper()
	nstest.LookPath(t, "nft")
	var err error
	if err = ns.Do(func() error { return runStdin("nft", script, "-f", "-") }); err != nil {
		t.Fatalf("nft -f: %v\n%s", err, script)
	}
}

// Hand-written expressions (the kernel's netlink encoding, as libnftnl
// writes it), enough for rules in these tests; package nftexpr compiles
// real ones.

// expr encodes one NFTA_LIST_ELEM: an expression's name and data.
func expr(name string, data func(e *nlcore.Encoder)) []byte {
	var e nlcore.Encoder
	l := e.BeginNest(attrListElem | nlcore.AttrNested)
	e.Str(1, name) // NFTA_EXPR_NAME
	d := e.BeginNest(2 | nlcore.AttrNested)
	data(&e)
	e.EndNest(d)
	e.EndNest(l)
	return e.B
}

// verdictExpr is `immediate reg 0 <verdict>`.
func verdictExpr(code int32, chain string) []byte {
	return expr("immediate", func(e *nlcore.Encoder) {
		e.BE32(1, 0) // NFTA_IMMEDIATE_DREG: NFT_REG_VERDICT
		d := e.BeginNest(2 | nlcore.AttrNested)
		v := e.BeginNest(attrDataVerdict | nlcore.AttrNested)
		e.BE32(attrVerdictCode, uint32(code))
		if chain != "" {
			e.Str(attrVerdictChain, chain)
		}
		e.EndNest(v)
		e.EndNest(d)
	})
}

// counterExpr is `counter packets 0 bytes 0`.
func counterExpr() []byte {
	return expr("counter", func(e *nlcore.Encoder) {
		e.BE64(1, 0) // NFTA_COUNTER_BYTES
		e.BE64(2, 0) // NFTA_COUNTER_PACKETS
	})
}

// ipDaddrExpr is `payload load 4b @ network header + 16 => reg 1`.
func ipDaddrExpr() []byte {
	return expr("payload", func(e *nlcore.Encoder) {
		e.BE32(1, 1)  // NFTA_PAYLOAD_DREG: NFT_REG_1
		e.BE32(2, 1)  // NFTA_PAYLOAD_BASE: network header
		e.BE32(3, 16) // NFTA_PAYLOAD_OFFSET
		e.BE32(4, 4)  // NFTA_PAYLOAD_LEN
	})
}

// vmapExpr is `lookup reg 1 set <set> dreg 0` (a verdict map lookup).
func vmapExpr(set string, id uint32) []byte {
	return expr("lookup", func(e *nlcore.Encoder) {
		e.Str(1, set) // NFTA_LOOKUP_SET
		e.BE32(2, 1)  // NFTA_LOOKUP_SREG
		e.BE32(3, 0)  // NFTA_LOOKUP_DREG: NFT_REG_VERDICT
		if id != 0 {
			e.BE32(4, id) // NFTA_LOOKUP_SET_ID
		}
	})
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// exprNames lists the expression names of a rule's NFTA_RULE_EXPRESSIONS.
func exprNames(t testing.TB, b []byte) []string {
	t.Helper()
	var names []string
	err := nlcore.ForEachAttr(b, func(_ uint16, v []byte) error {
		n, _, err := nlcore.FindAttr(v, 1)
		names = append(names, nlcore.GetString(n))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// key concatenates key fields, each padded to 4 bytes as nf_tables
// registers hold them.
func key(fields ...[]byte) []byte {
	var b []byte
	for _, f := range fields {
		b = append(b, f...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	return b
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// indent strips a common leading tab indentation, so that expected nft
// output can be written indented in the test.
func trimLines(s string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, strings.TrimRight(l, " \t"))
	}
	return strings.Join(out, "\n")
}
