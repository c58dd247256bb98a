// Package nft is a client of the kernel's nf_tables over nfnetlink:
// atomic transactions (one batch, one sendmsg, the generation checked),
// dumps of tables, chains, sets, elements and rules, and the ruleset
// generation. Rules and set elements are carried as the kernel encodes
// them (expression lists, key and data bytes); package nftexpr compiles
// nft's rule text into them.
package nft

// Family is an nf_tables address family (NFPROTO_*).
type Family uint8

// The families the sinks use.
const (
	FamilyINet Family = 1  // NFPROTO_INET
	FamilyIPv4 Family = 2  // NFPROTO_IPV4 ("ip")
	FamilyIPv6 Family = 10 // NFPROTO_IPV6 ("ip6")
)

// Table is an nf_tables table.
type Table struct {
	Family Family
	Name   string
	// Flags are NFTA_TABLE_FLAGS (0 for the sinks' tables).
	Flags uint32
	// UserData is NFTA_TABLE_USERDATA as nft writes it (a comment TLV).
	UserData []byte
	// Handle is the kernel's handle (dumps only).
	Handle uint64
}

// Chain is a chain of a table. A base chain has Type, Hook and Priority;
// a regular chain has none.
type Chain struct {
	Name string
	// Type is "filter", "nat" or "route" (base chains only).
	Type string
	// Hook is NF_INET_* (0 prerouting, 1 input, 2 forward, 3 output,
	// 4 postrouting); HasHook tells a base chain.
	Hook    uint32
	HasHook bool
	// Priority is the hook priority (for example -110 for dstnat-10).
	Priority int32
	// Policy is NF_ACCEPT (1) or NF_DROP (0) for base chains.
	Policy uint32
	// UserData is NFTA_CHAIN_USERDATA as nft writes it (a comment TLV).
	UserData []byte
	// Handle is the kernel's handle (dumps only).
	Handle uint64
}

// Verdict is a verdict (NFT_DATA_VERDICT): Code is NF_ACCEPT, NF_DROP,
// NFT_JUMP (-3), NFT_GOTO (-4), NFT_RETURN (-5), NFT_CONTINUE (-1);
// Chain is the target of a jump or goto.
type Verdict struct {
	Code  int32
	Chain string
}

// Set is a set or map of a table. The fields are those of NFT_MSG_NEWSET.
type Set struct {
	Name string
	// ID is NFTA_SET_ID: a number unique within a transaction that rules
	// and elements of the same transaction refer to (anonymous sets are
	// named "__set%d" or "__map%d" and renamed by the kernel).
	ID uint32
	// Flags are NFT_SET_* (ANONYMOUS 0x1, CONSTANT 0x2, INTERVAL 0x4,
	// MAP 0x8, TIMEOUT 0x10, EVAL 0x20, OBJECT 0x40, CONCAT 0x80).
	Flags    uint32
	KeyType  uint32
	KeyLen   uint32
	DataType uint32
	DataLen  uint32
	// Timeout is NFTA_SET_TIMEOUT in milliseconds (0: none).
	Timeout uint64
	// Size is NFTA_SET_DESC_SIZE (0: not sent).
	Size uint32
	// Fields are NFTA_SET_DESC_CONCAT's field lengths (nil: not sent).
	Fields []uint32
	// Policy is NFTA_SET_POLICY; HasPolicy says whether it is sent.
	Policy    uint32
	HasPolicy bool
	// UserData is NFTA_SET_USERDATA as nft writes it (key byte order,
	// typeof expressions, comment).
	UserData []byte
	// Handle is the kernel's handle (dumps only).
	Handle uint64
}

// Elem is an element of a set or map.
type Elem struct {
	// Key is the key's data (NFTA_DATA_VALUE); KeyEnd, when not nil, the
	// end of an interval (NFTA_SET_ELEM_KEY_END).
	Key, KeyEnd []byte
	// Data is a map's data value; Verdict a verdict map's verdict.
	Data    []byte
	Verdict *Verdict
	// Flags are NFT_SET_ELEM_* (INTERVAL_END 0x1).
	Flags uint32
	// Timeout is the element's timeout in milliseconds (0: the set's).
	Timeout uint64
	// UserData is NFTA_SET_ELEM_USERDATA (a comment TLV).
	UserData []byte
}

// Rule is a rule of a chain.
type Rule struct {
	Chain string
	// Exprs is the content of NFTA_RULE_EXPRESSIONS: a sequence of
	// NFTA_LIST_ELEM nests, each an NFTA_EXPR_NAME and NFTA_EXPR_DATA, as
	// the kernel takes and dumps them.
	Exprs []byte
	// UserData is NFTA_RULE_USERDATA as nft writes it (a comment TLV).
	UserData []byte
	// Handle is the kernel's handle (dumps; also the position for a
	// delete).
	Handle uint64
}
