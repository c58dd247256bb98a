package manifest

import (
	"bytes"
	"slices"
)

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
