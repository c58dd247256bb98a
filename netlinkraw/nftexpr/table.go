package nftexpr

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// Set USERDATA TLV types (libnftnl's NFTNL_UDATA_SET_*).
const (
	udSetKeyOrder     = 0
	udSetDataOrder    = 1
	udSetMerge        = 2
	udSetKeyTypeof    = 3
	udSetDataTypeof   = 4
	udSetDataInterval = 6
	udSetComment      = 7
	udComment         = 0 // NFTNL_UDATA_{RULE,CHAIN,TABLE,SET_ELEM}_COMMENT
)

// Table is the compile context of one table: its family and its named
// sets and maps. A Table is not safe for concurrent use; its methods reuse
// scratch buffers.
type Table struct {
	family nft.Family
	sets   map[string]*namedSet
	// types caches parsed type texts (thousands of affinity sets share
	// one).
	types map[string]keyType
	// anonPrefix, when not "", names anonymous sets (NameAnonymous).
	anonPrefix string
	scratch
}

// namedSet is what rules and elements need to know of a set or map.
type namedSet struct {
	name     string
	id       uint32
	key      keyType
	data     keyType // maps with data other than verdicts
	verdict  bool    // verdict maps
	interval bool
}

// NewTable returns the context of a table of family FamilyIPv4 or
// FamilyIPv6.
func NewTable(family nft.Family) (*Table, error) {
	if family != nft.FamilyIPv4 && family != nft.FamilyIPv6 {
		return nil, fmt.Errorf("nftexpr: family %d: only ip and ip6 tables are supported", family)
	}
	t := &Table{family: family, sets: map[string]*namedSet{}, types: map[string]keyType{}}
	t.val = make([]byte, 0, 64) // the longest value is 16 bytes
	return t, nil
}

// Family returns the table's family.
func (t *Table) Family() nft.Family { return t.family }

// SetDef is a set or map definition in nft's words, as `nft -f` reads it:
// `set NAME { type TYPE ; flags FLAGS ; timeout T ; comment "C" ; }`.
type SetDef struct {
	Name string
	// Type is the key type, with ": <type>" for a map
	// ("ipv4_addr . inet_proto . inet_service : verdict").
	Type string
	// Flags are nft's set flags: "dynamic", "timeout", "interval",
	// "constant".
	Flags []string
	// Timeout is the default element timeout (0: none).
	Timeout time.Duration
	Comment string
}

// AddSet compiles a set or map definition into the NFT_MSG_NEWSET object
// nft sends, and records it in the table for the rules and elements that
// use it. id is the transaction's set ID to put in the set and in every
// rule or element referring to it; 0 leaves it out (the kernel finds a
// named set by its name).
func (t *Table) AddSet(def SetDef, id uint32) (nft.Set, error) {
	s, ns, err := t.compileSet(def, id)
	if err != nil {
		return nft.Set{}, fmt.Errorf("nftexpr: set %s: %w", def.Name, err)
	}
	t.sets[def.Name] = ns
	return s, nil
}

// SetID changes the ID under which later rules and elements refer to a
// set (0: by name only), for a set created in another transaction.
func (t *Table) SetID(name string, id uint32) error {
	s, ok := t.sets[name]
	if !ok {
		return fmt.Errorf("nftexpr: set %s: not defined in the table", name)
	}
	s.id = id
	return nil
}

func (t *Table) keyType(s string) (keyType, error) {
	if k, ok := t.types[s]; ok {
		return k, nil
	}
	k, err := parseKeyType(s)
	if err == nil {
		t.types[s] = k
	}
	return k, err
}

