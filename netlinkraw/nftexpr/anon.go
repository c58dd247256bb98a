package nftexpr

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// Names nft gives the anonymous sets and maps it creates.
const (
	anonSetName = "__set%d"
	anonMapName = "__map%d"
)

// verdictTypeof is the data TYPEOF nft records for an anonymous verdict
// map: an expression of type verdict (1), no data.
var verdictTypeof = []byte{0, 4, typeVerdict, 0, 0, 0, 1, 0}

var zero4 = []byte{0, 0, 0, 0}

// rhs compiles the right-hand side of `FIELD [op] VALUE|{ ... }|@set`.
func (c *ruleCompiler) rhs(f *field, op uint32, explicit bool) error {
	tok := c.peek()
	switch {
	case tok == "":
		return c.fail("", "want a value")
	case strings.HasPrefix(tok, "@"):
		c.pos++
		var flags uint32
		if op == cmpNeq {
			flags = lookupInvert
		}
		return c.lookupNamed([]field{*f}, tok, false, flags)
	case tok == "{":
		items, err := c.list()
		if err != nil {
			return err
		}
		if len(items) == 1 && len(items[0]) == 1 {
			return c.compare(f, op, true, items[0][0])
		}
		return c.anonSet(f, op, items)
	}
	c.pos++
	if isBitmask(f.t) && !explicit {
		// `ct state established,related`: any of the flags.
		var v uint32
		for {
			b, err := appendValue(c.t.val[:0], f.t, tok, 0)
			if err != nil {
				return c.fail(tok, "%v", err)
			}
			v |= binary.NativeEndian.Uint32(b)
			if c.peek() != "," {
				break
			}
			tok = c.peekAt(1)
			c.pos += 2
		}
		c.flagTest(f, v)
		return nil
	}
	return c.compare(f, op, explicit, tok)
}

func isBitmask(t *dtype) bool { return t == tCtState || t == tCtStatus }

// flagTest compiles a match of any of the flags v: (FIELD & v) != 0.
func (c *ruleCompiler) flagTest(f *field, v uint32) {
	f.load(c.x, 0, 0)
	c.x.bitwise(reg(0), binary.NativeEndian.AppendUint32(c.t.val[:0], v), zero4, false)
	c.x.cmp(reg(0), cmpNeq, zero4)
}

// list reads `{ item , item ... }`, each item one or more tokens.
func (c *ruleCompiler) list() ([][]string, error) {
	if err := c.expect("{"); err != nil {
		return nil, err
	}
	items := c.t.items[:0]
	defer func() { c.t.items = items[:0] }()
	start := c.pos
	for {
		switch c.peek() {
		case "":
			return nil, c.fail("", "unterminated {")
		case ",", "}":
			if c.pos == start {
				return nil, c.fail(c.peek(), "empty element")
			}
			items = append(items, c.toks[start:c.pos])
			end := c.peek() == "}"
			c.pos++
			start = c.pos
			if end {
				return items, nil
			}
		default:
			c.pos++
		}
	}
}

// compare compiles a comparison of one field with one value: a prefix
// (`10.0.0.0/8`), an interface name prefix (`veth*`), a flag of a bitmask
// (`ct state new`) or a plain value.
func (c *ruleCompiler) compare(f *field, op uint32, explicit bool, tok string) error {
	x := c.x
	switch {
	case isBitmask(f.t) && !explicit:
		v, err := appendValue(c.t.val[:0], f.t, tok, 0)
		if err != nil {
			return c.fail(tok, "%v", err)
		}
		c.flagTest(f, binary.NativeEndian.Uint32(v))
		return nil
	case (f.t == tIPv4 || f.t == tIPv6) && strings.Contains(tok, "/"):
		p, err := netip.ParsePrefix(tok)
		if err != nil || p.Addr().Is4() != (f.t == tIPv4) {
			return c.fail(tok, "not a prefix of type %s", f.t.name)
		}
		if p.Bits() == f.t.size*8 {
			tok = p.Addr().String()
			break
		}
		addr := addrBytes(c.t.val[:0], p.Masked().Addr())
		if f.kind != kPayload {
			return c.comparePrefix(f, op, p, addr, tok)
		}
		// A byte-aligned prefix loads only its bytes; another (or /0)
		// loads the whole address and masks it.
		n := f.t.size
		if p.Bits()%8 == 0 && p.Bits() > 0 {
			n = p.Bits() / 8
		}
		f.load(x, 0, n)
		if n == f.t.size {
			mask := make([]byte, 2*n)
			for i := 0; i < p.Bits()/8; i++ {
				mask[i] = 0xff
			}
			if p.Bits()%8 != 0 {
				mask[p.Bits()/8] = byte(0xff << (8 - p.Bits()%8))
			}
			x.bitwise(reg(0), mask[:n], mask[n:], false)
		}
		x.cmp(reg(0), op, addr[:n])
		return nil
	case f.t == tIfname && strings.HasSuffix(unquote(tok), "*"):
		name := strings.TrimSuffix(unquote(tok), "*")
		if name == "" {
			return c.fail(tok, "empty interface name prefix")
		}
		f.load(x, 0, 0)
		x.cmp(reg(0), op, []byte(name))
		return nil
	}
	v, err := appendValue(c.t.val[:0], f.t, unquote(tok), 0)
	if err != nil {
		return c.fail(tok, "%v", err)
	}
	f.load(x, 0, 0)
	x.cmp(reg(0), op, v)
	return nil
}

