package manifest

import (
	"bytes"
	"encoding/binary"
	"slices"

	"sigs.k8s.io/yaml"
)

// maxDepth bounds the nesting the converter follows; deeper documents go
// to sigs.k8s.io/yaml.
const maxDepth = 64

// Converter converts YAML documents to JSON. Its buffers are reused from
// one document to the next, so a Converter must not be shared between
// goroutines; the zero value is ready to use.
type Converter struct {
	src   []byte
	lines []line
	out   []byte
	ents  []entry
	tmp   []byte
	depth int
	// What the document's top-level mapping has, for TopKind.
	kind, kindOdd, items bool
	kindValue            []byte
}

// line is one line of the document holding something other than spaces or
// a comment.
type line struct {
	base   int // offset of the line in src
	indent int // leading spaces
	end    int // offset of its end (before the "\n")
}

// entry is one "key":value of a mapping being written, as offsets in out.
type entry struct {
	start, keyEnd, end int
}

// YAMLToJSON returns the JSON of one YAML document, byte for byte what
// sigs.k8s.io/yaml.YAMLToJSON returns: the fast path when the document is
// in the supported subset, sigs.k8s.io/yaml otherwise. The result is valid
// until the next call.
func (c *Converter) YAMLToJSON(doc []byte) ([]byte, error) {
	if out, ok := c.AppendJSON(c.out[:0], doc); ok {
		return out, nil
	}
	c.kind = false
	return yaml.YAMLToJSON(doc)
}

// Scratch returns a copy of b in the converter's output buffer, valid until
// the next call.
func (c *Converter) Scratch(b []byte) []byte {
	c.kind = false
	c.out = append(c.out[:0], b...)
	return c.out
}

// AppendJSON appends the JSON of one YAML document to dst. ok is false when
// the document is outside the subset the converter handles: block mappings
// and sequences, single-line plain, single-quoted and double-quoted
// scalars, one-line flow sequences of scalars ([a, 'b']), empty flow
// mappings ({}) and comments, in printable ASCII without tabs. Anchors,
// aliases, tags, block scalars, multi-line scalars, nested flow
// collections, non-empty flow mappings, merge keys, duplicate keys and
// scalars whose YAML 1.1 type is not a plain string, boolean, null or
// decimal integer are left to sigs.k8s.io/yaml. When ok, out holds exactly
// the bytes sigs.k8s.io/yaml.YAMLToJSON returns (keys sorted, HTML
// characters escaped).
func (c *Converter) AppendJSON(dst, doc []byte) (out []byte, ok bool) {
	c.src = doc
	defer func() { c.src = nil }() // a pooled Converter must not keep the file alive
	c.out = dst
	c.ents = c.ents[:0]
	c.depth = 0
	c.kind, c.kindOdd, c.items = false, false, false
	if !c.scanLines() {
		return dst, false
	}
	if len(c.lines) == 0 {
		return append(dst, "null"...), true
	}
	next, ok := c.node(0, c.lines[0].indent, false)
	if !ok || next != len(c.lines) {
		c.kind = false
		return dst, false
	}
	return c.out, true
}

// scanLines fills c.lines, skipping blank and comment lines; it fails on
// bytes outside printable ASCII (tabs, carriage returns, UTF-8).
func (c *Converter) scanLines() bool {
	c.lines = c.lines[:0]
	src := c.src
	if !printable(src) {
		return false
	}
	i := 0
	for i < len(src) {
		base := i
		for i < len(src) && src[i] == ' ' {
			i++
		}
		indent := i - base
		content := i
		if nl := bytes.IndexByte(src[i:], '\n'); nl >= 0 {
			i += nl
		} else {
			i = len(src)
		}
		if indent == 0 && i-content >= 3 && (i-content == 3 || src[content+3] == ' ') {
			marker := src[content : content+3]
			if string(marker) == "---" && base == 0 && restIsComment(src, content+3, i) {
				i++
				continue // the document start Split leaves on a first document
			}
			if string(marker) == "---" || string(marker) == "..." {
				return false
			}
		}
		if content < i && src[content] != '#' {
			c.lines = append(c.lines, line{base: base, indent: indent, end: i})
		}
		i++ // the "\n"
	}
	return true
}

