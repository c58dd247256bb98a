package nftexpr

import (
	"fmt"
	"strings"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// maxComment is the longest comment nft accepts (NFTNL_UDATA_COMMENT_MAXLEN).
const maxComment = 128

// Elem compiles an element of the named set or map: its key text
// ("10.96.0.10 . tcp . 80"), a map's value ("goto service-…", "drop", or
// data such as "10.0.0.1 . 80") and its comment.
func (t *Table) Elem(set, key, value, comment string) (nft.Elem, error) {
	e, err := t.elem(set, key, value, comment)
	if err != nil {
		return e, fmt.Errorf("nftexpr: element %q of %s: %w", key, set, err)
	}
	return e, nil
}

func (t *Table) elem(set, key, value, comment string) (nft.Elem, error) {
	var e nft.Elem
	s, ok := t.sets[set]
	if !ok {
		return e, fmt.Errorf("set not defined in the table")
	}
	if s.interval {
		return e, fmt.Errorf("elements of interval sets are not supported")
	}
	if len(comment) > maxComment {
		return e, fmt.Errorf("comment longer than %d bytes", maxComment)
	}
	klen := s.key.len()
	dlen := 0
	if s.data.fields != nil {
		dlen = s.data.len()
	}
	ulen := 0
	if comment != "" {
		ulen = len(comment) + 3
	}
	buf := t.slab.bytes(klen + dlen + ulen)
	buf, err := appendKey(buf, s.key, key)
	if err != nil {
		return e, err
	}
	e.Key = buf[:klen:klen]
	switch {
	case s.verdict:
		v, err := parseVerdict(value)
		if err != nil {
			return e, err
		}
		e.Verdict = t.slab.verdict(v)
	case s.data.fields != nil:
		if buf, err = appendKey(buf, s.data, value); err != nil {
			return e, fmt.Errorf("value %q: %w", value, err)
		}
		e.Data = buf[klen : klen+dlen : klen+dlen]
	case value != "":
		return e, fmt.Errorf("value %q for a set", value)
	}
	if comment != "" {
		e.UserData = udString(buf[klen+dlen:klen+dlen], udComment, comment)
	}
	return e, nil
}

// parseVerdict reads "drop", "accept", "return", "continue", "goto CHAIN"
// or "jump CHAIN".
func parseVerdict(s string) (nft.Verdict, error) {
	s = strings.TrimSpace(s)
	word, chain, _ := strings.Cut(s, " ")
	code, needsChain, ok := verdictCode(word)
	if !ok || needsChain != (chain != "") {
		return nft.Verdict{}, fmt.Errorf("verdict %q", s)
	}
	return nft.Verdict{Code: code, Chain: strings.TrimSpace(chain)}, nil
}

// verdictCode maps a verdict keyword to its code and whether it takes a
// chain.
func verdictCode(word string) (int32, bool, bool) {
	switch word {
	case "drop":
		return nft.VerdictDrop, false, true
	case "accept":
		return nft.VerdictAccept, false, true
	case "return":
		return nft.VerdictReturn, false, true
	case "continue":
		return nft.VerdictContinue, false, true
	case "jump":
		return nft.VerdictJump, true, true
	case "goto":
		return nft.VerdictGoto, true, true
	}
	return 0, false, false
}
