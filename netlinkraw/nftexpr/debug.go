package nftexpr

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// The debug printer writes compiled objects the way `nft --debug=netlink`
// prints what it sends (libnftnl's debug format), so that the two can be
// compared line by line; it is also a way to read compiled bytes.

// familyName is nft's name of a family.
func familyName(f nft.Family) string {
	switch f {
	case nft.FamilyIPv4:
		return "ip"
	case nft.FamilyIPv6:
		return "ip6"
	case nft.FamilyINet:
		return "inet"
	}
	return fmt.Sprintf("family%d", f)
}

// FormatRule writes a rule: a header line, one line per expression, and
// its USERDATA.
func FormatRule(w io.Writer, family nft.Family, table string, r nft.Rule) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s\n", familyName(family), table, r.Chain)
	err := nlcore.ForEachAttr(r.Exprs, func(_ uint16, v []byte) error {
		var name string
		var data []byte
		err := nlcore.ForEachAttr(v, func(typ uint16, v []byte) error {
			switch typ {
			case attrExprName:
				name = nlcore.GetString(v)
			case attrExprData:
				data = v
			}
			return nil
		})
		if err != nil {
			return err
		}
		line, err := formatExpr(name, data)
		if err != nil {
			return fmt.Errorf("expression %s: %w", name, err)
		}
		fmt.Fprintf(&b, "  [ %s ]\n", line)
		return nil
	})
	if err != nil {
		return fmt.Errorf("nftexpr: format rule of %s: %w", r.Chain, err)
	}
	if r.UserData != nil {
		fmt.Fprintf(&b, "  userdata = { %s }\n", escape(r.UserData))
	} else {
		b.WriteString("\n")
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// escape prints bytes as libnftnl does: printable ASCII as is, the rest
// as \xNN.
func escape(v []byte) string {
	var b strings.Builder
	for _, c := range v {
		if c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "\\x%02x", c)
		}
	}
	return b.String()
}

// words prints data as host-order 32-bit words, the last one zero-padded.
func words(v []byte, sep string) string {
	var b strings.Builder
	for i := 0; i < len(v); i += 4 {
		var w [4]byte
		copy(w[:], v[i:])
		if i > 0 {
			b.WriteString(sep)
		}
		fmt.Fprintf(&b, "0x%08x", binary.NativeEndian.Uint32(w[:]))
	}
	return b.String()
}

// attrs maps an expression's attributes by type (nested ones raw).
type attrs map[uint16][]byte