// printable reports whether src has only printable ASCII and newlines.
func printable(src []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(src); i += 8 {
		w := binary.LittleEndian.Uint64(src[i:])
		// A byte >= 0x7f, or a byte < 0x20 (maybe a false alarm after
		// one): check those words byte by byte.
		if (w|(w+ones))&highs != 0 || (w-0x20*ones)&^w&highs != 0 {
			if !printableBytes(src[i : i+8]) {
				return false
			}
		}
	}
	return printableBytes(src[i:])
}

func printableBytes(b []byte) bool {
	for _, ch := range b {
		if (ch < 0x20 && ch != '\n') || ch >= 0x7f {
			return false
		}
	}
	return true
}

// isSeqEntry reports whether line l has a "- " (or a lone "-") at col.
func (c *Converter) isSeqEntry(l line, col int) bool {
	p := l.base + col
	return c.src[p] == '-' && (p+1 == l.end || c.src[p+1] == ' ')
}

// node writes the block node that starts at column col of line li; inline
// is true when it follows a "- " on the same line (a scalar is then
// allowed). It returns the index of the first line after the node.
func (c *Converter) node(li, col int, inline bool) (int, bool) {
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > maxDepth {
		return 0, false
	}
	l := c.lines[li]
	if c.isSeqEntry(l, col) {
		return c.seq(li, col)
	}
	p := l.base + col
	switch c.src[p] {
	case '[', '{':
		if inline && c.value(p, l.end) {
			return li + 1, true
		}
		return 0, false
	}
	if _, _, isKey, ok := c.scanKey(p, l.end); !ok {
		return 0, false
	} else if isKey {
		return c.mapping(li, col)
	}
	if inline && c.value(p, l.end) {
		return li + 1, true
	}
	return 0, false
}

// seq writes the block sequence whose first "-" is at column col of line li.
func (c *Converter) seq(li, col int) (int, bool) {
	c.out = append(c.out, '[')
	for n := 0; ; n++ {
		if n > 0 {
			c.out = append(c.out, ',')
		}
		l := c.lines[li]
		p := l.base + col + 1
		for p < l.end && c.src[p] == ' ' {
			p++
		}
		var ok bool
		if p == l.end || c.src[p] == '#' {
			if li+1 < len(c.lines) && c.lines[li+1].indent > col {
				li, ok = c.node(li+1, c.lines[li+1].indent, false)
			} else {
				c.out = append(c.out, "null"...)
				li, ok = li+1, true
			}
		} else {
			li, ok = c.node(li, p-l.base, true)
		}
		if !ok {
			return 0, false
		}
		if li == len(c.lines) {
			break
		}
		nl := c.lines[li]
		if nl.indent > col {
			return 0, false
		}
		if nl.indent < col || !c.isSeqEntry(nl, col) {
			break
		}
	}
	c.out = append(c.out, ']')
	return li, true
}