// comparePrefix compiles a prefix match of a loaded (non-header) address:
// nft compares a byte-aligned prefix's bytes only, and masks the whole
// address for another.
func (c *ruleCompiler) comparePrefix(f *field, op uint32, p netip.Prefix, addr []byte, tok string) error {
	if p.Bits() == 0 {
		return c.fail(tok, "a /0 prefix of a non-header field")
	}
	f.load(c.x, 0, 0)
	if p.Bits()%8 == 0 {
		c.x.cmp(reg(0), op, addr[:p.Bits()/8])
		return nil
	}
	n := f.t.size
	mask := make([]byte, 2*n)
	for i := 0; i < p.Bits()/8; i++ {
		mask[i] = 0xff
	}
	mask[p.Bits()/8] = byte(0xff << (8 - p.Bits()%8))
	c.x.bitwise(reg(0), mask[:n], mask[n:], false)
	c.x.cmp(reg(0), op, addr)
	return nil
}

func addrBytes(dst []byte, a netip.Addr) []byte {
	if a.Is4() {
		v := a.As4()
		return append(dst, v[:]...)
	}
	v := a.As16()
	return append(dst, v[:]...)
}

// span is an address range [start, end) as 128-bit numbers; toMax says
// end is past the last address.
type span struct {
	start, end u128
	toMax      bool
}

type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

func toU128(a netip.Addr) u128 {
	if a.Is4() {
		v := a.As4()
		return u128{lo: uint64(binary.BigEndian.Uint32(v[:]))}
	}
	v := a.As16()
	return u128{binary.BigEndian.Uint64(v[:8]), binary.BigEndian.Uint64(v[8:])}
}

func (a u128) appendTo(dst []byte, size int) []byte {
	if size == 4 {
		return binary.BigEndian.AppendUint32(dst, uint32(a.lo))
	}
	dst = binary.BigEndian.AppendUint64(dst, a.hi)
	return binary.BigEndian.AppendUint64(dst, a.lo)
}

// prefixSpan is the range a prefix covers in an address space of bits.
func prefixSpan(p netip.Prefix, bits int) span {
	s := span{start: toU128(p.Masked().Addr())}
	if p.Bits() == 0 {
		return span{toMax: true}
	}
	host := uint(bits - p.Bits()) // bits of the host part
	var size u128
	if host >= 64 {
		size.hi = 1 << (host - 64)
	} else {
		size.lo = 1 << host
	}
	lo := s.start.lo + size.lo
	carry := uint64(0)
	if lo < s.start.lo {
		carry = 1
	}
	s.end = u128{s.start.hi + size.hi + carry, lo}
	if bits == 32 {
		s.toMax = s.end.lo > 0xffffffff
	} else {
		s.toMax = s.end == (u128{}) // wrapped past 2^128
	}
	return s
}

