package nftables

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// Anonymous sets get names of their own. nft sends an anonymous set
// named "__set%d" or "__map%d" and the kernel picks the number: it scans
// every set of the table (an sscanf each) for every such set it creates,
// which makes a transaction of n anonymous sets (kube-proxy's numgen map
// in each service chain) cost O(n²) - 10 s of kernel time for 10,000
// services on this project's build host, against under 1 s for the rest
// of that transaction. A name the Proxier gives skips that scan; the
// kernel and nft's listing do not depend on it.
//
// The name is "__mapp" (or "__setp"), a digest of the set's content, a
// dot and the set's ID (unique). An anonymous set is constant (the kernel
// refuses changes to its elements), so the digest in its name tells its
// content: reading a table the Proxier wrote (a restart) needs no dump of
// each anonymous set's elements, which costs the kernel a walk of every
// set of the table per dump. Anonymous sets that other writers named
// (nft's "__map3") are dumped and digested alike.

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
		r.anon[i].hash = anonHash(s, r.anon[i].elems)
		s.Name = fmt.Sprintf("%s%s%s.%d", base, anonPrefix, r.anon[i].hash, s.ID)
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

// anonHash is the digest of an anonymous set's content (canonSet) that
// its name carries.
func anonHash(s *nft.Set, elems []nft.Elem) string {
	sum := sha256.Sum256([]byte(canonSet(s, elems)))
	return hex.EncodeToString(sum[:8])
}

// nameHash returns the content digest in the name of an anonymous set
// the Proxier named, false for other names.
func nameHash(name string) (string, bool) {
	for _, base := range []string{"__set", "__map"} {
		rest, ok := strings.CutPrefix(name, base+anonPrefix)
		if !ok {
			continue
		}
		h, _, ok := strings.Cut(rest, ".")
		if ok && len(h) == 16 {
			if _, err := hex.DecodeString(h); err == nil {
				return h, true
			}
		}
	}
	return "", false
}
