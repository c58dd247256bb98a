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
func legacyParse(name string, data []byte, _ chunkCache, _ string) ([]doc, chunkCache, error) {
	_ = sha256.Sum256(data)
	docs, err := legacyParseFile(name, data)
	return docs, nil, err
}

func legacySum(s [sha256.Size]byte) sum { return sum(binary.LittleEndian.Uint64(s[:])) }

// legacyParseFile is parseFile as it was before the fast path: apimachinery's
// YAMLReader, sigs.k8s.io/yaml and encoding/json for every document, SHA-256
// of each object's JSON. BenchmarkLoad runs it as the baseline.
func legacyParseFile(name string, data []byte) ([]doc, error) {
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
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		chunks = append(chunks, chunk)
	}
	results := make([][]doc, len(chunks))
	errs := make([]error, len(chunks))
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
				results[i], errs[i] = legacyParseDocument(chunks[i], name, i)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var out []doc
	for _, r := range results {
		out = append(out, r...)
	}
	return out, nil
}

// legacyParseDocument decodes document i of a file.
func legacyParseDocument(chunk []byte, name string, i int) ([]doc, error) {
	if len(bytes.TrimSpace(chunk)) == 0 {
		return nil, nil
	}
	js := chunk
	if !utilyaml.IsJSONBuffer(chunk) {
		var err error
		if js, err = yaml.YAMLToJSON(chunk); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, nil // a document holding only comments
	}
	return legacyAppendObjects(nil, js, fmt.Sprintf("%s#%d", name, i))
}

func legacyAppendObjects(out []doc, js []byte, source string) ([]doc, error) {
	var h header
	if err := json.Unmarshal(js, &h); err != nil {
		// Not even an object header: the document is not a Kubernetes
		// object at all.
		return nil, fmt.Errorf("%s: not a Kubernetes object: %w", source, err)
	}
	if h.Kind == "List" || (len(h.Items) > 0 && len(h.Kind) > 4 && h.Kind[len(h.Kind)-4:] == "List") {
		for j, item := range h.Items {
			var err error
			if out, err = legacyAppendObjects(out, item, fmt.Sprintf("%s.items[%d]", source, j)); err != nil {
				return nil, err
			}
		}
		return out, nil
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
		return out, nil
	}
	if err != nil {
		d.err = &client.ObjectError{Kind: h.Kind, Namespace: d.ref.namespace, Name: d.ref.name, Source: source, Err: err}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			d.err.Field = te.Field
			d.err.Err = fmt.Errorf("cannot use %s as %s", te.Value, te.Type)
		}
	}
	return append(out, d), nil
}
