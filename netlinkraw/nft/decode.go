package nft

import (
	"encoding/binary"
	"fmt"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// clone copies an attribute's payload out of the receive buffer.
func clone(v []byte) []byte { return append([]byte(nil), v...) }

// be32 and be64 read network-order attributes, recording the first error.
type reader struct{ err error }

func (r *reader) be32(what string, v []byte) uint32 {
	if len(v) != 4 {
		r.fail(nlcore.BadLen(what, v))
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

func (r *reader) be64(what string, v []byte) uint64 {
	if len(v) != 8 {
		r.fail(nlcore.BadLen(what, v))
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// decodeTable decodes a NEWTABLE message's attributes.
func decodeTable(fam Family, b []byte) (Table, error) {
	t := Table{Family: fam}
	var r reader
	err := nlcore.ForEachAttr(b, func(typ uint16, v []byte) error {
		switch typ {
		case attrTableName:
			t.Name = nlcore.GetString(v)
		case attrTableFlags:
			t.Flags = r.be32("NFTA_TABLE_FLAGS", v)
		case attrTableHandle:
			t.Handle = r.be64("NFTA_TABLE_HANDLE", v)
		case attrTableUserData:
			t.UserData = clone(v)
		}
		return nil
	})
	return t, decodeErr("table", t.Name, err, r.err)
}

// decodeErr names the object whose message did not decode.
func decodeErr(kind, name string, errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("decode %s %q: %w", kind, name, err)
		}
	}
	return nil
}

// decodeChain decodes a NEWCHAIN message's attributes and its table.
func decodeChain(b []byte) (Chain, string, error) {
	var (
		c     Chain
		table string
		r     reader
	)
	err := nlcore.ForEachAttr(b, func(typ uint16, v []byte) error {
		switch typ {
		case attrChainTable:
			table = nlcore.GetString(v)
		case attrChainName:
			c.Name = nlcore.GetString(v)
		case attrChainHandle:
			c.Handle = r.be64("NFTA_CHAIN_HANDLE", v)
		case attrChainHook:
			c.HasHook = true
			return nlcore.ForEachAttr(v, func(typ uint16, v []byte) error {
				switch typ {
				case attrHookNum:
					c.Hook = r.be32("NFTA_HOOK_HOOKNUM", v)
				case attrHookPriority:
					c.Priority = int32(r.be32("NFTA_HOOK_PRIORITY", v))
				}
				return nil
			})
		case attrChainPolicy:
			c.Policy = r.be32("NFTA_CHAIN_POLICY", v)
		case attrChainType:
			c.Type = nlcore.GetString(v)
		case attrChainUserData:
			c.UserData = clone(v)
		}
		return nil
	})
	return c, table, decodeErr("chain", c.Name, err, r.err)
}

// decodeSet decodes a NEWSET message's attributes and its table.
func decodeSet(b []byte) (Set, string, error) {
	var (
		s     Set
		table string
		r     reader
	)
	err := nlcore.ForEachAttr(b, func(typ uint16, v []byte) error {
		switch typ {
		case attrSetTable:
			table = nlcore.GetString(v)
		case attrSetName:
			s.Name = nlcore.GetString(v)
		case attrSetFlags:
			s.Flags = r.be32("NFTA_SET_FLAGS", v)
		case attrSetKeyType:
			s.KeyType = r.be32("NFTA_SET_KEY_TYPE", v)
		case attrSetKeyLen:
			s.KeyLen = r.be32("NFTA_SET_KEY_LEN", v)
		case attrSetDataType:
			s.DataType = r.be32("NFTA_SET_DATA_TYPE", v)
		case attrSetDataLen:
			s.DataLen = r.be32("NFTA_SET_DATA_LEN", v)
		case attrSetPolicy:
			s.Policy, s.HasPolicy = r.be32("NFTA_SET_POLICY", v), true
		case attrSetDesc:
			return decodeSetDesc(&s, &r, v)
		case attrSetID:
			s.ID = r.be32("NFTA_SET_ID", v)
		case attrSetTimeout:
			s.Timeout = r.be64("NFTA_SET_TIMEOUT", v)
		case attrSetUserData:
			s.UserData = clone(v)
		case attrSetHandle:
			s.Handle = r.be64("NFTA_SET_HANDLE", v)
		}
		return nil
	})
	return s, table, decodeErr("set", s.Name, err, r.err)
}

// decodeSetDesc decodes NFTA_SET_DESC.
func decodeSetDesc(s *Set, r *reader, b []byte) error {
	return nlcore.ForEachAttr(b, func(typ uint16, v []byte) error {
		switch typ {
		case attrSetDescSize:
			s.Size = r.be32("NFTA_SET_DESC_SIZE", v)
		case attrSetDescConcat:
			s.Fields = []uint32{}
			return nlcore.ForEachAttr(v, func(typ uint16, v []byte) error {
				f, ok, err := nlcore.FindAttr(v, attrSetFieldLen)
				if ok {
					s.Fields = append(s.Fields, r.be32("NFTA_SET_FIELD_LEN", f))
				}
				return err
			})
		}
		return nil
	})
}

// decodeElems appends the elements of a NEWSETELEM message to out.
func decodeElems(out []Elem, b []byte) ([]Elem, error) {
	var (
		set string
		r   reader
	)
	err := nlcore.ForEachAttr(b, func(typ uint16, v []byte) error {
		switch typ {
		case attrElemListSet:
			set = nlcore.GetString(v)
		case attrElemListElements:
			return nlcore.ForEachAttr(v, func(_ uint16, v []byte) error {
				el, err := decodeElem(&r, v)
				out = append(out, el)
				return err
			})
		}
		return nil
	})
	return out, decodeErr("elements of set", set, err, r.err)
}

// decodeElem decodes one NFTA_LIST_ELEM of an element list.
func decodeElem(r *reader, b []byte) (Elem, error) {
	var el Elem
	err := nlcore.ForEachAttr(b, func(typ uint16, v []byte) error {
		var err error
		switch typ {
		case attrElemKey:
			el.Key, err = dataValue(v)
		case attrElemKeyEnd:
			el.KeyEnd, err = dataValue(v)
		case attrElemData:
			err = nlcore.ForEachAttr(v, func(typ uint16, v []byte) error {
				switch typ {
				case attrDataValue:
					el.Data = clone(v)
				case attrDataVerdict:
					el.Verdict = decodeVerdict(r, v)
				}
				return nil
			})
		case attrElemFlags:
			el.Flags = r.be32("NFTA_SET_ELEM_FLAGS", v)
		case attrElemTimeout:
			el.Timeout = r.be64("NFTA_SET_ELEM_TIMEOUT", v)
		case attrElemUserData:
			el.UserData = clone(v)
		}
		return err
	})
	return el, err
}

// dataValue returns the NFTA_DATA_VALUE inside an NFTA_SET_ELEM_KEY.
func dataValue(b []byte) ([]byte, error) {
	v, ok, err := nlcore.FindAttr(b, attrDataValue)
	if err != nil || !ok {
		return nil, err
	}
	return clone(v), nil
}

// decodeVerdict decodes an NFTA_DATA_VERDICT nest.
func decodeVerdict(r *reader, b []byte) *Verdict {
	v := &Verdict{}
	r.fail(nlcore.ForEachAttr(b, func(typ uint16, a []byte) error {
		switch typ {
		case attrVerdictCode:
			v.Code = int32(r.be32("NFTA_VERDICT_CODE", a))
		case attrVerdictChain:
			v.Chain = nlcore.GetString(a)
		}
		return nil
	}))
	return v
}

// decodeRule decodes a NEWRULE message's attributes and its table.
func decodeRule(b []byte) (Rule, string, error) {
	var (
		rule  Rule
		table string
		r     reader
	)
	err := nlcore.ForEachAttr(b, func(typ uint16, v []byte) error {
		switch typ {
		case attrRuleTable:
			table = nlcore.GetString(v)
		case attrRuleChain:
			rule.Chain = nlcore.GetString(v)
		case attrRuleHandle:
			rule.Handle = r.be64("NFTA_RULE_HANDLE", v)
		case attrRuleExpressions:
			rule.Exprs = clone(v)
		case attrRuleUserData:
			rule.UserData = clone(v)
		}
		return nil
	})
	return rule, table, decodeErr("rule of chain", rule.Chain, err, r.err)
}