func (t *Table) compileSet(def SetDef, id uint32) (nft.Set, *namedSet, error) {
	ns := &namedSet{name: def.Name, id: id}
	s := nft.Set{Name: def.Name, ID: id}
	keyText, dataText, isMap := strings.Cut(def.Type, ":")
	var err error
	if ns.key, err = t.keyType(strings.TrimSpace(keyText)); err != nil {
		return s, nil, err
	}
	s.KeyType, s.KeyLen = ns.key.id(), uint32(ns.key.len())
	if isMap {
		s.Flags |= nft.SetMap
		if dataText = strings.TrimSpace(dataText); dataText == "verdict" {
			ns.verdict = true
			s.DataType = nft.DataVerdict
		} else {
			if ns.data, err = t.keyType(dataText); err != nil {
				return s, nil, err
			}
			s.DataType, s.DataLen = ns.data.id(), uint32(ns.data.len())
		}
	}
	for _, f := range def.Flags {
		switch f {
		case "dynamic":
			s.Flags |= nft.SetEval
		case "timeout":
			s.Flags |= nft.SetTimeout
		case "interval":
			s.Flags |= nft.SetInterval
			ns.interval = true
		case "constant":
			s.Flags |= nft.SetConstant
		default:
			return s, nil, fmt.Errorf("unknown flag %q", f)
		}
	}
	if def.Timeout > 0 {
		s.Flags |= nft.SetTimeout
		s.Timeout = uint64(def.Timeout / time.Millisecond)
	}
	if ns.interval && ns.key.concat() {
		s.Flags |= nft.SetConcat
		for _, f := range ns.key.fields {
			s.Fields = append(s.Fields, uint32(f.size))
		}
	}
	s.UserData = namedSetUserData(ns, def.Comment)
	return s, ns, nil
}

// concatTypeof is the key (or data) TYPEOF nft records for a set declared
// with a concatenation of types: an expression of type concat (13) and no
// data.
var concatTypeof = []byte{0, 4, 13, 0, 0, 0, 1, 0}

func namedSetUserData(ns *namedSet, comment string) []byte {
	var b []byte
	b = udU32(b, udSetKeyOrder, ns.key.order())
	isMap := ns.verdict || ns.data.fields != nil
	if isMap {
		b = udU32(b, udSetDataOrder, ns.data.orderOrZero())
	}
	if ns.key.concat() {
		b = udBytes(b, udSetKeyTypeof, concatTypeof)
	}
	if isMap {
		b = udU32(b, udSetDataInterval, 0)
	}
	if comment != "" {
		b = udString(b, udSetComment, comment)
	}
	return b
}

func (k keyType) orderOrZero() uint32 {
	if k.fields == nil {
		return 0
	}
	return k.order()
}

// udU32 appends a USERDATA TLV holding a host-order u32.
func udU32(b []byte, typ byte, v uint32) []byte {
	return append(b, typ, 4, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

func udBytes(b []byte, typ byte, v []byte) []byte {
	b = append(b, typ, byte(len(v)))
	return append(b, v...)
}

// udString appends a NUL-terminated string TLV (a comment).
func udString(b []byte, typ byte, s string) []byte {
	b = append(b, typ, byte(len(s)+1))
	b = append(b, s...)
	return append(b, 0)
}

// NameAnonymous makes the table's rules name the anonymous sets and maps
// they create themselves: "__set" or "__map", then prefix, then the set's
// ID ("__mapp42"), instead of nft's "__set%d", for which the kernel picks
// a number by scanning every set of the table (a transaction of n
// anonymous sets then costs O(n²)). prefix must start with a letter, so
// that the kernel's own "__set%d" never matches such a name; "" restores
// nft's names.
func (t *Table) NameAnonymous(prefix string) error {
	if prefix != "" && (prefix[0] < 'a' || prefix[0] > 'z') && (prefix[0] < 'A' || prefix[0] > 'Z') {
		return fmt.Errorf("nftexpr: anonymous set name prefix %q does not start with a letter", prefix)
	}
	t.anonPrefix = prefix
	return nil
}

// anonName is the name of the anonymous set id: nft's pattern, or one of
// the table's own.
func (t *Table) anonName(pattern string, id uint32) string {
	if t.anonPrefix == "" {
		return pattern
	}
	return strings.TrimSuffix(pattern, "%d") + t.anonPrefix + strconv.FormatUint(uint64(id), 10)
}

// TableObject returns the table nft creates for `table FAMILY NAME {
// comment "COMMENT" }`.
func TableObject(family nft.Family, name, comment string) (nft.Table, error) {
	if len(comment) > maxComment {
		return nft.Table{}, fmt.Errorf("nftexpr: table %s: comment longer than %d bytes", name, maxComment)
	}
	return nft.Table{Family: family, Name: name, UserData: Comment(comment)}, nil
}

// Comment returns the USERDATA nft writes for a table's, chain's or rule's
// comment (nil for none).
func Comment(comment string) []byte {
	if comment == "" {
		return nil
	}
	return udString(make([]byte, 0, len(comment)+3), udComment, comment)
}