// mapping writes the block mapping whose first key is at column col of
// line li.
func (c *Converter) mapping(li, col int) (int, bool) {
	c.out = append(c.out, '{')
	start := len(c.out)
	base := len(c.ents)
	sorted := true
	for n := 0; ; n++ {
		l := c.lines[li]
		p := l.base + col
		colon, _, isKey, ok := c.scanKey(p, l.end)
		if !ok || !isKey {
			return 0, false
		}
		if n > 0 {
			c.out = append(c.out, ',')
		}
		e := entry{start: len(c.out)}
		if !c.key(p, colon) {
			return 0, false
		}
		e.keyEnd = len(c.out)
		if n > 0 {
			prev := c.ents[len(c.ents)-1]
			switch bytes.Compare(c.out[prev.start+1:prev.keyEnd-1], c.out[e.start+1:e.keyEnd-1]) {
			case 0:
				return 0, false // duplicate key
			case 1:
				sorted = false
			}
		}
		c.out = append(c.out, ':')
		v := colon + 1
		for v < l.end && c.src[v] == ' ' {
			v++
		}
		if v == l.end || c.src[v] == '#' {
			switch {
			case li+1 < len(c.lines) && c.lines[li+1].indent > col:
				li, ok = c.node(li+1, c.lines[li+1].indent, false)
			case li+1 < len(c.lines) && c.lines[li+1].indent == col && c.isSeqEntry(c.lines[li+1], col):
				li, ok = c.seq(li+1, col)
			default:
				c.out = append(c.out, "null"...)
				li, ok = li+1, true
			}
		} else {
			li, ok = li+1, c.value(v, l.end)
		}
		if !ok {
			return 0, false
		}
		e.end = len(c.out)
		c.ents = append(c.ents, e)
		if c.depth == 1 {
			c.topEntry(e)
		}
		if li == len(c.lines) {
			break
		}
		nl := c.lines[li]
		if nl.indent > col {
			return 0, false
		}
		if nl.indent < col || c.isSeqEntry(nl, col) {
			break
		}
	}
	if !sorted && !c.sortEntries(start, base) {
		return 0, false
	}
	c.ents = c.ents[:base]
	c.out = append(c.out, '}')
	return li, true
}

// topEntry notes what TopKind needs of an entry of the top-level mapping.
func (c *Converter) topEntry(e entry) {
	key := c.out[e.start+1 : e.keyEnd-1]
	switch {
	case bytes.EqualFold(key, []byte("items")):
		c.items = true
	case bytes.EqualFold(key, []byte("kind")):
		v := c.out[e.keyEnd+1 : e.end]
		if c.kind || string(key) != "kind" || len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
			c.kindOdd = true
			return
		}
		c.kind = true
		c.kindValue = append(c.kindValue[:0], v[1:len(v)-1]...)
	}
}

// TopKind returns the kind of the document the last AppendJSON (or
// YAMLToJSON) converted on the fast path, when the JSON's top-level object
// has exactly one key that encoding/json would match to a "kind" field,
// spelt "kind", with a string value, and no key it would match to an
// "items" field: then decoding the JSON into a type with "kind" and
// without "items" fields sees the whole header. ok is false otherwise.
// The bytes are valid until the next conversion.
func (c *Converter) TopKind() (kind []byte, ok bool) {
	if !c.kind || c.kindOdd || c.items {
		return nil, false
	}
	return c.kindValue, true
}

// sortEntries rewrites the entries ents[base:] (written from out[start:])
// in key order, as encoding/json writes a map; it fails on duplicates.
func (c *Converter) sortEntries(start, base int) bool {
	ents := c.ents[base:]
	c.tmp = append(c.tmp[:0], c.out[start:]...)
	for i := range ents {
		ents[i].start -= start
		ents[i].keyEnd -= start
		ents[i].end -= start
	}
	key := func(e entry) []byte { return c.tmp[e.start+1 : e.keyEnd-1] } // without quotes
	slices.SortFunc(ents, func(a, b entry) int { return bytes.Compare(key(a), key(b)) })
	c.out = c.out[:start]
	for i, e := range ents {
		if i > 0 {
			if bytes.Equal(key(ents[i-1]), key(e)) {
				return false
			}
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, c.tmp[e.start:e.end]...)
	}
	return true
}

