package nftexpr

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// dnat compiles `dnat to ADDR[:PORT]` and `dnat ip addr . port to numgen
// random mod N map { 0 : ADDR . PORT , ... }`.
func (c *ruleCompiler) dnat() error {
	c.pos++
	addrType := tIPv4
	if c.t.family == nft.FamilyIPv6 {
		addrType = tIPv6
	}
	mapped := false
	if fam := c.peek(); fam == "ip" || fam == "ip6" {
		if (fam == "ip6") != (c.t.family == nft.FamilyIPv6) {
			return c.fail(fam, "family does not match the table's")
		}
		c.pos++
		if c.peek() == "addr" {
			if c.peekAt(1) != "." || c.peekAt(2) != "port" {
				return c.fail(c.peekAt(1), "want addr . port")
			}
			c.pos += 3
			mapped = true
		}
	}
	if err := c.expect("to"); err != nil {
		return err
	}
	if mapped {
		return c.dnatMap(addrType)
	}
	tok := c.peek()
	addr, port, hasPort, err := splitHostPort(tok)
	if err != nil || addr.Is4() != (addrType == tIPv4) {
		return c.fail(tok, "not an address[:port] of the table's family")
	}
	c.pos++
	c.x.immediateData(reg(0), addrBytes(c.t.val[:0], addr))
	if !hasPort {
		c.x.nat(uint32(c.t.family), reg(0), 0, 0)
		return nil
	}
	c.x.immediateData(reg(4), []byte{byte(port >> 8), byte(port)})
	c.x.nat(uint32(c.t.family), reg(0), reg(4), natProtoSpecified)
	return nil
}

// splitHostPort reads 10.0.0.1, 10.0.0.1:80, fd00::1 or [fd00::1]:80.
func splitHostPort(s string) (netip.Addr, uint16, bool, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), ap.Port(), true, nil
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return a, 0, false, err
}

func (c *ruleCompiler) dnatMap(addrType *dtype) error {
	tok := c.peek()
	var buf [1]field
	fs, err := c.fields(buf[:0])
	if err != nil {
		return err
	}
	if len(fs) != 1 || fs[0].kind != kNumgen {
		return c.fail(tok, "want numgen random mod N")
	}
	if err := c.expect("map"); err != nil {
		return err
	}
	items, err := c.list()
	if err != nil {
		return err
	}
	data := keyType{fields: []*dtype{addrType, tService}}
	dlen := data.len()
	vals := c.t.slab.bytes(len(items) * dlen)
	s, err := c.anonMap(&fs[0], items, data.id(), uint32(dlen), func(e *nft.Elem, _ int, tok []string) error {
		if len(tok) != 3 || tok[1] != "." {
			return c.fail(tok[0], "want ADDR . PORT")
		}
		a, err := netip.ParseAddr(tok[0])
		if err != nil || a.Is4() != (addrType == tIPv4) {
			return c.fail(tok[0], "not an %s", addrType.name)
		}
		p, err := strconv.ParseUint(tok[2], 10, 16)
		if err != nil {
			return c.fail(tok[2], "not a port")
		}
		vals = addrBytes(vals, a)
		vals = append(vals, byte(p>>8), byte(p), 0, 0)
		e.Data = vals[len(vals)-dlen : len(vals) : len(vals)]
		return nil
	})
	if err != nil {
		return err
	}
	fs[0].load(c.x, 0, 0)
	c.x.lookup(reg(0), int(reg(0)), s.Set.Name, s.Set.ID, 0)
	c.x.nat(uint32(c.t.family), reg(0), reg(addrType.words()), 0)
	return nil
}

// update compiles `update @set { FIELDS }`.
func (c *ruleCompiler) update() error {
	c.pos++
	tok := c.peek()
	if !strings.HasPrefix(tok, "@") {
		return c.fail(tok, "want @set")
	}
	s, ok := c.t.sets[tok[1:]]
	if !ok {
		return c.fail(tok, "set not defined in the table")
	}
	c.pos++
	if err := c.expect("{"); err != nil {
		return err
	}
	var buf [4]field
	fs, err := c.fields(buf[:0])
	if err != nil {
		return err
	}
	if err := c.expect("}"); err != nil {
		return err
	}
	if !sameKey(fs, s.key) || s.verdict || s.data.fields != nil {
		return c.fail(tok, "set key is %s, expression is %s", s.key, keyOf(fs))
	}
	c.loadFields(fs)
	c.x.dynsetUpdate(reg(0), s.name, s.id)
	return nil
}
