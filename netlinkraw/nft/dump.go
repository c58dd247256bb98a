package nft

import (
	"fmt"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// dump runs a dump of command cmd in family fam with the attributes attrs
// appends, decoding each message's attributes (after the nfgenmsg header,
// whose family it also passes) with each.
func (c *Conn) dump(what string, cmd uint8, fam Family, attrs func(e *nlcore.Encoder), reset func(), each func(fam Family, attrs []byte) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.nl.Dump(nlcore.DumpRequest{
		Type: nlcore.NfnlType(nlcore.NfnlSubsysNFTables, cmd),
		Payload: func(e *nlcore.Encoder) {
			e.Nfgen(uint8(fam), 0)
			if attrs != nil {
				attrs(e)
			}
		},
		Reset: reset,
		Each: func(m *nlcore.Message) error {
			if len(m.Data) < nlcore.NfgenLen {
				return fmt.Errorf("message of %d bytes, shorter than its header", len(m.Data))
			}
			return each(Family(m.Data[0]), m.Data[nlcore.NfgenLen:])
		},
	})
	if err != nil {
		return fmt.Errorf("nft: list %s: %w", what, err)
	}
	return nil
}

// Tables lists the tables of a family (0: every family).
func (c *Conn) Tables(fam Family) ([]Table, error) {
	var out []Table
	err := c.dump(fmt.Sprintf("tables of family %v", fam), msgGetTable, fam, nil,
		func() { out = out[:0] },
		func(f Family, b []byte) error {
			t, err := decodeTable(f, b)
			out = append(out, t)
			return err
		})
	return out, err
}

// Chains lists the chains of a table.
func (c *Conn) Chains(fam Family, table string) ([]Chain, error) {
	var out []Chain
	err := c.dump(fmt.Sprintf("chains of table %v %s", fam, table), msgGetChain, fam,
		func(e *nlcore.Encoder) { e.Str(attrChainTable, table) },
		func() { out = out[:0] },
		func(_ Family, b []byte) error {
			ch, tbl, err := decodeChain(b)
			if tbl == table {
				out = append(out, ch)
			}
			return err
		})
	return out, err
}

// Sets lists the sets and maps of a table (anonymous ones included).
func (c *Conn) Sets(fam Family, table string) ([]Set, error) {
	var out []Set
	err := c.dump(fmt.Sprintf("sets of table %v %s", fam, table), msgGetSet, fam,
		func(e *nlcore.Encoder) { e.Str(attrSetTable, table) },
		func() { out = out[:0] },
		func(_ Family, b []byte) error {
			s, tbl, err := decodeSet(b)
			if tbl == table {
				out = append(out, s)
			}
			return err
		})
	return out, err
}

// Elems lists the elements of a set or map.
func (c *Conn) Elems(fam Family, table, set string) ([]Elem, error) {
	var out []Elem
	err := c.dump(fmt.Sprintf("elements of set %v %s %s", fam, table, set), msgGetSetElem, fam,
		func(e *nlcore.Encoder) {
			e.Str(attrElemListTable, table)
			e.Str(attrElemListSet, set)
		},
		func() { out = out[:0] },
		func(_ Family, b []byte) error {
			var err error
			out, err = decodeElems(out, b)
			return err
		})
	return out, err
}

// Rules lists the rules of a chain, or of every chain of the table when
// chain is "", in the kernel's order.
func (c *Conn) Rules(fam Family, table, chain string) ([]Rule, error) {
	var out []Rule
	what := fmt.Sprintf("rules of table %v %s", fam, table)
	if chain != "" {
		what = fmt.Sprintf("rules of chain %v %s %s", fam, table, chain)
	}
	err := c.dump(what, msgGetRule, fam,
		func(e *nlcore.Encoder) {
			e.Str(attrRuleTable, table)
			if chain != "" {
				e.Str(attrRuleChain, chain)
			}
		},
		func() { out = out[:0] },
		func(_ Family, b []byte) error {
			r, tbl, err := decodeRule(b)
			if tbl == table && (chain == "" || r.Chain == chain) {
				out = append(out, r)
			}
			return err
		})
	return out, err
}
