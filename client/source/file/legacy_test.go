package file

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/proxysinks/proxysinks/client"
)

// legacyParse has parseFile's signature over legacyParseFile; it also
// hashes the whole file with SHA-256, as reload did.
func legacyParse(name string, data []byte, _ chunkCache, _ options) (parsed, error) {
	_ = sha256.Sum256(data)
	return legacyParseFile(name, data)
}

func legacySum(s [sha256.Size]byte) sum { return sum(binary.LittleEndian.Uint64(s[:])) }

// legacyParseFile is parseFile as it was before the fast path: apimachinery's
// YAMLReader, sigs.k8s.io/yaml and encoding/json for every document, SHA-256
// of each object's JSON, with today's per-document isolation.
// BenchmarkLoad runs it as the baseline.
func legacyParseFile(name string, data []byte) (parsed, error) {
	// Split first (cheap), then decode the documents in parallel: YAML
	// decoding is most of the cost of a large file.
	var chunks [][]byte
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		chunk, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return parsed{}, fmt.Errorf("document %d: %w", i, err)
		}
		chunks = append(chunks, chunk)
	}
	results := make([][]doc, len(chunks))
	bad := make([][]*client.ObjectError, len(chunks))
	content := make([]bool, len(chunks))
	workers := min(runtime.GOMAXPROCS(0), len(chunks))
	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(chunks) {
					return
				}
				results[i], bad[i], content[i] = legacyParseDocument(chunks[i], name, i)
			}
		})
	}
	wg.Wait()
	var p parsed
	for i, r := range results {
		for _, d := range r {
			d.in, d.at = name, i
			p.docs = append(p.docs, d)
		}
		p.bad = append(p.bad, bad[i]...)
		if content[i] {
			p.content++
		}
	}
	return p, nil
}

// legacyParseDocument decodes document i of a file.
func legacyParseDocument(chunk []byte, name string, i int) ([]doc, []*client.ObjectError, bool) {
	if len(bytes.TrimSpace(chunk)) == 0 {
		return nil, nil, false
	}
	where := fmt.Sprintf("%s#%d", name, i)
	js := chunk
	if !utilyaml.IsJSONBuffer(chunk) {
		var err error
		if js, err = yaml.YAMLToJSON(chunk); err != nil {
			return nil, []*client.ObjectError{{Source: where, Err: fmt.Errorf("not YAML: %w", err)}}, false
		}
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, nil, false // a document holding only comments
	}
	docs, bad := legacyAppendObjects(nil, nil, js, where)
	return docs, bad, len(bad) == 0 || bad[0].Source != where
}

func legacyAppendObjects(out []doc, bad []*client.ObjectError, js []byte, source string) ([]doc, []*client.ObjectError) {
	var h header
	if err := json.Unmarshal(js, &h); err != nil {
		// Not even an object header: the document is not a Kubernetes
		// object at all.
		return out, append(bad, &client.ObjectError{Source: source, Err: fmt.Errorf("not a Kubernetes object: %w", err)})
	}
	if h.Kind == "List" || (len(h.Items) > 0 && len(h.Kind) > 4 && h.Kind[len(h.Kind)-4:] == "List") {
		for j, item := range h.Items {
			out, bad = legacyAppendObjects(out, bad, item, fmt.Sprintf("%s.items[%d]", source, j))
		}
		return out, bad
	}
	d := doc{ref: ref{kind: h.Kind, namespace: h.Metadata.Namespace, name: h.Metadata.Name}, sum: legacySum(sha256.Sum256(js))}
	if d.ref.namespace == "" && h.Kind != "Node" {
		d.ref.namespace = "default"
	}
	var err error
	switch h.Kind {
	case "Service":
		s := &corev1.Service{}
		if err = json.Unmarshal(js, s); err == nil {
			s.Namespace = d.ref.namespace
			d.obj = s
		}
	case "EndpointSlice":
		es := &discoveryv1.EndpointSlice{}
		if err = json.Unmarshal(js, es); err == nil {
			es.Namespace = d.ref.namespace
			d.obj = es
		}
	case "Node":
		n := &corev1.Node{}
		if err = json.Unmarshal(js, n); err == nil {
			d.obj = n
		}
	default:
		return out, bad
	}
	if err != nil {
		d.err = &client.ObjectError{Kind: h.Kind, Namespace: d.ref.namespace, Name: d.ref.name, Source: source, Err: err}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			d.err.Field = te.Field
			d.err.Err = fmt.Errorf("cannot use %s as %s", te.Value, te.Type)
		}
	}
	return append(out, d), bad
}
