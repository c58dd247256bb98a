package nftexpr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// dtype is one of nft's data types: its id (nft's TYPE_*), its size in
// bytes and its byte order (nft's BYTEORDER_HOST_ENDIAN 1, BIG_ENDIAN 2).
type dtype struct {
	name  string
	id    uint32
	size  int
	order uint32
}

const (
	orderHost = 1
	orderBig  = 2

	typeVerdict = 1 // TYPE_VERDICT

)

// The data types kube-proxy's rules and sets use.
var (
	tInteger    = &dtype{"integer", 4, 4, orderHost}
	tIPv4       = &dtype{"ipv4_addr", 7, 4, orderBig}
	tIPv6       = &dtype{"ipv6_addr", 8, 16, orderBig}
	tProto      = &dtype{"inet_proto", 12, 1, orderBig}
	tService    = &dtype{"inet_service", 13, 2, orderBig}
	tMark       = &dtype{"mark", 19, 4, orderHost}
	tIfname     = &dtype{"ifname", 41, 16, orderHost}
	tCtState    = &dtype{"ct_state", 26, 4, orderHost}
	tCtStatus   = &dtype{"ct_status", 27, 4, orderHost}
	tFibAddr    = &dtype{"fib_addrtype", 44, 4, orderHost}
	typesByName = map[string]*dtype{}
)

func init() {
	for _, t := range []*dtype{tInteger, tIPv4, tIPv6, tProto, tService, tMark, tIfname} {
		typesByName[t.name] = t
	}
}

// words is the size of t in 32-bit registers.
func (t *dtype) words() int { return (t.size + 3) / 4 }

// Symbolic values of the types that have them.
var (
	protoNames = map[string]byte{"tcp": 6, "udp": 17, "sctp": 132, "icmp": 1, "icmpv6": 58}
	ctStates   = map[string]uint32{"invalid": 1, "established": 2, "related": 4, "new": 8, "untracked": 64}
	ctStatuses = map[string]uint32{"expected": 1, "seen-reply": 2, "assured": 4, "confirmed": 8, "snat": 16, "dnat": 32, "dying": 512}
	fibTypes   = map[string]uint32{"unspec": 0, "unicast": 1, "local": 2, "broadcast": 3, "anycast": 4, "multicast": 5, "blackhole": 6, "unreachable": 7, "prohibit": 8}
)

var errValue = errors.New("not a value of the type")

// appendValue appends the value text s of type t, zero-padded to pad
// bytes (t.size when pad is 0).
func appendValue(dst []byte, t *dtype, s string, pad int) ([]byte, error) {
	start := len(dst)
	switch t {
	case tIPv4, tIPv6:
		a, err := netip.ParseAddr(s)
		if err != nil || a.Is4() != (t == tIPv4) {
			return dst, fmt.Errorf("%q is not an %s", s, t.name)
		}
		if a.Is4() {
			v := a.As4()
			dst = append(dst, v[:]...)
		} else {
			v := a.As16()
			dst = append(dst, v[:]...)
		}
	case tProto:
		p, ok := protoNames[s]
		if !ok {
			n, err := strconv.ParseUint(s, 10, 8)
			if err != nil {
				return dst, fmt.Errorf("%q is not an inet_proto", s)
			}
			p = byte(n)
		}
		dst = append(dst, p)
	case tService:
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return dst, fmt.Errorf("%q is not an inet_service", s)
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	case tMark, tInteger:
		n, err := strconv.ParseUint(s, 0, 32)
		if err != nil {
			return dst, fmt.Errorf("%q is not a %s", s, t.name)
		}
		dst = binary.NativeEndian.AppendUint32(dst, uint32(n))
	case tIfname:
		s = strings.Trim(s, `"`)
		if len(s) >= 16 || s == "" {
			return dst, fmt.Errorf("%q is not an interface name", s)
		}
		dst = append(dst, s...)
		for len(dst)-start < 16 {
			dst = append(dst, 0)
		}
	case tCtState, tCtStatus, tFibAddr:
		table := map[*dtype]map[string]uint32{tCtState: ctStates, tCtStatus: ctStatuses, tFibAddr: fibTypes}[t]
		v, ok := table[s]
		if !ok {
			return dst, fmt.Errorf("%q is not a %s", s, t.name)
		}
		dst = binary.NativeEndian.AppendUint32(dst, v)
	default:
		return dst, fmt.Errorf("type %s: %w", t.name, errValue)
	}
	if pad == 0 {
		pad = t.size
	}
	for len(dst)-start < pad {
		dst = append(dst, 0)
	}
	return dst, nil
}

// keyType is a set's key or a map's data type: one type or a
// concatenation.
type keyType struct {
	fields []*dtype
}

// parseKeyType reads `ipv4_addr . inet_proto . inet_service`.
func parseKeyType(s string) (keyType, error) {
	var k keyType
	for _, f := range strings.Split(s, " . ") {
		t, ok := typesByName[strings.TrimSpace(f)]
		if !ok {
			return k, fmt.Errorf("unknown type %q", strings.TrimSpace(f))
		}
		k.fields = append(k.fields, t)
	}
	return k, nil
}

// id is nft's type id: concatenations shift each field's id in by 6 bits.
func (k keyType) id() uint32 {
	var id uint32
	for _, f := range k.fields {
		id = id<<6 | f.id
	}
	return id
}

// len is the key length: one type's size, or the fields rounded to 32-bit
// registers for a concatenation.
func (k keyType) len() int {
	if len(k.fields) == 1 {
		return k.fields[0].size
	}
	n := 0
	for _, f := range k.fields {
		n += 4 * f.words()
	}
	return n
}

func (k keyType) concat() bool { return len(k.fields) > 1 }

// order is the byte order nft records in the set's USERDATA (0 for a
// concatenation).
func (k keyType) order() uint32 {
	if k.concat() {
		return 0
	}
	return k.fields[0].order
}

// String prints the type as nft writes it.
func (k keyType) String() string {
	names := make([]string, len(k.fields))
	for i, f := range k.fields {
		names[i] = f.name
	}
	return strings.Join(names, " . ")
}

// appendKey appends a key text (`10.96.0.10 . tcp . 80`) of type k:
// fields padded to 32-bit registers in a concatenation.
func appendKey(dst []byte, k keyType, s string) ([]byte, error) {
	for i, f := range k.fields {
		var part string
		if i == len(k.fields)-1 {
			part = s
		} else {
			j := strings.Index(s, " . ")
			if j < 0 {
				return dst, fmt.Errorf("%d fields, want %d (%s)", i+1, len(k.fields), k)
			}
			part, s = s[:j], s[j+3:]
		}
		pad := 0
		if k.concat() {
			pad = 4 * f.words()
		}
		var err error
		if dst, err = appendValue(dst, f, strings.TrimSpace(part), pad); err != nil {
			return dst, err
		}
	}
	return dst, nil
}
