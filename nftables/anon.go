package nftables

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Anonymous sets get names of their own. nft sends an anonymous set
// named "__set%d" or "__map%d" and the kernel picks the number: it scans
// every set of the table (an sscanf each) for every such set it creates,
// which makes a transaction of n anonymous sets (kube-proxy's numgen map
// in each service chain) cost O(n²) - 10 s of kernel time for 10,000
// services on this project's build host, against under 1 s for the rest
// of that transaction. A name the Proxier gives ("__mapp" and the set's
// ID, unique as IDs are) skips that scan; the kernel, nft's listing and
// the comparison with the kernel (by content) do not depend on the name.

// anonPrefix is what the Proxier's anonymous set names start with, after
// "__set" or "__map": a letter, so that the kernel's sscanf of its own
// "__set%d" pattern never takes them for one of its numbers.
const anonPrefix = "p"

// nameAnon gives the anonymous sets of a compiled rule names of their own
// and makes the rule's lookups refer to them by it.
func nameAnon(r *compiledRule) error {
	if len(r.anon) == 0 {
		return nil
	}
	names := make(map[uint32]string, len(r.anon))
	for i := range r.anon {
		s := &r.anon[i].set
		base, ok := strings.CutSuffix(s.Name, "%d")
		if !ok {
			continue
		}
		s.Name = fmt.Sprintf("%s%s%d", base, anonPrefix, s.ID)
		names[s.ID] = s.Name
	}
	exprs, err := renameLookups(r.rule.Exprs, names)
	if err != nil {
		return err
	}
	r.rule.Exprs = exprs
	return nil
}

// renameLookups returns a rule's expressions with the set name of every
// lookup whose set ID is in names replaced by that name.
func renameLookups(exprs []byte, names map[uint32]string) ([]byte, error) {
	list, err := parseAttrs(exprs)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(exprs)+16*len(names))
	for _, le := range list {
		parts, err := parseAttrs(le.data)
		if err != nil {
			return nil, err
		}
		name, data := "", []byte(nil)
		for _, a := range parts {
			switch a.typ {
			case nftaExprName:
				name = strings.TrimRight(string(a.data), "\x00")
			case nftaExprData:
				data = a.data
			}
		}
		if name != "lookup" {
			out = appendAttr(out, nftaListElem|nlaNested, le.data)
			continue
		}
		attrs, err := parseAttrs(data)
		if err != nil {
			return nil, err
		}
		var id uint32
		for _, a := range attrs {
			if a.typ == nftaLookupID && len(a.data) == 4 {
				id = binary.BigEndian.Uint32(a.data)
			}
		}
		newName, ok := names[id]
		if !ok {
			out = appendAttr(out, nftaListElem|nlaNested, le.data)
			continue
		}
		var d []byte
		for _, a := range attrs {
			v := a.data
			if a.typ == nftaLookupSet {
				v = append([]byte(newName), 0)
			}
			t := a.typ
			if a.nested {
				t |= nlaNested
			}
			d = appendAttr(d, t, v)
		}
		var e []byte
		e = appendAttr(e, nftaExprName, append([]byte(name), 0))
		e = appendAttr(e, nftaExprData|nlaNested, d)
		out = appendAttr(out, nftaListElem|nlaNested, e)
	}
	return out, nil
}

// appendAttr appends a netlink attribute (host byte order header), padded
// to 4 bytes.
func appendAttr(b []byte, typ uint16, data []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
