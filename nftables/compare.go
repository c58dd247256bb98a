package nftables

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// kernelTable is a family's table as dumped from the kernel.
type kernelTable struct {
	table  nft.Table
	chains map[string]*kernelChain
	// sets are the named sets and maps; anon the anonymous ones (rules'
	// `{ ... }`), by the name the kernel gave them.
	sets, anon map[string]*kernelSet
}

// kernelChain is a dumped chain and its rules.
type kernelChain struct {
	chain nft.Chain
	rules []nft.Rule
}

// kernelSet is a dumped set and its elements.
type kernelSet struct {
	set   nft.Set
	elems []nft.Elem
	// hash is an anonymous set's content digest (anonHash): from its name
	// when the Proxier named it (its elements are not dumped), else
	// computed from the dumped elements when first needed.
	hash string
}

// compareKernel returns what the kernel's table kt holds in terms of base
// (what the Proxier wrote, or the ruleset wanted compiled whole): the
// chains, sets and elements that are base's as they are, those that
// differ marked dirty (repaired by the next plan), and the kernel's other
// chains, sets and elements listed to be deleted. diffs names every
// difference found.
func compareKernel(kt *kernelTable, base *applied) (out applied, diffs []string) {
	if kt == nil {
		if base.exists {
			diffs = append(diffs, "table missing")
		}
		return applied{}, diffs
	}
	out = applied{exists: true, comment: base.comment, table: base.table}
	if kt.table.Flags != base.table.Flags || !bytes.Equal(kt.table.UserData, base.table.UserData) {
		out.replace = true
		return out, append(diffs, "table definition")
	}
	seen := map[string]bool{}
	for _, bc := range base.chains {
		kc := kt.chains[bc.def.Name]
		if kc == nil {
			diffs = append(diffs, "chain "+bc.def.Name+" missing")
			continue
		}
		seen[bc.def.Name] = true
		if !sameKernelChain(&kc.chain, &bc.chain) {
			out.replace = true
			diffs = append(diffs, "chain "+bc.def.Name+" definition")
		}
		dirty := !sameKernelRules(kt, kc.rules, bc.rules)
		if dirty {
			diffs = append(diffs, "chain "+bc.def.Name+" rules")
		}
		out.chains = append(out.chains, &appliedChain{def: bc.def, chain: bc.chain, rules: bc.rules, dirty: dirty})
	}
	for name := range kt.chains {
		if !seen[name] {
			diffs = append(diffs, "chain "+name+" extra")
			out.chains = append(out.chains, &appliedChain{def: &ruleset.Chain{Name: name}, dirty: true})
		}
	}
	slices.SortFunc(out.chains, func(a, b *appliedChain) int { return cmp.Compare(a.def.Name, b.def.Name) })
	clear(seen)
	for i := range base.sets {
		bs := &base.sets[i]
		ks := kt.sets[bs.def.Name]
		if ks == nil {
			diffs = append(diffs, setLabel(bs.def)+" missing")
			continue
		}
		seen[bs.def.Name] = true
		if !sameKernelSet(&ks.set, &bs.set) {
			out.replace = true
			diffs = append(diffs, setLabel(bs.def)+" definition")
		}
		as, d := compareElements(ks, bs)
		diffs = append(diffs, d...)
		out.sets = append(out.sets, as)
	}
	for name := range kt.sets {
		if !seen[name] {
			diffs = append(diffs, "set "+name+" extra")
			out.sets = append(out.sets, appliedSet{def: &ruleset.Set{Name: name}})
		}
	}
	slices.SortFunc(out.sets, func(a, b appliedSet) int { return cmp.Compare(a.def.Name, b.def.Name) })
	slices.Sort(diffs)
	return out, diffs
}