// scanKey looks at the scalar at p: isKey when it is followed by ": " or a
// ":" ending the line (colon is then the offset of that ":"). ok is false
// for what the converter does not handle.
func (c *Converter) scanKey(p, end int) (colon, valEnd int, isKey, ok bool) {
	src := c.src
	switch src[p] {
	case '\'', '"':
		q, ok := c.skipQuoted(p, end)
		if !ok {
			return 0, 0, false, false
		}
		if q < end && src[q] == ':' && (q+1 == end || src[q+1] == ' ') {
			return q, q, true, true
		}
		return 0, q, false, true
	}
	if !plainStart(src, p, end) {
		return 0, 0, false, false
	}
	for q := p; q < end; q++ {
		switch src[q] {
		case ':':
			if q+1 == end || src[q+1] == ' ' {
				return q, q, true, true
			}
		case ' ':
			if q+1 < end && src[q+1] == '#' {
				return 0, q, false, true
			}
		}
	}
	return 0, end, false, true
}

// plainStart reports whether a plain scalar may start at p (conservatively:
// no indicator characters).
func plainStart(src []byte, p, end int) bool {
	switch src[p] {
	case '-':
		return p+1 < end && src[p+1] != ' '
	case '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', '<', ' ':
		return false
	}
	return true
}

// skipQuoted returns the offset after the quoted scalar at p, which must
// close on its line.
func (c *Converter) skipQuoted(p, end int) (int, bool) {
	src := c.src
	q := src[p]
	for i := p + 1; i < end; i++ {
		switch src[i] {
		case q:
			if q == '\'' && i+1 < end && src[i+1] == '\'' {
				i++
				continue
			}
			return i + 1, true
		case '\\':
			if q == '"' {
				i++
			}
		}
	}
	return 0, false
}

// key writes the key that spans src[p:colon] as a JSON string. Keys must
// be plain strings needing no JSON escapes (so that they sort as written).
func (c *Converter) key(p, colon int) bool {
	src := c.src
	var text []byte
	switch src[p] {
	case '\'', '"':
		n := len(c.out)
		if !c.quoted(p, colon) {
			return false
		}
		// No escapes may have been written.
		for _, ch := range c.out[n+1 : len(c.out)-1] {
			if ch == '\\' {
				return false
			}
		}
		return true
	}
	text = src[p:colon]
	if text[len(text)-1] == ' ' || len(text) > 1000 {
		return false
	}
	switch classify(text) {
	case kindString, kindInt:
		// An integer key becomes its decimal form again: the same text.
	default:
		return false
	}
	for _, ch := range text {
		if needsEscape[ch] {
			return false
		}
	}
	c.out = append(c.out, '"')
	c.out = append(c.out, text...)
	c.out = append(c.out, '"')
	return true
}

// value writes the scalar (or empty flow collection) at p, which must end
// the line (a comment may follow).
func (c *Converter) value(p, end int) bool {
	src := c.src
	switch src[p] {
	case '\'', '"':
		q, ok := c.skipQuoted(p, end)
		if !ok || !restIsComment(src, q, end) {
			return false
		}
		return c.quoted(p, q)
	case '[', '{':
		if p+1 < end && src[p+1] == src[p]+2 && restIsComment(src, p+2, end) {
			c.out = append(c.out, src[p], src[p]+2)
			return true
		}
		if src[p] == '[' {
			return c.flowSeq(p, end)
		}
		return false
	}
	if !plainStart(src, p, end) {
		return false
	}
	q := p
	for ; q < end; q++ {
		switch src[q] {
		case ':':
			if q+1 == end || src[q+1] == ' ' {
				return false
			}
		case ' ':
			if q+1 < end && src[q+1] == '#' {
				end = q
			}
		}
	}
	for end > p && src[end-1] == ' ' {
		end--
	}
	return c.plain(src[p:end])
}

// plain writes a plain scalar as what YAML 1.1 resolves it to.
func (c *Converter) plain(text []byte) bool {
	switch classify(text) {
	case kindString:
		c.str(text)
	case kindInt:
		c.out = append(c.out, text...)
	case kindTrue:
		c.out = append(c.out, "true"...)
	case kindFalse:
		c.out = append(c.out, "false"...)
	case kindNull:
		c.out = append(c.out, "null"...)
	default:
		return false
	}
	return true
}

