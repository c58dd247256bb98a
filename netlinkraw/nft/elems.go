package nft

import (
	"fmt"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// elems encodes an element operation, in as many messages as the
// elements' 16-bit nest length needs.
func (tx *Tx) elems(cmd uint8, flags uint16, fam Family, table string, set Set, elems []Elem, withData bool) {
	var nest int
	open := func() {
		tx.begin(cmd, flags, fam)
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
	open()
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
		open()
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
