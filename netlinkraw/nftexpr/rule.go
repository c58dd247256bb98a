package nftexpr

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// Rule is a compiled rule and the anonymous sets and maps it creates, which
// must be added (with their elements) in the same transaction, before the
// rule.
type Rule struct {
	nft.Rule
	Sets []AnonSet
}

// AnonSet is an anonymous set or map a rule creates: nft's "__set%d" or
// "__map%d", which the kernel names when it adds it.
type AnonSet struct {
	Set   nft.Set
	Elems []nft.Elem
}

// Error is a rule that does not compile: the rule's text, the token at
// which it failed ("" at the end of the text) and why.
type Error struct {
	Rule, Token string
	Err         error
}

// Error prints the rule, the token and the cause.
func (e *Error) Error() string {
	at := "at end of rule"
	if e.Token != "" {
		at = fmt.Sprintf("at %q", e.Token)
	}
	return fmt.Sprintf("nftexpr: rule %q: %s: %v", e.Rule, at, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// scratch holds the buffers a Table reuses from one compile to the next.
type scratch struct {
	toks  []string
	items [][]string
	x     exprs
	val   []byte
	slab  slab
}

// ruleCompiler is the state of one rule's compilation.
type ruleCompiler struct {
	t     *Table
	text  string
	toks  []string
	pos   int
	x     *exprs
	newID func() uint32
	sets  []AnonSet
}

// Rule compiles a rule of chain in nft's syntax (without its comment, as
// `nft add rule ip TABLE CHAIN <text> comment "<comment>"` reads it).
// newID gives the IDs of the anonymous sets the rule creates (a
// transaction's set IDs); it is not called for rules that create none.
func (t *Table) Rule(chain, text, comment string, newID func() uint32) (Rule, error) {
	if len(comment) > maxComment {
		return Rule{}, &Error{Rule: text, Token: comment, Err: fmt.Errorf("comment longer than %d bytes", maxComment)}
	}
	t.toks = tokenize(t.toks[:0], text)
	t.x.e.Reset()
	c := ruleCompiler{t: t, text: text, toks: t.toks, x: &t.x, newID: newID}
	if len(c.toks) == 0 {
		return Rule{}, c.fail("", "empty rule")
	}
	if err := c.run(); err != nil {
		return Rule{}, err
	}
	n := len(t.x.e.B)
	out := append(t.slab.bytes(n+len(comment)+3), t.x.e.B...)
	r := Rule{Rule: nft.Rule{Chain: chain, Exprs: out[:n:n]}, Sets: c.sets}
	if comment != "" {
		r.UserData = udString(out[n:n], udComment, comment)
	}
	return r, nil
}

func (c *ruleCompiler) peek() string { return c.peekAt(0) }

func (c *ruleCompiler) peekAt(i int) string {
	if c.pos+i < len(c.toks) {
		return c.toks[c.pos+i]
	}
	return ""
}

func (c *ruleCompiler) fail(tok, format string, args ...any) error {
	return &Error{Rule: c.text, Token: tok, Err: fmt.Errorf(format, args...)}
}

// expect consumes tok or fails.
func (c *ruleCompiler) expect(tok string) error {
	if c.peek() != tok {
		return c.fail(c.peek(), "want %q", tok)
	}
	c.pos++
	return nil
}

func (c *ruleCompiler) run() error {
	for c.pos < len(c.toks) {
		if err := c.statement(); err != nil {
			return err
		}
	}
	return nil
}

func (c *ruleCompiler) statement() error {
	tok := c.peek()
	switch tok {
	case "counter":
		c.pos++
		if c.peek() == "name" {
			name := unquote(c.peekAt(1))
			if name == "" {
				return c.fail(c.peekAt(1), "want a counter name")
			}
			c.pos += 2
			c.x.objref(1, name) // NFT_OBJECT_COUNTER
			return nil
		}
		c.x.counter()
	case "accept", "drop", "return", "continue", "jump", "goto":
		c.pos++
		code, needsChain, _ := verdictCode(tok)
		chain := ""
		if needsChain {
			if chain = c.peek(); chain == "" || isKeyword(chain) {
				return c.fail(chain, "want a chain name after %s", tok)
			}
			c.pos++
		}
		c.x.immediateVerdict(code, chain)
	case "reject":
		c.pos++
		code := uint8(icmpPortUnreach)
		if c.t.family == nft.FamilyIPv6 {
			code = icmpv6PortUnreach
		}
		c.x.reject(code)
	case "masquerade":
		c.pos++
		var flags uint32
		if c.peek() == "fully-random" {
			c.pos++
			flags = natProtoRandomFully
		}
		c.x.masq(flags)
	case "dnat":
		return c.dnat()
	case "update":
		return c.update()
	default:
		return c.match()
	}
	return nil
}

func isKeyword(s string) bool {
	switch s {
	case "{", "}", ",", ":", ".", "counter", "accept", "drop", "return", "jump", "goto", "reject":
		return true
	}
	return false
}

// fields reads a field or a concatenation of fields.
func (c *ruleCompiler) fields(dst []field) ([]field, error) {
	for {
		tok := c.peek()
		f, ok, err := c.parseField()
		if err != nil {
			return dst, err
		}
		if !ok {
			return dst, c.fail(tok, "unknown expression")
		}
		dst = append(dst, f)
		if c.peek() != "." {
			return dst, nil
		}
		c.pos++
	}
}

// loadFields loads a concatenation into consecutive registers.
func (c *ruleCompiler) loadFields(fs []field) {
	off := 0
	for i := range fs {
		fs[i].load(c.x, off, 0)
		off += fs[i].t.words()
	}
}

// keyOf is the key type of a concatenation of fields.
func keyOf(fs []field) keyType {
	k := keyType{fields: make([]*dtype, len(fs))}
	for i, f := range fs {
		k.fields[i] = f.t
	}
	return k
}

func sameKey(fs []field, k keyType) bool {
	if len(fs) != len(k.fields) {
		return false
	}
	for i, f := range fs {
		if f.t != k.fields[i] {
			return false
		}
	}
	return true
}

// match compiles a relational expression or a statement that starts with
// a field (`mark set ...`).
func (c *ruleCompiler) match() error {
	var buf [4]field
	fs, err := c.fields(buf[:0])
	if err != nil {
		return err
	}
	rel := c.peek()
	switch {
	case rel == "set" && len(fs) == 1 && fs[0].t == tMark:
		c.pos++
		return c.markSet()
	case strings.HasPrefix(rel, "@"):
		c.pos++
		return c.lookupNamed(fs, rel, false, 0)
	case rel == "vmap":
		c.pos++
		if next := c.peek(); strings.HasPrefix(next, "@") {
			c.pos++
			return c.lookupNamed(fs, next, true, 0)
		}
		return c.anonVmap(fs)
	}
	if len(fs) != 1 {
		return c.fail(rel, "a concatenation needs a set or map")
	}
	switch rel {
	case "and":
		c.pos++
		return c.maskedCompare(&fs[0])
	case "!=":
		c.pos++
		return c.rhs(&fs[0], cmpNeq, true)
	case "==":
		c.pos++
		return c.rhs(&fs[0], cmpEq, true)
	}
	return c.rhs(&fs[0], cmpEq, false)
}

// lookupNamed compiles `FIELDS @set` or `FIELDS vmap @map`.
func (c *ruleCompiler) lookupNamed(fs []field, tok string, vmap bool, flags uint32) error {
	s, ok := c.t.sets[tok[1:]]
	if !ok {
		return c.fail(tok, "set not defined in the table")
	}
	if !sameKey(fs, s.key) {
		return c.fail(tok, "set key is %s, expression is %s", s.key, keyOf(fs))
	}
	dreg := -1
	switch {
	case vmap && !s.verdict:
		return c.fail(tok, "not a verdict map")
	case vmap:
		dreg = regVerdict
	case s.verdict || s.data.fields != nil:
		return c.fail(tok, "a map needs vmap or map")
	}
	c.loadFields(fs)
	c.x.lookup(reg(0), dreg, s.name, s.id, flags)
	return nil
}

// maskedCompare compiles `FIELD and MASK ==|!= VALUE`.
func (c *ruleCompiler) maskedCompare(f *field) error {
	maskTok := c.peek()
	mask, err := appendValue(nil, f.t, maskTok, 0)
	if err != nil {
		return c.fail(maskTok, "%v", err)
	}
	c.pos++
	op := uint32(cmpEq)
	switch c.peek() {
	case "!=":
		op = cmpNeq
		c.pos++
	case "==":
		c.pos++
	}
	valTok := c.peek()
	val, err := appendValue(nil, f.t, valTok, 0)
	if err != nil {
		return c.fail(valTok, "%v", err)
	}
	c.pos++
	f.load(c.x, 0, 0)
	c.x.bitwise(reg(0), mask, make([]byte, len(mask)), true)
	c.x.cmp(reg(0), op, val)
	return nil
}

// markSet compiles `mark set mark or|xor|and VALUE` and `mark set VALUE`.
func (c *ruleCompiler) markSet() error {
	if c.peek() == "meta" && c.peekAt(1) == "mark" {
		c.pos++
	}
	if c.peek() != "mark" {
		tok := c.peek()
		v, err := appendValue(nil, tMark, tok, 0)
		if err != nil {
			return c.fail(tok, "%v", err)
		}
		c.pos++
		c.x.immediateData(reg(0), v)
		c.x.metaSet(reg(0), metaMark)
		return nil
	}
	c.pos++
	op, tok := c.peek(), c.peekAt(1)
	b, err := appendValue(nil, tMark, tok, 0)
	if err != nil {
		return c.fail(tok, "%v", err)
	}
	v := binary.NativeEndian.Uint32(b)
	var mask, xor uint32
	switch op {
	case "or":
		mask, xor = ^v, v
	case "xor":
		mask, xor = 0xffffffff, v
	case "and":
		mask, xor = v, 0
	default:
		return c.fail(op, "want or, xor or and")
	}
	c.pos += 2
	c.x.metaLoad(reg(0), metaMark)
	c.x.bitwise(reg(0), binary.NativeEndian.AppendUint32(nil, mask), binary.NativeEndian.AppendUint32(nil, xor), true)
	c.x.metaSet(reg(0), metaMark)
	return nil
}