// flowSeq writes the one-line flow sequence of scalars at p ("[a, 'b']"),
// which must end the line. Nested collections, empty entries, a trailing
// comma, and plain scalars holding ":", "#" or "?" are left to
// sigs.k8s.io/yaml.
func (c *Converter) flowSeq(p, end int) bool {
	src := c.src
	c.out = append(c.out, '[')
	i := p + 1
	for n := 0; ; n++ {
		for i < end && src[i] == ' ' {
			i++
		}
		if i == end {
			return false
		}
		if n > 0 {
			c.out = append(c.out, ',')
		}
		switch src[i] {
		case '\'', '"':
			q, ok := c.skipQuoted(i, end)
			if !ok || !c.quoted(i, q) {
				return false
			}
			i = q
		default:
			if !plainStart(src, i, end) {
				return false
			}
			j := i
			for j < end && src[j] != ',' && src[j] != ']' {
				switch src[j] {
				case ':', '#', '?', '[', '{', '}':
					return false
				}
				j++
			}
			k := j
			for k > i && src[k-1] == ' ' {
				k--
			}
			if !c.plain(src[i:k]) {
				return false
			}
			i = j
		}
		for i < end && src[i] == ' ' {
			i++
		}
		if i == end {
			return false
		}
		if src[i] == ']' {
			c.out = append(c.out, ']')
			return restIsComment(src, i+1, end)
		}
		if src[i] != ',' {
			return false
		}
		i++
	}
}

// restIsComment reports whether src[q:end] is empty, spaces, or spaces and
// a comment.
func restIsComment(src []byte, q, end int) bool {
	if q == end {
		return true
	}
	if src[q] != ' ' {
		return false
	}
	for q < end && src[q] == ' ' {
		q++
	}
	return q == end || src[q] == '#'
}

// quoted writes the quoted scalar src[p:q] (quotes included) as a JSON
// string.
func (c *Converter) quoted(p, q int) bool {
	src := c.src
	c.out = append(c.out, '"')
	if src[p] == '\'' {
		for i := p + 1; i < q-1; i++ {
			ch := src[i]
			if ch == '\'' {
				i++ // '' is one quote
			}
			c.char(ch)
		}
	} else {
		for i := p + 1; i < q-1; i++ {
			ch := src[i]
			if ch == '\\' {
				i++
				switch src[i] {
				case '"', '\\':
					ch = src[i]
				case 'n':
					ch = '\n'
				case 't':
					ch = '\t'
				case 'r':
					ch = '\r'
				default:
					return false
				}
			}
			c.char(ch)
		}
	}
	c.out = append(c.out, '"')
	return true
}

// str writes a plain scalar as a JSON string.
func (c *Converter) str(text []byte) {
	c.out = append(c.out, '"')
	start := 0
	for i, ch := range text {
		if needsEscape[ch] {
			c.out = append(c.out, text[start:i]...)
			c.char(ch)
			start = i + 1
		}
	}
	c.out = append(c.out, text[start:]...)
	c.out = append(c.out, '"')
}

// char writes one byte of a JSON string the way encoding/json does.
func (c *Converter) char(ch byte) {
	if !needsEscape[ch] {
		c.out = append(c.out, ch)
		return
	}
	switch ch {
	case '"', '\\':
		c.out = append(c.out, '\\', ch)
	case '\n':
		c.out = append(c.out, '\\', 'n')
	case '\r':
		c.out = append(c.out, '\\', 'r')
	case '\t':
		c.out = append(c.out, '\\', 't')
	default:
		const hex = "0123456789abcdef"
		c.out = append(c.out, '\\', 'u', '0', '0', hex[ch>>4], hex[ch&15])
	}
}

// needsEscape marks the bytes encoding/json escapes in strings (HTML
// characters included).
var needsEscape = func() (t [256]bool) {
	for i := range 0x20 {
		t[i] = true
	}
	for _, ch := range `"\<>&` {
		t[ch] = true
	}
	return t
}()
