package nftexpr

import (
	"encoding/binary"
	"testing"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// Test-side decoders of the messages nft sends, into netlinkraw/nft's
// objects, to compare with what the compiler produces.

// nf_tables message types (NFT_MSG_*).
const (
	msgNewTable   = 0
	msgNewChain   = 3
	msgNewRule    = 6
	msgNewSet     = 9
	msgNewSetElem = 12
)

func msgType(m mnlMsg) int { return int(m.Type & 0xff) }

func forAttrs(t testing.TB, b []byte, fn func(typ uint16, v []byte)) {
	t.Helper()
	if err := nlcore.ForEachAttr(b, func(typ uint16, v []byte) error { fn(typ, v); return nil }); err != nil {
		t.Fatalf("decode: %v", err)
	}
}

func be32(v []byte) uint32 { return binary.BigEndian.Uint32(v) }

func clone(v []byte) []byte { return append([]byte(nil), v...) }

func decodeTable(t testing.TB, m mnlMsg) nft.Table {
	tab := nft.Table{Family: nft.Family(m.Data[0])}
	forAttrs(t, m.Data[4:], func(typ uint16, v []byte) {
		switch typ {
		case 1:
			tab.Name = nlcore.GetString(v)
		case 2:
			tab.Flags = be32(v)
		case 6:
			tab.UserData = clone(v)
		}
	})
	return tab
}

func decodeChain(t testing.TB, m mnlMsg) nft.Chain {
	var c nft.Chain
	forAttrs(t, m.Data[4:], func(typ uint16, v []byte) {
		switch typ {
		case 3:
			c.Name = nlcore.GetString(v)
		case 7:
			c.Type = nlcore.GetString(v)
		case 4:
			c.HasHook, c.Policy = true, 1 // nft sends no policy: accept
			forAttrs(t, v, func(typ uint16, v []byte) {
				switch typ {
				case 1:
					c.Hook = be32(v)
				case 2:
					c.Priority = int32(be32(v))
				}
			})
		case 5:
			c.Policy = be32(v)
		case 12:
			c.UserData = clone(v)
		}
	})
	return c
}

func decodeSet(t testing.TB, m mnlMsg) nft.Set {
	var s nft.Set
	forAttrs(t, m.Data[4:], func(typ uint16, v []byte) {
		switch typ {
		case 2:
			s.Name = nlcore.GetString(v)
		case 3:
			s.Flags = be32(v)
		case 4:
			s.KeyType = be32(v)
		case 5:
			s.KeyLen = be32(v)
		case 6:
			s.DataType = be32(v)
		case 7:
			s.DataLen = be32(v)
		case 8:
			s.Policy, s.HasPolicy = be32(v), true
		case 10:
			s.ID = be32(v)
		case 11:
			s.Timeout = binary.BigEndian.Uint64(v)
		case 9:
			forAttrs(t, v, func(typ uint16, v []byte) {
				switch typ {
				case 1:
					s.Size = be32(v)
				case 2:
					forAttrs(t, v, func(_ uint16, v []byte) {
						forAttrs(t, v, func(_ uint16, v []byte) { s.Fields = append(s.Fields, be32(v)) })
					})
				}
			})
		case 13:
			s.UserData = clone(v)
		}
	})
	return s
}

// decodeElems returns the set an element message adds to, its set ID and
// its elements.
func decodeElems(t testing.TB, m mnlMsg) (string, uint32, []nft.Elem) {
	var (
		set   string
		id    uint32
		elems []nft.Elem
	)
	forAttrs(t, m.Data[4:], func(typ uint16, v []byte) {
		switch typ {
		case 2:
			set = nlcore.GetString(v)
		case 4:
			id = be32(v)
		case 3:
			n := uint16(0)
			forAttrs(t, v, func(typ uint16, v []byte) {
				n++
				if typ != n {
					t.Errorf("element nest %d has type %d", n, typ)
				}
				elems = append(elems, decodeElem(t, v))
			})
		}
	})
	return set, id, elems
}

func decodeElem(t testing.TB, b []byte) nft.Elem {
	var e nft.Elem
	value := func(v []byte) []byte {
		d, _, err := nlcore.FindAttr(v, 1)
		if err != nil {
			t.Fatal(err)
		}
		return clone(d)
	}
	forAttrs(t, b, func(typ uint16, v []byte) {
		switch typ {
		case 1:
			e.Key = value(v)
		case 10:
			e.KeyEnd = value(v)
		case 3:
			e.Flags = be32(v)
		case 5:
			e.Timeout = binary.BigEndian.Uint64(v)
		case 6:
			e.UserData = clone(v)
		case 2:
			forAttrs(t, v, func(typ uint16, v []byte) {
				switch typ {
				case 1:
					e.Data = clone(v)
				case 2:
					e.Verdict = &nft.Verdict{}
					forAttrs(t, v, func(typ uint16, v []byte) {
						switch typ {
						case 1:
							e.Verdict.Code = int32(be32(v))
						case 2:
							e.Verdict.Chain = nlcore.GetString(v)
						}
					})
				}
			})
		}
	})
	return e
}

func decodeRule(t testing.TB, m mnlMsg) nft.Rule {
	var r nft.Rule
	forAttrs(t, m.Data[4:], func(typ uint16, v []byte) {
		switch typ {
		case 2:
			r.Chain = nlcore.GetString(v)
		case 4:
			r.Exprs = clone(v)
		case 7:
			r.UserData = clone(v)
		}
	})
	return r
}