func (a attrs) u32(typ uint16) uint32 {
	v := a[typ]
	if len(v) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

func (a attrs) has(typ uint16) bool { _, ok := a[typ]; return ok }

// value returns the NFTA_DATA_VALUE inside the nest typ.
func (a attrs) value(typ uint16) []byte {
	v, _, _ := nlcore.FindAttr(a[typ], attrDataValue)
	return v
}

var (
	payloadBases = []string{"link", "network", "transport", "inner"}
	cmpOps       = []string{"eq", "neq", "lt", "lte", "gt", "gte"}
	metaKeys     = map[uint32]string{0: "len", 1: "protocol", 2: "priority", 3: "mark", 4: "iif", 5: "oif", 6: "iifname", 7: "oifname", 8: "iiftype", 9: "oiftype", 15: "nfproto", 16: "l4proto"}
	ctKeys       = map[uint32]string{0: "state", 1: "direction", 2: "status", 3: "mark", 19: "src_ip", 20: "dst_ip", 21: "src_ip6", 22: "dst_ip6"}
)

func formatExpr(name string, data []byte) (string, error) {
	a := attrs{}
	if err := nlcore.ForEachAttr(data, func(typ uint16, v []byte) error { a[typ] = v; return nil }); err != nil {
		return "", err
	}
	switch name {
	case "payload":
		return fmt.Sprintf("payload load %db @ %s header + %d => reg %d", a.u32(4), pick(payloadBases, a.u32(2)), a.u32(3), a.u32(1)), nil
	case "meta":
		if a.has(3) {
			return fmt.Sprintf("meta set %s with reg %d", metaKeys[a.u32(2)], a.u32(3)), nil
		}
		return fmt.Sprintf("meta load %s => reg %d", metaKeys[a.u32(2)], a.u32(1)), nil
	case "ct":
		s := fmt.Sprintf("ct load %s => reg %d", ctKeys[a.u32(2)], a.u32(1))
		if d, ok := a[3]; ok && len(d) > 0 {
			s += " , dir " + pick([]string{"original", "reply"}, uint32(d[0]))
		}
		return s, nil
	case "cmp":
		return fmt.Sprintf("cmp %s reg %d %s", pick(cmpOps, a.u32(2)), a.u32(1), words(a.value(3), " ")), nil
	case "bitwise":
		return fmt.Sprintf("bitwise reg %d = ( reg %d & %s ) ^ %s", a.u32(2), a.u32(1), words(a.value(4), " "), words(a.value(5), " ")), nil
	case "immediate":
		if v, ok, _ := nlcore.FindAttr(a[2], attrDataVerdict); ok {
			return fmt.Sprintf("immediate reg %d %s", a.u32(1), formatVerdict(v)), nil
		}
		return fmt.Sprintf("immediate reg %d %s", a.u32(1), words(a.value(2), " ")), nil
	case "reject":
		code := byte(0)
		if v := a[2]; len(v) > 0 {
			code = v[0]
		}
		return fmt.Sprintf("reject type %d code %d", a.u32(1), code), nil
	case "lookup":
		s := fmt.Sprintf("lookup reg %d set %s ", a.u32(2), nlcore.GetString(a[1]))
		if a.has(3) {
			s += fmt.Sprintf("dreg %d ", a.u32(3))
		}
		if f := a.u32(5); f != 0 {
			s += fmt.Sprintf("0x%x ", f)
		}
		return strings.TrimSuffix(s, " "), nil
	case "fib":
		return fmt.Sprintf("fib %s%s => reg %d", fibFlags(a.u32(3)), map[uint32]string{1: "oif", 2: "oifname", 3: "type"}[a.u32(2)], a.u32(1)), nil
	case "numgen":
		s := fmt.Sprintf("numgen reg %d = %s mod %d", a.u32(1), map[uint32]string{0: "inc", 1: "random"}[a.u32(3)], a.u32(2))
		if o := a.u32(4); o != 0 {
			s += fmt.Sprintf(" offset %d", o)
		}
		return s, nil
	case "nat":
		return formatNat(a), nil
	case "masq":
		if a.has(1) {
			return fmt.Sprintf("masq flags 0x%x", a.u32(1)), nil
		}
		return "masq", nil
	case "dynset":
		return fmt.Sprintf("dynset %s reg_key %d set %s", map[uint32]string{0: "add", 1: "update", 2: "delete"}[a.u32(3)], a.u32(4), nlcore.GetString(a[1])), nil
	case "counter":
		return "counter pkts 0 bytes 0", nil
	case "objref":
		return fmt.Sprintf("objref type %d name %s", a.u32(1), nlcore.GetString(a[2])), nil
	}
	return "", fmt.Errorf("unknown expression")
}

func pick(names []string, i uint32) string {
	if int(i) < len(names) {
		return names[i]
	}
	return fmt.Sprint(i)
}

func fibFlags(f uint32) string {
	var s string
	for i, n := range []string{"saddr", "daddr", "mark", "iif", "oif", "present"} {
		if f&(1<<i) != 0 {
			s += n + " "
		}
	}
	return s
}

func formatNat(a attrs) string {
	s := "nat " + map[uint32]string{0: "snat", 1: "dnat"}[a.u32(1)] + " " + familyName(nft.Family(a.u32(2)))
	for _, f := range []struct {
		typ  uint16
		name string
	}{{3, "addr_min"}, {4, "addr_max"}, {5, "proto_min"}, {6, "proto_max"}} {
		if a.has(f.typ) {
			s += fmt.Sprintf(" %s reg %d", f.name, a.u32(f.typ))
		}
	}
	if a.has(7) {
		s += fmt.Sprintf(" flags 0x%x", a.u32(7))
	}
	return s
}

// formatVerdict prints an NFTA_DATA_VERDICT nest's content.
func formatVerdict(v []byte) string {
	var code uint32
	var chain string
	_ = nlcore.ForEachAttr(v, func(typ uint16, v []byte) error {
		switch typ {
		case attrVerdictCode:
			if len(v) >= 4 {
				code = binary.BigEndian.Uint32(v)
			}
		case attrVerdictName:
			chain = nlcore.GetString(v)
		}
		return nil
	})
	return verdictString(int32(code), chain)
}

func verdictString(code int32, chain string) string {
	switch code {
	case nft.VerdictDrop:
		return "drop"
	case nft.VerdictAccept:
		return "accept"
	case nft.VerdictContinue:
		return "continue"
	case nft.VerdictReturn:
		return "return"
	case nft.VerdictJump:
		return "jump -> " + chain
	case nft.VerdictGoto:
		return "goto -> " + chain
	}
	return fmt.Sprint(code)
}

// FormatSet writes a set's definition line.
func FormatSet(w io.Writer, table string, s nft.Set) error {
	line := fmt.Sprintf("%s %s %x", s.Name, table, s.Flags)
	if s.Timeout != 0 {
		line += fmt.Sprintf(" timeout %dms", s.Timeout)
	}
	if s.Size != 0 {
		line += fmt.Sprintf(" size %d", s.Size)
	}
	_, err := io.WriteString(w, line+"\n")
	return err
}

// FormatElems writes a set's elements as one block.
func FormatElems(w io.Writer, table, set string, elems []nft.Elem) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s 0\n", set, table)
	for _, e := range elems {
		b.WriteString("\telement ")
		b.WriteString(hexWords(e.Key))
		if e.KeyEnd != nil {
			b.WriteString(" - ")
			b.WriteString(hexWords(e.KeyEnd))
		}
		b.WriteString(" : ")
		switch {
		case e.Verdict != nil:
			b.WriteString(verdictString(e.Verdict.Code, e.Verdict.Chain) + " ")
		case e.Data != nil:
			b.WriteString(hexWords(e.Data))
		}
		fmt.Fprintf(&b, "%d [end]", e.Flags)
		if e.UserData != nil {
			fmt.Fprintf(&b, "  userdata = { %s }", escape(e.UserData))
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// hexWords prints data as %.8x words, each followed by a space.
func hexWords(v []byte) string {
	var b strings.Builder
	for i := 0; i < len(v); i += 4 {
		var w [4]byte
		copy(w[:], v[i:])
		fmt.Fprintf(&b, "%.8x ", binary.NativeEndian.Uint32(w[:]))
	}
	return b.String()
}

// FormatChain writes a chain's line as nft's check mode prints it (without
// table and chain names, which it does not print either).
func FormatChain(w io.Writer, family nft.Family, c nft.Chain) error {
	line := fmt.Sprintf("%s (null) (null) use 0", familyName(family))
	if c.HasHook {
		hook := "unknown"
		for n, h := range hooks {
			if h == c.Hook {
				hook = n
			}
		}
		line += fmt.Sprintf(" type %s hook %s prio %d packets 0 bytes 0", c.Type, hook, c.Priority)
	}
	_, err := io.WriteString(w, line+"\n")
	return err
}
