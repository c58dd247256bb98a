package manifest

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
