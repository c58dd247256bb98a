package nftexpr

import (
	"strconv"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// field kinds: where a value is loaded from.
const (
	kPayload = iota
	kMeta
	kCt
	kFib
	kNumgen
)

// field is a value a rule loads into a register: `ip daddr`, `meta
// l4proto`, `th dport`, `ct state`, `fib saddr type`, `numgen random mod
// 3`.
type field struct {
	kind         int
	t            *dtype
	base, offset uint32 // payload
	key          uint32 // meta or ct key, fib flags, numgen modulus
	// dir is a ct field's direction plus one (0: none).
	dir uint8
	// proto is the transport protocol a `tcp dport` field needs matched
	// first (0: none).
	proto byte
	// desc and index identify an ip/ip6 header field in the TYPEOF nft
	// records for an anonymous set keyed by it (0: not recorded).
	desc, index byte
}

// load appends the expression that loads f into the register at word
// offset off, with a payload length of n bytes (0: the field's size).
func (f *field) load(x *exprs, off int, n int) {
	if n == 0 {
		n = f.t.size
	}
	r := reg(off)
	switch f.kind {
	case kPayload:
		if f.proto != 0 {
			x.metaLoad(r, metaL4proto)
			x.cmp(r, cmpEq, []byte{f.proto})
		}
		x.payload(r, f.base, f.offset, uint32(n))
	case kMeta:
		x.metaLoad(r, f.key)
	case kCt:
		x.ctLoad(r, f.key, f.dir)
	case kFib:
		x.fib(r, f.key, fibAddrtype)
	case kNumgen:
		x.numgen(r, f.key)
	}
}

// parseField reads a field at the compiler's position; ok is false (and
// nothing consumed) when the tokens there are not a field.
func (c *ruleCompiler) parseField() (field, bool, error) {
	tok := c.peek()
	var f field
	switch tok {
	case "ip", "ip6":
		fam := nft.FamilyIPv4
		f = field{kind: kPayload, t: tIPv4, base: baseNetwork, desc: 12}
		saddr, daddr, sidx, didx := uint32(12), uint32(16), byte(11), byte(12)
		if tok == "ip6" {
			fam = nft.FamilyIPv6
			f.t, f.desc = tIPv6, 13
			saddr, daddr, sidx, didx = 8, 24, 8, 9
		}
		switch c.peekAt(1) {
		case "saddr":
			f.offset, f.index = saddr, sidx
		case "daddr":
			f.offset, f.index = daddr, didx
		default:
			return f, false, nil
		}
		if fam != c.t.family {
			return f, false, c.fail(tok, "%s header field in a table of family %d", tok, c.t.family)
		}
		c.pos += 2
	case "th", "tcp", "udp", "sctp":
		f = field{kind: kPayload, t: tService, base: baseTransport}
		switch c.peekAt(1) {
		case "sport":
		case "dport":
			f.offset = 2
		default:
			return f, false, nil
		}
		if tok != "th" {
			f.proto = protoNames[tok]
		}
		c.pos += 2
	case "meta":
		f, ok := metaField(c.peekAt(1))
		if !ok {
			return f, false, c.fail(c.peekAt(1), "unsupported meta key")
		}
		c.pos += 2
		return f, true, nil
	case "mark", "iifname", "oifname":
		f, _ = metaField(tok)
		c.pos++
	case "ct":
		switch c.peekAt(1) {
		case "original", "reply":
			return c.ctAddrField()
		case "state":
			f = field{kind: kCt, t: tCtState, key: ctState}
		case "status":
			f = field{kind: kCt, t: tCtStatus, key: ctStatus}
		default:
			return f, false, c.fail(c.peekAt(1), "unsupported ct key")
		}
		c.pos += 2
	case "fib":
		f = field{kind: kFib, t: tFibAddr}
		switch c.peekAt(1) {
		case "saddr":
			f.key = fibSaddr
		case "daddr":
			f.key = fibDaddr
		default:
			return f, false, c.fail(c.peekAt(1), "unsupported fib input")
		}
		if c.peekAt(2) != "type" {
			return f, false, c.fail(c.peekAt(2), "unsupported fib result")
		}
		c.pos += 3
	case "numgen":
		if c.peekAt(1) != "random" || c.peekAt(2) != "mod" {
			return f, false, c.fail(c.peekAt(1), "want numgen random mod N")
		}
		n, err := strconv.ParseUint(c.peekAt(3), 10, 32)
		if err != nil || n == 0 {
			return f, false, c.fail(c.peekAt(3), "numgen modulus")
		}
		f = field{kind: kNumgen, t: tInteger, key: uint32(n)}
		c.pos += 4
	default:
		return f, false, nil
	}
	return f, true, nil
}

// ctAddrField reads `ct original|reply ip|ip6 saddr|daddr`.
func (c *ruleCompiler) ctAddrField() (field, bool, error) {
	f := field{kind: kCt, t: tIPv4, dir: 1}
	if c.peekAt(1) == "reply" {
		f.dir = 2
	}
	fam := nft.FamilyIPv4
	switch c.peekAt(2) {
	case "ip":
	case "ip6":
		fam, f.t = nft.FamilyIPv6, tIPv6
	default:
		return f, false, c.fail(c.peekAt(2), "unsupported ct expression")
	}
	if fam != c.t.family {
		return f, false, c.fail(c.peekAt(2), "%s address in a table of family %d", c.peekAt(2), c.t.family)
	}
	switch c.peekAt(3) {
	case "saddr":
		f.key = ctSrcIP
	case "daddr":
		f.key = ctDstIP
	default:
		return f, false, c.fail(c.peekAt(3), "unsupported ct expression")
	}
	if fam == nft.FamilyIPv6 {
		f.key += 2 // NFT_CT_SRC_IP6, NFT_CT_DST_IP6
	}
	c.pos += 4
	return f, true, nil
}

func metaField(key string) (field, bool) {
	switch key {
	case "l4proto":
		return field{kind: kMeta, t: tProto, key: metaL4proto}, true
	case "mark":
		return field{kind: kMeta, t: tMark, key: metaMark}, true
	case "iifname":
		return field{kind: kMeta, t: tIfname, key: metaIifname}, true
	case "oifname":
		return field{kind: kMeta, t: tIfname, key: metaOifname}, true
	}
	return field{}, false
}
