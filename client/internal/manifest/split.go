// Package manifest splits and converts Kubernetes manifests quickly: a
// multi-document splitter with the exact behaviour of apimachinery's
// YAMLReader, and a YAML-to-JSON converter for the block-style subset that
// kubectl and sigs.k8s.io/yaml emit, which gives the same bytes as
// sigs.k8s.io/yaml.YAMLToJSON and defers to it for everything else.
package manifest

import (
	"bytes"
	"fmt"
	"unicode"
)

// SeparatorError is a line starting with "---" followed by something other
// than spaces or a comment; Index is the number of documents before it.
type SeparatorError struct {
	Index int
	Rest  string
}

func (e *SeparatorError) Error() string {
	return fmt.Sprintf("invalid Yaml document separator: %s", e.Rest)
}

// Split splits a multi-document file at its "---" lines, as
// k8s.io/apimachinery/pkg/util/yaml.YAMLReader does: lines end in "\n"
// ("\r\n" becomes "\n", a last line without one gets one), separator lines
// end the document before them (a separator with no document before it
// stays as the first line of the next one), and no document is empty. The chunks alias data when
// no line needed rewriting.
func Split(data []byte) ([][]byte, error) {
	var chunks [][]byte
	start := 0 // start of the current document in data
	// buf holds the current document when it had to be rewritten (CRLF,
	// missing final newline); nil while the document is data[start:pos].
	var buf []byte
	rewritten := false
	pos := 0
	flush := func(end int) {
		if rewritten {
			chunks = append(chunks, buf)
			buf = nil
			rewritten = false
		} else if end > start {
			chunks = append(chunks, data[start:end:end])
		}
	}
	for pos < len(data) {
		nl := bytes.IndexByte(data[pos:], '\n')
		var line []byte // without the end of line
		next := len(data)
		if nl >= 0 {
			line = data[pos : pos+nl]
			next = pos + nl + 1
		} else {
			line = data[pos:]
		}
		crlf := len(line) > 0 && line[len(line)-1] == '\r' && nl >= 0
		if crlf {
			line = line[:len(line)-1]
		}
		if bytes.HasPrefix(line, []byte("---")) {
			rest := bytes.TrimFunc(line[3:], unicode.IsSpace)
			if len(rest) > 0 && rest[0] != '#' {
				return nil, &SeparatorError{Index: len(chunks), Rest: string(rest)}
			}
			if pos > start || rewritten {
				flush(pos)
				pos = next
				start = pos
				continue
			}
			// A separator opening a document stays in it, as YAMLReader
			// keeps it (YAML reads it as the document start).
		}
		if crlf || nl < 0 {
			// This line must be rewritten: copy the document so far.
			if !rewritten {
				buf = append([]byte(nil), data[start:pos]...)
				rewritten = true
			}
			buf = append(buf, line...)
			buf = append(buf, '\n')
		} else if rewritten {
			buf = append(buf, data[pos:next]...)
		}
		pos = next
	}
	flush(pos)
	return chunks, nil
}