// anonSet compiles `FIELD [!=] { a, b/n, ... }` into an anonymous set
// (an interval set when an element is a prefix) and its lookup.
func (c *ruleCompiler) anonSet(f *field, op uint32, items [][]string) error {
	if f.kind != kPayload || f.desc == 0 {
		return c.fail("{", "anonymous sets of this expression are not supported")
	}
	bits := f.t.size * 8
	spans := make([]span, 0, len(items))
	interval := false
	for _, it := range items {
		if len(it) != 1 {
			return c.fail(it[len(it)-1], "want one value per element")
		}
		p, err := netip.ParsePrefix(it[0])
		if err != nil {
			a, aerr := netip.ParseAddr(it[0])
			if aerr != nil {
				return c.fail(it[0], "not a value of type %s", f.t.name)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Is4() != (f.t == tIPv4) {
			return c.fail(it[0], "not a value of type %s", f.t.name)
		}
		if strings.Contains(it[0], "/") {
			// Any prefix, even /32, makes nft build an interval set.
			interval = true
		}
		spans = append(spans, prefixSpan(p, bits))
	}
	s := AnonSet{Set: nft.Set{
		ID: c.newID(), Flags: nft.SetAnonymous | nft.SetConstant,
		KeyType: f.t.id, KeyLen: uint32(f.t.size),
	}}
	size := f.t.size
	open := 0
	if interval {
		s.Set.Flags |= nft.SetInterval
		spans = mergeSpans(spans)
		n := 2 * len(spans)
		if spans[0].start != (u128{}) {
			n++
		}
		keys := c.t.slab.bytes(n * size)
		s.Elems = make([]nft.Elem, 0, n)
		add := func(v u128, flags uint32) {
			keys = v.appendTo(keys, size)
			s.Elems = append(s.Elems, nft.Elem{Key: keys[len(keys)-size : len(keys) : len(keys)], Flags: flags})
		}
		if spans[0].start != (u128{}) {
			add(u128{}, nft.ElemIntervalEnd)
		}
		for _, sp := range spans {
			add(sp.start, 0)
			if !sp.toMax {
				add(sp.end, nft.ElemIntervalEnd)
			}
		}
		if last := spans[len(spans)-1]; last.toMax {
			// The last interval is open: nft marks its start element
			// (NFTNL_UDATA_SET_ELEM_FLAGS, NFTNL_SET_ELEM_F_INTERVAL_OPEN)
			// and counts the end it leaves out in the set's size.
			s.Elems[len(s.Elems)-1].UserData = udU32(nil, 1, 1)
			open = 1
		}
	} else {
		keys := c.t.slab.bytes(len(spans) * size)
		s.Elems = make([]nft.Elem, len(spans))
		for i, sp := range spans {
			keys = sp.start.appendTo(keys, size)
			s.Elems[i].Key = keys[i*size : (i+1)*size : (i+1)*size]
		}
	}
	s.Set.Name = c.t.anonName(anonSetName, s.Set.ID)
	s.Set.Size = uint32(len(s.Elems) + open)
	ud := udU32(c.t.slab.bytes(40), udSetKeyOrder, f.t.order)
	if interval {
		ud = udU32(ud, udSetMerge, 1)
	}
	ud = append(ud, udSetKeyTypeof, 20, 0, 4, 7, 0, 0, 0, 1, 12, 0, 4, f.desc, 0, 0, 0, 1, 4, f.index, 0, 0, 0)
	s.Set.UserData = ud
	c.sets = append(c.sets, s)
	var flags uint32
	if op == cmpNeq {
		flags = lookupInvert
	}
	f.load(c.x, 0, 0)
	c.x.lookup(reg(0), -1, s.Set.Name, s.Set.ID, flags)
	return nil
}

// mergeSpans sorts ranges and joins those that overlap or touch.
func mergeSpans(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int {
		switch {
		case a.start.less(b.start):
			return -1
		case b.start.less(a.start):
			return 1
		}
		return 0
	})
	out := spans[:1]
	for _, s := range spans[1:] {
		last := &out[len(out)-1]
		if last.toMax || !last.end.less(s.start) {
			if s.toMax || last.end.less(s.end) && !last.toMax {
				last.end, last.toMax = s.end, s.toMax
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// anonMap creates an anonymous map keyed by a numgen value, from items
// `N : <data tokens>`; data fills in one element's data.
func (c *ruleCompiler) anonMap(f *field, items [][]string, dataType, dataLen uint32, data func(e *nft.Elem, i int, tok []string) error) (AnonSet, error) {
	s := AnonSet{Set: nft.Set{
		Flags:   nft.SetAnonymous | nft.SetConstant | nft.SetMap,
		KeyType: f.t.id, KeyLen: uint32(f.t.size), DataType: dataType, DataLen: dataLen,
		Size: uint32(len(items)),
	}}
	s.Elems = make([]nft.Elem, len(items))
	keys := c.t.slab.bytes(len(items) * f.t.size)
	for i, it := range items {
		if len(it) < 3 || it[1] != ":" {
			return s, c.fail(it[0], "want KEY : VALUE")
		}
		var err error
		if keys, err = appendValue(keys, f.t, it[0], 0); err != nil {
			return s, c.fail(it[0], "%v", err)
		}
		s.Elems[i].Key = keys[len(keys)-f.t.size : len(keys) : len(keys)]
		if err := data(&s.Elems[i], i, it[2:]); err != nil {
			return s, err
		}
	}
	ud := udU32(c.t.slab.bytes(32), udSetKeyOrder, f.t.order)
	ud = udU32(ud, udSetDataOrder, 0)
	if dataType == nft.DataVerdict {
		ud = udBytes(ud, udSetDataTypeof, verdictTypeof)
	}
	s.Set.UserData = udU32(ud, udSetDataInterval, 0)
	s.Set.ID = c.newID()
	s.Set.Name = c.t.anonName(anonMapName, s.Set.ID)
	c.sets = append(c.sets, s)
	return s, nil
}

// anonVmap compiles `numgen random mod N vmap { 0 : goto a , ... }`.
func (c *ruleCompiler) anonVmap(fs []field) error {
	if len(fs) != 1 || fs[0].kind != kNumgen {
		return c.fail(c.peek(), "anonymous verdict maps are supported on numgen only")
	}
	items, err := c.list()
	if err != nil {
		return err
	}
	s, err := c.anonMap(&fs[0], items, nft.DataVerdict, 0, func(e *nft.Elem, _ int, tok []string) error {
		code, needsChain, ok := verdictCode(tok[0])
		if !ok || needsChain != (len(tok) == 2) || len(tok) > 2 {
			return c.fail(tok[0], "not a verdict")
		}
		v := nft.Verdict{Code: code}
		if needsChain {
			v.Chain = tok[1]
		}
		e.Verdict = c.t.slab.verdict(v)
		return nil
	})
	if err != nil {
		return err
	}
	fs[0].load(c.x, 0, 0)
	c.x.lookup(reg(0), regVerdict, s.Set.Name, s.Set.ID, 0)
	return nil
}