// compareElements returns the state of base's set given the kernel's
// elements of it. A dynamic set's elements are the packets' (update
// @set), not the Proxier's: they are left alone.
func compareElements(ks *kernelSet, bs *appliedSet) (appliedSet, []string) {
	if slices.Contains(bs.def.Flags, "dynamic") {
		return *bs, nil
	}
	var diffs []string
	byKey := make(map[string]*nft.Elem, len(ks.elems))
	for i := range ks.elems {
		byKey[elemKey(&ks.elems[i])] = &ks.elems[i]
	}
	def := *bs.def
	def.Elements = make([]ruleset.Element, 0, len(bs.def.Elements))
	as := appliedSet{def: &def, set: bs.set, elems: make([]*nft.Elem, 0, len(bs.elems))}
	for i := range bs.elems {
		k := elemKey(bs.elems[i])
		ke := byKey[k]
		if ke == nil {
			diffs = append(diffs, fmt.Sprintf("element %q of %s missing", bs.def.Elements[i].Key, setLabel(bs.def)))
			continue
		}
		delete(byKey, k)
		if !sameElemValue(ke, bs.elems[i]) {
			diffs = append(diffs, fmt.Sprintf("element %q of %s value", bs.def.Elements[i].Key, setLabel(bs.def)))
			if as.dirty == nil {
				as.dirty = map[int]bool{}
			}
			as.dirty[len(def.Elements)] = true
		}
		def.Elements = append(def.Elements, bs.def.Elements[i])
		as.elems = append(as.elems, bs.elems[i])
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		as.stray = append(as.stray, *byKey[k])
	}
	if len(keys) > 0 {
		diffs = append(diffs, fmt.Sprintf("%d extra elements of %s", len(keys), setLabel(bs.def)))
	}
	return as, diffs
}

func elemKey(e *nft.Elem) string {
	return string(e.Key) + "\x00" + string(e.KeyEnd) + fmt.Sprint(e.Flags)
}

func sameElemValue(a, b *nft.Elem) bool {
	if !bytes.Equal(a.Data, b.Data) || !bytes.Equal(a.UserData, b.UserData) || (a.Verdict == nil) != (b.Verdict == nil) {
		return false
	}
	return a.Verdict == nil || *a.Verdict == *b.Verdict
}

// sameKernelChain compares a dumped chain with a compiled one. A base
// chain's policy the compiler left unset is the kernel's accept.
func sameKernelChain(k, c *nft.Chain) bool {
	if k.Type != c.Type || k.HasHook != c.HasHook || k.Hook != c.Hook || k.Priority != c.Priority || !bytes.Equal(k.UserData, c.UserData) {
		return false
	}
	return !c.HasHook || k.Policy == c.Policy || c.Policy == 0 && k.Policy == 1
}

// sameKernelSet compares a dumped set's definition with a compiled one.
func sameKernelSet(k, c *nft.Set) bool {
	return k.Flags == c.Flags && k.KeyType == c.KeyType && k.KeyLen == c.KeyLen && k.DataType == c.DataType &&
		dataLen(k) == dataLen(c) && k.Timeout == c.Timeout && bytes.Equal(k.UserData, c.UserData)
}

// dataLen is a map's data length; a verdict map's is the kernel's (nft
// does not send it).
func dataLen(s *nft.Set) uint32 {
	if s.DataType == nft.DataVerdict {
		return 0
	}
	return s.DataLen
}

// sameKernelRules compares a chain's dumped rules with compiled ones
// (canonRule).
func sameKernelRules(kt *kernelTable, k []nft.Rule, c []compiledRule) bool {
	if len(k) != len(c) {
		return false
	}
	for i := range k {
		if !bytes.Equal(k[i].UserData, c[i].rule.UserData) {
			return false
		}
		kc, err := canonRule(k[i].Exprs, kt.resolve)
		if err != nil {
			return false
		}
		cc, err := canonRule(c[i].rule.Exprs, c[i].resolve)
		if err != nil || kc != cc {
			return false
		}
	}
	return true
}

