package nft

import (
	"fmt"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// elems encodes an element operation, in as many messages as the
// elements' 16-bit nest length needs.
func (tx *Tx) elems(cmd uint8, flags uint16, fam Family, table string, set Set, elems []Elem, withData bool) {
	var nest int
	open := func(first int) {
		tx.begin(cmd, flags, fam)
		tx.msgs[len(tx.msgs)-1].firstElem = first
		tx.enc.Str(attrElemListTable, table)
		tx.enc.Str(attrElemListSet, set.Name)
		if set.ID != 0 {
			tx.enc.BE32(attrElemListSetID, set.ID)
		}
		nest = tx.enc.BeginNest(attrElemListElements | nlcore.AttrNested)
	}
	closeMsg := func() {
		tx.enc.EndNest(nest)
		tx.end()
	}
	open(0)
	count := 0
	for i := range elems {
		if len(elems[i].Key) == 0 && tx.err == nil {
			op := tx.ops[len(tx.ops)-1]
			tx.err = fmt.Errorf("nft: %s %s: element %d has no key", op.verb, op.label, i)
		}
		tx.grow(1024)
		start := len(tx.enc.B)
		encodeElem(&tx.enc, &elems[i], withData)
		if len(tx.enc.B)-nest <= maxElemsBytes || count == 0 {
			count++
			continue
		}
		// Move the element that did not fit into a new message.
		moved := append([]byte(nil), tx.enc.B[start:]...)
		tx.enc.B = tx.enc.B[:start]
		closeMsg()
		open(i)
		tx.enc.B = append(tx.enc.B, moved...)
		count = 1
	}
	closeMsg()
}

// encodeElem appends one NFTA_LIST_ELEM of an element list.
func encodeElem(e *nlcore.Encoder, el *Elem, withData bool) {
	l := e.BeginNest(attrListElem | nlcore.AttrNested)
	k := e.BeginNest(attrElemKey | nlcore.AttrNested)
	e.Attr(attrDataValue, el.Key)
	e.EndNest(k)
	if el.KeyEnd != nil {
		k := e.BeginNest(attrElemKeyEnd | nlcore.AttrNested)
		e.Attr(attrDataValue, el.KeyEnd)
		e.EndNest(k)
	}
	if withData {
		switch {
		case el.Verdict != nil:
			d := e.BeginNest(attrElemData | nlcore.AttrNested)
			v := e.BeginNest(attrDataVerdict | nlcore.AttrNested)
			e.BE32(attrVerdictCode, uint32(el.Verdict.Code))
			if el.Verdict.Chain != "" {
				e.Str(attrVerdictChain, el.Verdict.Chain)
			}
			e.EndNest(v)
			e.EndNest(d)
		case el.Data != nil:
			d := e.BeginNest(attrElemData | nlcore.AttrNested)
			e.Attr(attrDataValue, el.Data)
			e.EndNest(d)
		}
	}
	if el.Flags != 0 {
		e.BE32(attrElemFlags, el.Flags)
	}
	if withData && el.Timeout != 0 {
		e.BE64(attrElemTimeout, el.Timeout)
	}
	if withData && el.UserData != nil {
		e.Attr(attrElemUserData, el.UserData)
	}
	e.EndNest(l)
}

// elemAt returns the index, in its operation's elements, of the element
// of message m at offset off from the message's netlink header (the
// attribute a kernel error blamed), or -1.
func (tx *Tx) elemAt(m txMsg, off uint32) int {
	if m.firstElem < 0 {
		return -1
	}
	b := tx.enc.B[m.start:m.end]
	pos := int(off) - nlcore.HdrLen
	for i := nlcore.NfgenLen; i+nlcore.AttrHdrLen <= len(b); {
		l := int(nlcore.Native.Uint16(b[i:]))
		if l < nlcore.AttrHdrLen {
			return -1
		}
		if nlcore.Native.Uint16(b[i+2:])&nlcore.AttrTypeMask == attrElemListElements {
			k := 0
			for j := i + nlcore.AttrHdrLen; j+nlcore.AttrHdrLen <= i+l; k++ {
				el := int(nlcore.Native.Uint16(b[j:]))
				if el < nlcore.AttrHdrLen {
					return -1
				}
				if pos >= j && pos < j+el {
					return m.firstElem + k
				}
				j += (el + 3) &^ 3
			}
			return -1
		}
		i += (l + 3) &^ 3
	}
	return -1
}
