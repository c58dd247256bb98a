package nftexpr

import (
	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// Netlink attribute numbers of nf_tables expressions (linux/netfilter/
// nf_tables.h) and the constants they carry.
const (
	attrListElem = 1 // NFTA_LIST_ELEM
	attrExprName = 1 // NFTA_EXPR_NAME
	attrExprData = 2 // NFTA_EXPR_DATA

	attrDataValue   = 1 // NFTA_DATA_VALUE
	attrDataVerdict = 2 // NFTA_DATA_VERDICT
	attrVerdictCode = 1 // NFTA_VERDICT_CODE
	attrVerdictName = 2 // NFTA_VERDICT_CHAIN

	regVerdict = 0 // NFT_REG_VERDICT

	baseNetwork   = 1 // NFT_PAYLOAD_NETWORK_HEADER
	baseTransport = 2 // NFT_PAYLOAD_TRANSPORT_HEADER

	cmpEq  = 0 // NFT_CMP_EQ
	cmpNeq = 1 // NFT_CMP_NEQ

	metaMark    = 3  // NFT_META_MARK
	metaIifname = 6  // NFT_META_IIFNAME
	metaOifname = 7  // NFT_META_OIFNAME
	metaL4proto = 16 // NFT_META_L4PROTO

	ctState  = 0  // NFT_CT_STATE
	ctStatus = 2  // NFT_CT_STATUS
	ctSrcIP  = 19 // NFT_CT_SRC_IP
	ctDstIP  = 20 // NFT_CT_DST_IP
	ctSrcIP6 = 21 // NFT_CT_SRC_IP6
	ctDstIP6 = 22 // NFT_CT_DST_IP6

	fibSaddr    = 1 // NFTA_FIB_F_SADDR
	fibDaddr    = 2 // NFTA_FIB_F_DADDR
	fibAddrtype = 3 // NFT_FIB_RESULT_ADDRTYPE

	lookupInvert = 1 // NFT_LOOKUP_F_INV

	natDNAT             = 1    // NFT_NAT_DNAT
	natProtoSpecified   = 0x2  // NF_NAT_RANGE_PROTO_SPECIFIED
	natProtoRandomFully = 0x10 // NF_NAT_RANGE_PROTO_RANDOM_FULLY
	dynsetUpdate        = 1    // NFT_DYNSET_OP_UPDATE
	numgenRandom        = 1    // NFT_NG_RANDOM
	rejectICMPUnreach   = 0    // NFT_REJECT_ICMP_UNREACH
	icmpPortUnreach     = 3    // ICMP_PORT_UNREACH
	icmpv6PortUnreach   = 4    // ICMPV6_PORT_UNREACH
)

// reg converts a register offset in 32-bit words from the first data
// register into the number nft puts on the wire: a 128-bit register
// (NFT_REG_1..4) when the offset is a multiple of four words, a 32-bit one
// (NFT_REG32_00 + offset) otherwise.
func reg(words int) uint32 {
	if words%4 == 0 {
		return uint32(1 + words/4)
	}
	return uint32(8 + words)
}

// exprs appends expressions (NFTA_LIST_ELEM nests) to an encoder.
type exprs struct {
	e nlcore.Encoder
}

func (x *exprs) begin(name string) (int, int) {
	elem := x.e.BeginNest(attrListElem | nlcore.AttrNested)
	x.e.Str(attrExprName, name)
	data := x.e.BeginNest(attrExprData | nlcore.AttrNested)
	return elem, data
}

func (x *exprs) end(elem, data int) {
	x.e.EndNest(data)
	x.e.EndNest(elem)
}

// value appends a nest holding one NFTA_DATA_VALUE.
func (x *exprs) value(typ uint16, v []byte) {
	n := x.e.BeginNest(typ | nlcore.AttrNested)
	x.e.Attr(attrDataValue, v)
	x.e.EndNest(n)
}

func (x *exprs) payload(dreg uint32, base, offset, length uint32) {
	a, b := x.begin("payload")
	x.e.BE32(1, dreg)
	x.e.BE32(2, base)
	x.e.BE32(3, offset)
	x.e.BE32(4, length)
	x.end(a, b)
}

func (x *exprs) metaLoad(dreg, key uint32) {
	a, b := x.begin("meta")
	x.e.BE32(2, key)
	x.e.BE32(1, dreg)
	x.end(a, b)
}

func (x *exprs) metaSet(sreg, key uint32) {
	a, b := x.begin("meta")
	x.e.BE32(2, key)
	x.e.BE32(3, sreg)
	x.end(a, b)
}

// ctLoad loads a conntrack key; dir is 0 (none), 1 (original) or 2
// (reply): the direction plus one, as NFTA_CT_DIRECTION is a u8 0 or 1.
func (x *exprs) ctLoad(dreg, key uint32, dir uint8) {
	a, b := x.begin("ct")
	x.e.BE32(2, key)
	x.e.BE32(1, dreg)
	if dir != 0 {
		x.e.U8(3, dir-1)
	}
	x.end(a, b)
}

func (x *exprs) fib(dreg, flags, result uint32) {
	a, b := x.begin("fib")
	x.e.BE32(3, flags)
	x.e.BE32(2, result)
	x.e.BE32(1, dreg)
	x.end(a, b)
}

func (x *exprs) cmp(sreg, op uint32, v []byte) {
	a, b := x.begin("cmp")
	x.e.BE32(1, sreg)
	x.e.BE32(2, op)
	x.value(3, v)
	x.end(a, b)
}

// bitwise appends a mask-and-xor; withOp adds NFTA_BITWISE_OP (nft sends it
// for statements such as `mark set mark or 0x4000`, not for matches).
func (x *exprs) bitwise(r uint32, mask, xor []byte, withOp bool) {
	a, b := x.begin("bitwise")
	x.e.BE32(1, r)
	x.e.BE32(2, r)
	if withOp {
		x.e.BE32(6, 0) // NFT_BITWISE_BOOL
	}
	x.e.BE32(3, uint32(len(mask)))
	x.value(4, mask)
	x.value(5, xor)
	x.end(a, b)
}

func (x *exprs) immediateData(dreg uint32, v []byte) {
	a, b := x.begin("immediate")
	x.e.BE32(1, dreg)
	x.value(2, v)
	x.end(a, b)
}

func (x *exprs) immediateVerdict(code int32, chain string) {
	a, b := x.begin("immediate")
	x.e.BE32(1, regVerdict)
	verdictData(&x.e, 2, code, chain)
	x.end(a, b)
}

// verdictData appends a nest typ holding NFTA_DATA_VERDICT.
func verdictData(e *nlcore.Encoder, typ uint16, code int32, chain string) {
	d := e.BeginNest(typ | nlcore.AttrNested)
	v := e.BeginNest(attrDataVerdict | nlcore.AttrNested)
	e.BE32(attrVerdictCode, uint32(code))
	if chain != "" {
		e.Str(attrVerdictName, chain)
	}
	e.EndNest(v)
	e.EndNest(d)
}

// lookup appends a set lookup; dreg < 0 means no data register (a set).
func (x *exprs) lookup(sreg uint32, dreg int, set string, id uint32, flags uint32) {
	a, b := x.begin("lookup")
	x.e.BE32(2, sreg)
	if dreg >= 0 {
		x.e.BE32(3, uint32(dreg))
	}
	x.e.Str(1, set)
	if id != 0 {
		x.e.BE32(4, id)
	}
	if flags != 0 {
		x.e.BE32(5, flags)
	}
	x.end(a, b)
}

func (x *exprs) dynsetUpdate(sreg uint32, set string, id uint32) {
	a, b := x.begin("dynset")
	x.e.BE32(4, sreg)
	x.e.BE32(3, dynsetUpdate)
	x.e.Str(1, set)
	if id != 0 {
		x.e.BE32(2, id)
	}
	x.end(a, b)
}

func (x *exprs) numgen(dreg, mod uint32) {
	a, b := x.begin("numgen")
	x.e.BE32(1, dreg)
	x.e.BE32(2, mod)
	x.e.BE32(3, numgenRandom)
	x.e.BE32(4, 0)
	x.end(a, b)
}

// nat appends a dnat; protoReg 0 means no port, flags 0 no flags.
func (x *exprs) nat(family, addrReg, protoReg, flags uint32) {
	a, b := x.begin("nat")
	x.e.BE32(1, natDNAT)
	x.e.BE32(2, family)
	x.e.BE32(3, addrReg)
	if protoReg != 0 {
		x.e.BE32(5, protoReg)
	}
	if flags != 0 {
		x.e.BE32(7, flags)
	}
	x.end(a, b)
}

func (x *exprs) masq(flags uint32) {
	a, b := x.begin("masq")
	if flags != 0 {
		x.e.BE32(1, flags)
	}
	x.end(a, b)
}

func (x *exprs) reject(code uint8) {
	a, b := x.begin("reject")
	x.e.BE32(1, rejectICMPUnreach)
	x.e.U8(2, code)
	x.end(a, b)
}

func (x *exprs) counter() {
	a, b := x.begin("counter")
	x.end(a, b)
}

// objref appends a reference to a named stateful object (counter name "x").
func (x *exprs) objref(typ uint32, name string) {
	a, b := x.begin("objref")
	x.e.BE32(1, typ)
	x.e.Attr(2, []byte(name)) // libnftnl sends this name without a NUL
	x.end(a, b)
}