// resolve names a set a dumped rule refers to: an anonymous set by its
// content's digest, a named one by its name.
func (kt *kernelTable) resolve(name string, _ uint32, _ bool) string {
	if s := kt.anon[name]; s != nil {
		if s.hash == "" {
			s.hash = anonHash(&s.set, s.elems)
		}
		return "{" + s.hash + "}"
	}
	return "@" + name
}

// resolve names a set a compiled rule refers to: one it creates by its
// content's digest, another by its name.
func (r *compiledRule) resolve(name string, id uint32, hasID bool) string {
	if hasID {
		for i := range r.anon {
			if a := &r.anon[i]; a.set.ID == id {
				if a.hash == "" {
					a.hash = anonHash(&a.set, a.elems)
				}
				return "{" + a.hash + "}"
			}
		}
	}
	return "@" + name
}

// canonSet is an anonymous set's content in a form that does not depend
// on its name, ID or element order.
func canonSet(s *nft.Set, elems []nft.Elem) string {
	l := make([]string, len(elems))
	for i := range elems {
		e := &elems[i]
		v := ""
		if e.Verdict != nil {
			v = fmt.Sprintf("%d:%s", e.Verdict.Code, e.Verdict.Chain)
		}
		l[i] = fmt.Sprintf("%x-%x-%x-%s-%d", e.Key, e.KeyEnd, e.Data, v, e.Flags)
	}
	slices.Sort(l)
	return fmt.Sprintf("{%#x %d/%d %d/%d %s}", s.Flags, s.KeyType, s.KeyLen, s.DataType, dataLen(s), strings.Join(l, ","))
}

// Expression attributes canonRule interprets (linux/netfilter/nf_tables.h).
const (
	nftaListElem  = 1 // NFTA_LIST_ELEM
	nftaExprName  = 1 // NFTA_EXPR_NAME
	nftaExprData  = 2 // NFTA_EXPR_DATA
	nftaLookupSet = 1 // NFTA_LOOKUP_SET
	nftaLookupID  = 4 // NFTA_LOOKUP_SET_ID
	nftaDynsetSet = 1 // NFTA_DYNSET_SET_NAME
	nftaDynsetID  = 2 // NFTA_DYNSET_SET_ID
	nlaTypeMask   = 0x3fff
	nlaNested     = 0x8000
)

// canonRule returns a rule's expressions in a form that is the same for
// the bytes nft sends and the bytes the kernel dumps of the rule:
// attributes sorted by type, counters' values dropped, and the sets
// lookups and dynsets refer to named by resolve (anonymous sets have
// different names and IDs in the two).
func canonRule(exprs []byte, resolve func(name string, id uint32, hasID bool) string) (string, error) {
	list, err := parseAttrs(exprs)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, le := range list {
		if le.typ != nftaListElem {
			return "", fmt.Errorf("unexpected attribute %d in a rule's expressions", le.typ)
		}
		parts, err := parseAttrs(le.data)
		if err != nil {
			return "", err
		}
		var name string
		var data []byte
		for _, a := range parts {
			switch a.typ {
			case nftaExprName:
				name = strings.TrimRight(string(a.data), "\x00")
			case nftaExprData:
				data = a.data
			}
		}
		b.WriteString("[" + name)
		if name == "counter" {
			b.WriteString("]")
			continue
		}
		attrs, err := parseAttrs(data)
		if err != nil {
			return "", fmt.Errorf("expression %s: %w", name, err)
		}
		setAttr, idAttr := uint16(0), uint16(0)
		switch name {
		case "lookup":
			setAttr, idAttr = nftaLookupSet, nftaLookupID
		case "dynset":
			setAttr, idAttr = nftaDynsetSet, nftaDynsetID
		}
		var set string
		var id uint32
		hasID := false
		kept := attrs[:0]
		for _, a := range attrs {
			switch {
			case setAttr != 0 && a.typ == setAttr:
				set = strings.TrimRight(string(a.data), "\x00")
			case idAttr != 0 && a.typ == idAttr && len(a.data) == 4:
				id, hasID = binary.BigEndian.Uint32(a.data), true
			default:
				kept = append(kept, a)
			}
		}
		if setAttr != 0 {
			b.WriteString(" set=" + resolve(set, id, hasID))
		}
		if name == "nat" {
			kept = canonNat(kept)
		}
		canonAttrs(&b, kept)
		b.WriteString("]")
	}
	return b.String(), nil
}

