package nlcore

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// nla builds one attribute by hand, padded to 4 bytes.
func nla(typ uint16, payload []byte) []byte {
	out := cat(le16(uint16(4+len(payload))), le16(typ), payload)
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	return out
}

func TestParseMessages(t *testing.T) {
	if Native.Uint16([]byte{1, 0}) != 1 {
		t.Skip("expected encodings are written for little-endian machines")
	}
	hdr := func(l uint32, typ, flags uint16, seq uint32) []byte {
		return cat(le32(l), le16(typ), le16(flags), le32(seq), le32(0))
	}
	// An ACK, a capped error with an extended-ACK message, a dump entry.
	ackMsg := cat(hdr(36, TypeError, 0, 5), le32(0), hdr(20, 0x1d, 5, 5))
	extack := cat(nla(1, []byte("bad weight\x00")), nla(2, le32(24))) // NLMSGERR_ATTR_MSG, _OFFS
	errMsg := cat(hdr(uint32(36+len(extack)), TypeError, 0x300, 6), le32(uint32(0x100000000-34)), hdr(40, 0x1d, 5, 6), extack)
	entry := cat(hdr(24, 0x1d, FlagMulti, 7), []byte{1, 1, 0, 0}, nla(1, nil))
	got, err := ParseMessages(nil, cat(ackMsg, errMsg, entry))
	if err != nil {
		t.Fatal(err)
	}
	want := []Message{
		{Type: TypeError, Seq: 5, Data: ackMsg[16:]},
		{Type: TypeError, Flags: 0x300, Seq: 6, Errno: 34, Ext: "bad weight", BadAttr: 24, Data: errMsg[16:]},
		{Type: 0x1d, Flags: FlagMulti, Seq: 7, Data: entry[16:]},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
	if err := got[1].Err(); err == nil || err.Error() != "numerical result out of range: bad weight" {
		t.Errorf("error message's error: %v", err)
	}
	for _, bad := range [][]byte{hdr(8, 1, 0, 0), hdr(100, 1, 0, 0), cat(hdr(18, TypeError, 0, 1), []byte{0, 0}), cat(ackMsg, []byte{1, 2, 3, 4})} {
		if _, err := ParseMessages(nil, bad); err == nil {
			t.Errorf("malformed datagram %x parsed", bad)
		}
	}
}

// FuzzParseMessages: what parses covers the datagram exactly (up to the
// last message's padding), and no payload is larger than the datagram.
// The seeds are datagrams the kernel sent to the ipvs and ipset clients.
func FuzzParseMessages(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := ParseMessages(nil, b)
		if err != nil {
			return
		}
		total := 0
		for _, m := range ms {
			if len(m.Data) > len(b) {
				t.Fatalf("message payload of %d bytes from a %d-byte datagram", len(m.Data), len(b))
			}
			total += align4(HdrLen + len(m.Data))
		}
		if total < len(b) || total > len(b)+3 {
			t.Fatalf("messages cover %d bytes of %d", total, len(b))
		}
	})
}

func TestEncoder(t *testing.T) {
	if Native.Uint16([]byte{1, 0}) != 1 {
		t.Skip("expected encodings are written for little-endian machines")
	}
	var e Encoder
	off := e.BeginMessage(0x0a01, FlagRequest|FlagAck, 9)
	e.Nfgen(2, 10)
	n := e.BeginNest(7 | AttrNested)
	e.U8(1, 5)
	e.BE16(2|AttrNetByteOrder, 0x1234)
	e.EndNest(n)
	e.Str(3, "abc")
	e.EndMessage(off)
	want := cat(le32(48), le16(0x0a01), le16(5), le32(9), le32(0), []byte{2, 0, 0, 10},
		le16(20), le16(7|AttrNested), nla(1, []byte{5}), nla(2|AttrNetByteOrder, []byte{0x12, 0x34}),
		nla(3, []byte("abc\x00")))
	if diff := cmp.Diff(want, e.B); diff != "" {
		t.Errorf("encoding (-want +got):\n%s", diff)
	}
	ms, err := ParseMessages(nil, e.B)
	if err != nil || len(ms) != 1 || ms[0].Seq != 9 {
		t.Fatalf("parse of the encoding: %+v, %v", ms, err)
	}
	var types []uint16
	err = ForEachAttr(ms[0].Data[NfgenLen:], func(typ uint16, v []byte) error {
		types = append(types, typ)
		return nil
	})
	if err != nil || !cmp.Equal(types, []uint16{7, 3}) {
		t.Errorf("attributes %v (%v), want [7 3] (flags masked)", types, err)
	}
}
