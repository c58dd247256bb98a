package iptables

import "strings"

// arenaChunk is the largest size of an arena's text chunks (about 20
// services of one port and ten endpoints). The first is 4 KB, each next one
// twice the last: what an arena allocates stays within twice what it
// holds, plus 4 KB.
const arenaChunk = 64 << 10

// arena holds the renderings of one full sync: their text and spans are
// carved from large chunks, not allocated per service. A chunk lives as
// long as any rendering in it (family.renderAll bounds what that keeps).
type arena struct {
	gen    int32
	text   []byte // free space of the current text chunk (len 0)
	chains []span // the current span chunks, len the part used
	tops   []topSpan
	chunks int // text chunks allocated
	used   int // text bytes carved
	// names holds the strings of renderings (chain names): written once,
	// a Builder's bytes are never moved, so its String is a chunk the
	// strings are carved from.
	names      strings.Builder
	nameChunks int
}

// str returns a copy of b carved from the arena's strings.
func (a *arena) str(b []byte) string {
	start := a.room(len(b))
	a.names.Write(b)
	return a.names.String()[start:]
}

// room makes room for n bytes in the arena's strings and returns where
// they start.
func (a *arena) room(n int) int {
	if a.names.Cap()-a.names.Len() < n {
		a.names = strings.Builder{}
		a.names.Grow(max(n, min(1<<10<<a.nameChunks, 16<<10)))
		a.nameChunks = min(a.nameChunks+1, 4)
	}
	return a.names.Len()
}

// nextChunk is the size of the arena's next text chunk.
func (a *arena) nextChunk() int { return min(4<<10<<a.chunks, arenaChunk) }

// grew counts a text chunk allocated.
func (a *arena) grew() { a.chunks = min(a.chunks+1, 8) }

// carve returns a copy of s in free's chunk (a new chunk when it is full),
// with no spare capacity; nil when s is empty.
func carve[T any](free *[]T, s []T) []T {
	if len(s) == 0 {
		return nil
	}
	if cap(*free)-len(*free) < len(s) {
		// Chunks double like the text's, from 16 to 512 elements (a
		// full sync that renders few services wastes little).
		*free = make([]T, 0, max(len(s), min(2*cap(*free), 512), 16))
	}
	start := len(*free)
	*free = append(*free, s...)
	return (*free)[start:len(*free):len(*free)]
}

// copyIn copies a rendering into a (compaction of an older arena).
func (a *arena) copyIn(r *rendered) {
	if len(a.text)+len(r.buf) > cap(a.text) {
		a.text = make([]byte, 0, max(a.nextChunk(), 2*len(r.buf)))
		a.grew()
	}
	a.used += len(r.buf)
	start := len(a.text)
	a.text = append(a.text, r.buf...)
	r.buf = a.text[start:len(a.text):len(a.text)]
	a.text = a.text[len(a.text):]
	r.chains, r.tops = carve(&a.chains, r.chains), carve(&a.tops, r.tops)
	for i := range r.chains {
		start := a.room(len(r.chains[i].name))
		a.names.WriteString(r.chains[i].name)
		r.chains[i].name = a.names.String()[start:]
	}
	r.gen = a.gen
}

// exact returns a copy of s with no spare capacity (nil when empty).
func exact[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}
