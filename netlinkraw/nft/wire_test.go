package nft

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// TestElemsRoundTrip: element lists too long for one message's 16-bit
// nest are split over messages of the same operation, each within the
// limit, and decode back to the elements given, in order, every field.
func TestElemsRoundTrip(t *testing.T) {
	var elems []Elem
	for i := range 5000 {
		el := Elem{Key: key([]byte{10, 1, byte(i >> 8), byte(i)}, []byte{6}, be16(uint16(i)))}
		switch i % 4 {
		case 0:
			el.Verdict = &Verdict{Code: VerdictGoto, Chain: "chain-" + string(rune('a'+i%26))}
		case 1:
			el.Verdict = &Verdict{Code: VerdictDrop}
		case 2:
			el.Data, el.Timeout, el.UserData = []byte{1, 2, 3, 4}, 30000, []byte{0, 3, 'h', 'i', 0}
		case 3:
			el.KeyEnd, el.Flags = []byte{10, 2, 0, 0}, ElemIntervalEnd
		}
		elems = append(elems, el)
	}
	tx := NewTx()
	tx.AddElems("", FamilyIPv4, "t", Set{Name: "s", ID: 7}, elems)
	if tx.Len() != 1 || tx.Messages() < 3 {
		t.Fatalf("%d operations in %d messages, want 1 in several", tx.Len(), tx.Messages())
	}
	var got []Elem
	for _, m := range tx.msgs {
		b := tx.enc.B[m.start+nlcore.NfgenLen : m.end]
		v, ok, err := nlcore.FindAttr(b, attrElemListElements)
		if err != nil || !ok || len(v)+nlcore.AttrHdrLen > 65535 {
			t.Fatalf("message's element nest: %d bytes, %v %v", len(v), ok, err)
		}
		if id, _, _ := nlcore.FindAttr(b, attrElemListSetID); len(id) != 4 || id[3] != 7 {
			t.Errorf("message without the set ID: %x", id)
		}
		if got, err = decodeElems(got, b); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(elems, got); diff != "" {
		t.Errorf("decoded elements (-want +got):\n%s", diff)
	}

	// Deletion sends keys and flags only.
	tx = NewTx()
	tx.DelElems("", FamilyIPv4, "t", "s", elems[:4])
	got, err := decodeElems(nil, tx.enc.B[nlcore.NfgenLen:])
	if err != nil {
		t.Fatal(err)
	}
	want := []Elem{{Key: elems[0].Key}, {Key: elems[1].Key}, {Key: elems[2].Key}, {Key: elems[3].Key, KeyEnd: elems[3].KeyEnd, Flags: ElemIntervalEnd}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deleted elements (-want +got):\n%s", diff)
	}

	// An element without a key fails the commit before anything is sent.
	tx = NewTx()
	tx.AddElems("my set", FamilyIPv4, "t", Set{Name: "s"}, []Elem{{Key: []byte{1}}, {}})
	if _, err := (&Conn{}).Commit(tx, nil); err == nil || err.Error() != "nft: add elements to my set: element 1 has no key" {
		t.Errorf("element without a key: %v", err)
	}
}

// TestParseGeneration decodes NFT_MSG_NEWGEN answers.
func TestParseGeneration(t *testing.T) {
	answer := func(attrs func(e *nlcore.Encoder)) []byte {
		var e nlcore.Encoder
		e.Nfgen(0, 0)
		attrs(&e)
		return e.B
	}
	tests := []struct {
		name    string
		msg     []byte
		want    uint32
		wantErr bool
	}{
		{name: "id", msg: answer(func(e *nlcore.Encoder) { e.BE32(attrGenID, 65538); e.BE32(2, 9) }), want: 65538},
		{name: "id after others", msg: answer(func(e *nlcore.Encoder) { e.BE32(2, 9); e.BE32(attrGenID, 3) }), want: 3},
		{name: "no id", msg: answer(func(e *nlcore.Encoder) { e.BE32(2, 9) }), wantErr: true},
		{name: "short id", msg: answer(func(e *nlcore.Encoder) { e.U16(attrGenID, 1) }), wantErr: true},
		{name: "truncated", msg: answer(func(e *nlcore.Encoder) { e.BE32(attrGenID, 3) })[:6], wantErr: true},
		{name: "no nfgenmsg", msg: []byte{0, 0}, wantErr: true},
	}
	for _, tc := range tests {
		got, err := parseGeneration(tc.msg)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.wantErr)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestTxReset: a reset transaction encodes the same bytes as a new one.
func TestTxReset(t *testing.T) {
	fresh := NewTx()
	writeTx(fresh, true)
	reused := NewTx()
	writeTx(reused, true)
	reused.AddElems("", FamilyIPv4, "w", Set{Name: "s4"}, []Elem{{}}) // an error, reset too
	reused.Reset()
	writeTx(reused, true)
	if diff := cmp.Diff(fresh.enc.B, reused.enc.B); diff != "" || reused.err != nil {
		t.Errorf("reset transaction (-new +reused), error %v:\n%s", reused.err, diff)
	}
	if diff := cmp.Diff(fresh.msgs, reused.msgs, cmp.AllowUnexported(txMsg{})); diff != "" {
		t.Errorf("messages (-new +reused):\n%s", diff)
	}
	if diff := cmp.Diff(fresh.ops, reused.ops, cmp.AllowUnexported(txOp{})); diff != "" {
		t.Errorf("operations (-new +reused):\n%s", diff)
	}
}

// TestNormalizeExprs clears NLA_F_NESTED at every depth and nothing
// else (a string attribute whose type has the bit set stays), leaves its
// input alone, and stops at a malformed attribute.
func TestNormalizeExprs(t *testing.T) {
	build := func(nested uint16) []byte {
		var e nlcore.Encoder
		for range 2 {
			l := e.BeginNest(attrListElem | nested)
			e.Str(1, "immediate")
			d := e.BeginNest(2 | nested)
			e.BE32(1, 0)
			v := e.BeginNest(2 | nested)
			w := e.BeginNest(attrDataVerdict | nested)
			e.BE32(attrVerdictCode, uint32(VerdictAccept))
			e.EndNest(w)
			e.EndNest(v)
			e.EndNest(d)
			e.EndNest(l)
		}
		return e.B
	}
	in := build(nlcore.AttrNested)
	orig := append([]byte(nil), in...)
	if diff := cmp.Diff(build(0), NormalizeExprs(in)); diff != "" {
		t.Errorf("normalized (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(orig, in); diff != "" {
		t.Errorf("input changed:\n%s", diff)
	}
	if got := NormalizeExprs([]byte{8, 0, 1, 0x80, 0}); !bytes.Equal(got, []byte{8, 0, 1, 0x80, 0}) {
		t.Errorf("malformed input: %x", got)
	}
}