// canonAttrs writes attributes sorted by type. An attribute whose value
// is all zeros is left out (the kernel dumps some optional attributes nft
// does not send, with their default, zero, value), and one whose value
// parses as attributes is written as them, recursively: the kernel dumps
// nests without the NLA_F_NESTED flag nft sets.
func canonAttrs(b *strings.Builder, attrs []attr) {
	slices.SortStableFunc(attrs, func(x, y attr) int { return cmp.Compare(x.typ, y.typ) })
	for _, a := range attrs {
		if isZero(a.data) {
			continue
		}
		fmt.Fprintf(b, " %d=", a.typ)
		if inner, err := parseAttrs(a.data); err == nil && len(inner) > 0 {
			b.WriteString("(")
			canonAttrs(b, inner)
			b.WriteString(")")
			continue
		}
		b.WriteString(hex.EncodeToString(a.data))
	}
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// NAT expression attributes (NFTA_NAT_*) and range flags (NF_NAT_RANGE_*).
const (
	nftaNatRegAddrMin  = 3
	nftaNatRegAddrMax  = 4
	nftaNatRegProtoMin = 5
	nftaNatRegProtoMax = 6
	nftaNatFlags       = 7
	natRangeMapIPs     = 0x1
	natRangeProtoSpec  = 0x2
)

// canonNat completes a nat expression's attributes as the kernel dumps
// them: a range's maximum register is its minimum's when not given, and
// the flags say which ranges are given.
func canonNat(attrs []attr) []attr {
	byType := map[uint16][]byte{}
	for _, a := range attrs {
		byType[a.typ] = a.data
	}
	var flags uint32
	if f, ok := byType[nftaNatFlags]; ok && len(f) == 4 {
		flags = binary.BigEndian.Uint32(f)
	}
	if m, ok := byType[nftaNatRegAddrMin]; ok {
		flags |= natRangeMapIPs
		if _, ok := byType[nftaNatRegAddrMax]; !ok {
			byType[nftaNatRegAddrMax] = m
		}
	}
	if m, ok := byType[nftaNatRegProtoMin]; ok {
		flags |= natRangeProtoSpec
		if _, ok := byType[nftaNatRegProtoMax]; !ok {
			byType[nftaNatRegProtoMax] = m
		}
	}
	byType[nftaNatFlags] = binary.BigEndian.AppendUint32(nil, flags)
	out := make([]attr, 0, len(byType))
	for t, d := range byType {
		out = append(out, attr{typ: t, data: d})
	}
	return out
}

// attr is one netlink attribute.
type attr struct {
	typ    uint16
	nested bool
	data   []byte
}

// parseAttrs splits netlink attributes (host byte order headers).
func parseAttrs(b []byte) ([]attr, error) {
	var out []attr
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("truncated attribute header (%d bytes)", len(b))
		}
		l := int(binary.NativeEndian.Uint16(b))
		t := binary.NativeEndian.Uint16(b[2:])
		if l < 4 || l > len(b) {
			return nil, fmt.Errorf("attribute %d of length %d in %d bytes", t&nlaTypeMask, l, len(b))
		}
		out = append(out, attr{typ: t & nlaTypeMask, nested: t&nlaNested != 0, data: b[4:l]})
		b = b[min((l+3)&^3, len(b)):]
	}
	return out, nil
}
