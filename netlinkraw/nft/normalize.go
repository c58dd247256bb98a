package nft

import "github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"

// NormalizeExprs returns a copy of a rule's expressions (Rule.Exprs) with
// NLA_F_NESTED cleared on every nest, as the kernel dumps them (nft and
// libnftnl set it when they send): compiled expressions compare with
// dumped ones after it. Expressions the kernel changes beyond that (a
// counter's values, anonymous sets named "__map%d" and referred to by ID
// when sent, by their kernel name when dumped) still differ. A malformed
// list is copied as far as it parses.
func NormalizeExprs(b []byte) []byte {
	out := append([]byte(nil), b...)
	clearNested(out)
	return out
}

// clearNested clears NLA_F_NESTED in the attributes of b and, recursively,
// in those of every nest.
func clearNested(b []byte) {
	for len(b) >= nlcore.AttrHdrLen {
		l := int(nlcore.Native.Uint16(b))
		if l < nlcore.AttrHdrLen || l > len(b) {
			return
		}
		if typ := nlcore.Native.Uint16(b[2:]); typ&nlcore.AttrNested != 0 {
			nlcore.Native.PutUint16(b[2:], typ&^nlcore.AttrNested)
			clearNested(b[nlcore.AttrHdrLen:l])
		}
		b = b[min((l+3)&^3, len(b)):]
	}
}
