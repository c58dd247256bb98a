package ipset

import (
	"errors"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// listing accumulates the sets of a LIST dump, which may span many
// messages per set.
type listing struct {
	order []string
	sets  map[string]*listed
}

type listed struct {
	Header  Header
	HaveHdr bool
	Entries []Entry
}

func newListing() *listing { return &listing{sets: map[string]*listed{}} }

// listMsg is what one LIST message says about its set.
type listMsg struct {
	l        *listing
	cur      *listed
	name     string
	typ      string
	family   uint8
	revision uint8
	haveType bool
}

// set returns the message's set, created on first sight.
func (m *listMsg) set() (*listed, error) {
	if m.cur != nil {
		return m.cur, nil
	}
	if m.name == "" {
		return nil, errors.New("set data before set name")
	}
	s, ok := m.l.sets[m.name]
	if !ok {
		s = &listed{}
		m.l.sets[m.name] = s
		m.l.order = append(m.l.order, m.name)
	}
	m.cur = s
	return s, nil
}

// add decodes one LIST message (payload after the netlink header).
func (l *listing) add(data []byte) error {
	b, err := attrsOf(data)
	if err != nil {
		return err
	}
	m := &listMsg{l: l}
	if err := nlcore.ForEachAttr(b, m.attr); err != nil {
		return err
	}
	if m.haveType {
		s, err := m.set()
		if err != nil {
			return err
		}
		s.Header.Name = m.name
		s.Header.Type = Type(m.typ)
		s.Header.Family = Family(m.family)
		s.Header.Revision = m.revision
		if s.Header.Type == BitmapPort {
			s.Header.Family = Unspec
		}
		s.HaveHdr = true
	} else if m.cur != nil && m.cur.Header.Name == "" {
		m.cur.Header.Name = m.name
	}
	return nil
}

// attr decodes one top-level attribute of a LIST message.
func (m *listMsg) attr(typ uint16, v []byte) (err error) {
	switch typ {
	case attrSetName:
		if m.name = nlcore.GetString(v); m.name == "" {
			return errors.New("empty set name in list reply")
		}
		_, err = m.set()
	case attrTypeName:
		m.typ, m.haveType = nlcore.GetString(v), true
	case attrFamily:
		m.family, err = nlcore.GetU8("family", v)
	case attrRevision:
		m.revision, err = nlcore.GetU8("revision", v)
	case attrData:
		var s *listed
		if s, err = m.set(); err != nil {
			return err
		}
		h := &s.Header
		err = decodeHeaderData(v, h)
		s.HaveHdr = true
		if s.Entries == nil && h.Elements > 0 && h.Elements <= 1<<17 {
			// One allocation for the whole set (a hint: the kernel
			// counts expired entries too).
			s.Entries = make([]Entry, 0, h.Elements)
		}
	case attrADT:
		var s *listed
		if s, err = m.set(); err != nil {
			return err
		}
		err = nlcore.ForEachAttr(v, func(typ uint16, v []byte) error {
			if typ != attrData {
				return nil
			}
			var e Entry
			err := decodeEntry(v, &e)
			s.Entries = append(s.Entries, e)
			return err
		})
	}
	return err
}
