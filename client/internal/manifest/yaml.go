package manifest

import (
	"bytes"
	"encoding/binary"

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
