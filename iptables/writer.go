package iptables

import (
	"net/netip"
	"strconv"
	"strings"
)

// writer appends rule lines to a rendered service. Its text is
// buf[:n]: appending copies into buf and advances n, so rendering stores
// no pointer into the heap (which costs a write barrier while the garbage
// collector marks) except when buf must grow.
//
// A rule is written as w.rule(chain), then its arguments, then
// w.inChain(chain) or w.inTop(slot), which ends the line and records
// where it belongs.
type writer struct {
	buf   []byte // len(buf) is the capacity
	n     int
	r     *rendered
	start int // start of the current line
	// minGrow is the least buf grows to (an arena's chunk size); grown
	// reports that it did.
	minGrow int
	grown   bool
}

// grow makes room for at least k more bytes.
func (w *writer) grow(k int) {
	b := make([]byte, max(w.minGrow, 2*(w.n+k)))
	copy(b, w.buf[:w.n])
	w.buf, w.grown = b, true
}

// raw appends text as it is.
func (w *writer) raw(text string) *writer {
	if w.n+len(text) > len(w.buf) {
		w.grow(len(text))
	}
	w.n += copy(w.buf[w.n:], text)
	return w
}

// rawBytes appends text as it is.
func (w *writer) rawBytes(text []byte) *writer {
	if w.n+len(text) > len(w.buf) {
		w.grow(len(text))
	}
	w.n += copy(w.buf[w.n:], text)
	return w
}

// char appends one byte.
func (w *writer) char(c byte) *writer {
	if w.n == len(w.buf) {
		w.grow(1)
	}
	w.buf[w.n] = c
	w.n++
	return w
}

// rule starts a rule line, "-A chain".
func (w *writer) rule(chain string) *writer {
	w.start = w.n
	return w.raw("-A ").raw(chain)
}

// ruleFrom starts a rule line with its first bytes already built
// ("-A chain..."; see rule).
func (w *writer) ruleFrom(head []byte) *writer {
	w.start = w.n
	return w.rawBytes(head)
}

// args appends arguments, each after a space.
func (w *writer) args(args ...string) *writer {
	for _, s := range args {
		w.char(' ').raw(s)
	}
	return w
}

// host appends a flag and a host address, without the prefix length
// iptables-save prints ("-s 10.0.0.1").
func (w *writer) host(flag string, a netip.Addr) *writer {
	var tmp [64]byte
	b := append(append(append(tmp[:0], ' '), flag...), ' ')
	return w.rawBytes(a.AppendTo(b))
}

// port appends a flag and a port number.
func (w *writer) port(flag string, p int) *writer {
	var tmp [32]byte
	b := append(append(append(tmp[:0], ' '), flag...), ' ')
	return w.rawBytes(strconv.AppendInt(b, int64(p), 10))
}

// comment appends "-m comment --comment C", C the concatenation of parts
// (not built as a string first), quoted as iptables-save does.
func (w *writer) comment(parts ...string) *writer {
	w.raw(" -m comment --comment \"")
	for _, p := range parts {
		w.escaped(p)
	}
	return w.char('"')
}

// escaped appends a comment's text, quotes and backslashes escaped as
// iptables-save prints them (both backends).
func (w *writer) escaped(s string) *writer {
	if !strings.ContainsAny(s, "\"\\") {
		return w.raw(s)
	}
	var tmp [256]byte
	return w.rawBytes(appendEscaped(tmp[:0], s))
}

// appendEscaped appends s with quotes and backslashes escaped.
func appendEscaped(b []byte, s string) []byte {
	if !strings.ContainsAny(s, "\"\\") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return b
}

// endLine finishes the line and returns its span.
func (w *writer) endLine() span {
	w.char('\n')
	w.r.lines++
	return span{start: int32(w.start), end: int32(w.n), lines: 1}
}

// inTop finishes the line as a rule of a top-level chain.
func (w *writer) inTop(slot int) {
	s := w.endLine()
	w.r.tops = append(w.r.tops, topSpan{slot: int32(slot), start: s.start, end: s.end})
}

// inChain finishes the line as a rule of the service's chain name. A
// chain's lines are written one after the other: the line extends the
// current chain or starts the next.
func (w *writer) inChain(name string) {
	sp := w.endLine()
	r := w.r
	if n := len(r.chains); n > 0 && r.chains[n-1].name == name && r.chains[n-1].end == sp.start {
		r.chains[n-1].end = sp.end
		r.chains[n-1].lines++
		return
	}
	r.chains = append(r.chains, span{name: name, start: sp.start, end: sp.end, lines: 1})
}
