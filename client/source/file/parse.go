package file

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"

	gojson "github.com/goccy/go-json"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/internal/manifest"
	"github.com/proxysinks/proxysinks/client/nodelocal"
)

// ref names an object of a manifest.
type ref struct {
	kind, namespace, name string
}

// sum is a hash of bytes, a change detector only: an unchanged object or
// document is not processed again. It is a 64-bit hash/maphash with the
// process's seed, so two different contents share a sum with probability
// 2^-64; no adversary is involved (whoever writes the manifests controls
// the service list anyway), so a cryptographic hash would only cost time.
type sum uint64

var seed = maphash.MakeSeed()

func hashBytes(b []byte) sum { return sum(maphash.Bytes(seed, b)) }

// doc is one object read from a manifest file.
type doc struct {
	ref ref
	// sum is the hash of the object's JSON: an unchanged object is not
	// applied again.
	sum sum
	// obj is the decoded object (*corev1.Service, *discoveryv1.EndpointSlice,
	// *corev1.Node, *networkingv1.ServiceCIDR, or their node-local forms)
	// until the source has applied it (then nil, to keep memory low); nil
	// too when decoding failed (err says why).
	obj any
	err *client.ObjectError
	// in and at are the file and the index of the document holding the
	// object.
	in string
	at int
}

// parsed is what parse read from a file.
type parsed struct {
	docs  []doc
	cache chunkCache
	// bad are the documents (or List items) that could not be read as
	// Kubernetes objects, each named by file and index: skipped.
	bad []*client.ObjectError
	// content counts the documents holding something (an object of any
	// kind, a List, even an empty one). A file with no content and nothing
	// bad reads as empty.
	content int
}

// empty reports whether the file reads as empty: no document holds
// anything (an empty file, only comments, /dev/null).
func (p *parsed) empty() bool { return p.content == 0 && len(p.bad) == 0 }

// chunkCache holds the objects of each document of a file by the hash of
// the document's bytes, so that a re-read decodes only the documents that
// changed.
type chunkCache map[sum]cachedChunk

type cachedChunk struct {
	index int // the document's position, which error messages name
	// docs are the document's objects, a part of the file's docs: once
	// applied, their obj is nil.
	docs []doc
	// bad and content are the document's part of parsed's.
	bad     []*client.ObjectError
	content bool
}

// header is what every Kubernetes object starts with.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
}

// converters are reused between documents and files.
var converters = sync.Pool{New: func() any { return new(manifest.Converter) }}

// options say what parse reads for a source beyond Services,
// EndpointSlices and Nodes, and how it converts them.
type options struct {
	// proxyName is the source's Config.ProxyName (see convertDocs).
	proxyName string
	// serviceCIDRs reads ServiceCIDR objects too (Config.Needs); other
	// sources ignore them like any other kind.
	serviceCIDRs bool
}

// parseFile splits a multi-document YAML (or JSON) file into the objects a
// source reads: Services, EndpointSlices and Nodes, also inside List
// objects. Other kinds are ignored. It fails only when the file cannot be
// split into documents; a document (or List item) that is not a Kubernetes
// object is skipped and listed in parsed.bad, and an object that does not
// decode is returned with its error. Documents found unchanged in prev (the
// file's previous cache, may be nil) are not decoded again; the returned
// cache is the one for this content.
func parseFile(name string, data []byte, prev chunkCache) (parsed, error) {
	return parse(name, data, prev, options{}, nil)
}

// parseConverted is parseFile with opts, and the Services, EndpointSlices
// and ServiceCIDRs come converted for the node-local state (convertDocs),
// the conversion done in the decoding workers, so that only the state's
// bookkeeping is left serial.
func parseConverted(name string, data []byte, prev chunkCache, opts options) (parsed, error) {
	return parse(name, data, prev, opts, func(docs []doc) { convertDocs(docs, opts.proxyName) })
}

// parse is parseFile with opts, and post called on each newly decoded
// document's objects, in the worker that decoded them.
func parse(name string, data []byte, prev chunkCache, opts options, post func([]doc)) (parsed, error) {
	chunks, err := manifest.Split(data)
	if err != nil {
		var se *manifest.SeparatorError
		if errors.As(err, &se) {
			return parsed{}, fmt.Errorf("document %d: %w", se.Index, err)
		}
		return parsed{}, err
	}
	sums := make([]sum, len(chunks))
	results := make([][]doc, len(chunks))
	bad := make([][]*client.ObjectError, len(chunks))
	content := make([]bool, len(chunks))
	// Hash, and decode the documents not found unchanged in prev, in
	// parallel: converting and decoding is most of the cost of a large
	// file.
	workers := min(runtime.GOMAXPROCS(0), len(chunks))
	var wg sync.WaitGroup
	var next atomic.Int64
	for range workers {
		wg.Go(func() {
			conv := converters.Get().(*manifest.Converter)
			defer converters.Put(conv)
			for {
				i := int(next.Add(1) - 1)
				if i >= len(chunks) {
					return
				}
				sums[i] = hashBytes(chunks[i])
				if c, ok := prev[sums[i]]; ok && (c.index == i || !hasErr(c.docs) && len(c.bad) == 0) {
					results[i], bad[i], content[i] = c.docs, c.bad, c.content
					continue
				}
				results[i], bad[i], content[i] = parseDocument(conv, chunks[i], name, i, opts.serviceCIDRs)
				if post != nil {
					post(results[i])
				}
			}
		})
	}
	wg.Wait()
	n := 0
	for _, r := range results {
		n += len(r)
	}
	p := parsed{docs: make([]doc, 0, n), cache: make(chunkCache, len(chunks))}
	for i, r := range results {
		// The cache views the returned docs, so that it sees the objects
		// dropped once applied and keeps nothing alive by itself.
		p.docs = append(p.docs, r...)
		mine := p.docs[len(p.docs)-len(r) : len(p.docs) : len(p.docs)]
		for j := range mine {
			mine[j].in, mine[j].at = name, i
		}
		p.cache[sums[i]] = cachedChunk{index: i, docs: mine, bad: bad[i], content: content[i]}
		p.bad = append(p.bad, bad[i]...)
		if content[i] {
			p.content++
		}
	}
	return p, nil
}

func hasErr(docs []doc) bool {
	for _, d := range docs {
		if d.err != nil {
			return true
		}
	}
	return false
}

// parseDocument decodes document i of a file: its objects, the parts that
// are not Kubernetes objects (skipped), and whether it holds anything.
func parseDocument(conv *manifest.Converter, chunk []byte, name string, i int, cidrs bool) ([]doc, []*client.ObjectError, bool) {
	if len(bytes.TrimSpace(chunk)) == 0 {
		return nil, nil, false
	}
	var js, kind []byte
	if utilyaml.IsJSONBuffer(chunk) {
		// A copy in the converter's buffer: go-json's pooled decoders
		// keep a reference to their last input, which must not be the
		// whole file.
		js = conv.Scratch(chunk)
	} else {
		var err error
		if js, err = conv.YAMLToJSON(chunk); err != nil {
			return nil, []*client.ObjectError{{Source: fmt.Sprintf("%s#%d", name, i), Err: fmt.Errorf("not YAML: %w", err)}}, false
		}
		kind, _ = conv.TopKind()
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil, nil, false // a document holding only comments
	}
	if kind != nil && asciiOnly(js) {
		if d, ok := decodeByKind(js, kind, cidrs); ok {
			return []doc{d}, nil, true
		}
	}
	where := fmt.Sprintf("%s#%d", name, i)
	docs, bad := appendObjects(nil, nil, js, where, cidrs)
	// The document itself was read unless it is its own bad entry (bad
	// List items do not make the List unread).
	read := len(bad) == 0 || bad[0].Source != where
	return docs, bad, read
}

// decodeByKind decodes a document whose kind is known (manifest's
// Converter.TopKind: a single "kind" key, no "items") straight into its
// type with go-json, reading the header from the object: the object's
// TypeMeta and ObjectMeta have the header's fields with the same names and
// types, so whenever the object decodes, the header would have decoded to
// the same values. ok is false for other kinds and on any error (the
// caller then goes the long way, for encoding/json's error). ServiceCIDRs
// are read only with cidrs.
func decodeByKind(js, kind []byte, cidrs bool) (doc, bool) {
	switch string(kind) {
	case "Service":
		return decodeFast(js, new(corev1.Service), true)
	case "EndpointSlice":
		return decodeFast(js, new(discoveryv1.EndpointSlice), true)
	case "Node":
		return decodeFast(js, new(corev1.Node), false)
	case "ServiceCIDR":
		if cidrs {
			return decodeFast(js, new(networkingv1.ServiceCIDR), false)
		}
	}
	return doc{}, false
}

// apiObject is what the decoded kinds implement.
type apiObject interface {
	metav1.Object
	GetObjectKind() schema.ObjectKind
}

// decodeFast decodes js into obj with go-json and returns its doc; a
// namespaced object gets the defaulted namespace.
func decodeFast(js []byte, obj apiObject, namespaced bool) (doc, bool) {
	if gojson.Unmarshal(js, obj) != nil {
		return doc{}, false
	}
	d := newDoc(obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), js)
	if namespaced {
		obj.SetNamespace(d.ref.namespace)
	}
	d.obj = obj
	return d, true
}

// newDoc returns the doc of an object with its header's values, the
// namespace defaulted.
func newDoc(kind, namespace, name string, js []byte) doc {
	d := doc{ref: ref{kind: kind, namespace: namespace, name: name}, sum: hashBytes(js)}
	if d.ref.namespace == "" && kind != "Node" && kind != "ServiceCIDR" {
		d.ref.namespace = "default"
	}
	return d
}

// appendObjects appends the objects of a document (or List item) to out,
// and what is not a Kubernetes object to bad: a bad List item is skipped,
// the others are read. ServiceCIDRs are read only with cidrs.
func appendObjects(out []doc, bad []*client.ObjectError, js []byte, source string, cidrs bool) ([]doc, []*client.ObjectError) {
	fast := asciiOnly(js)
	h, err := decode[header](js, fast)
	if err != nil {
		// Not even an object header: the document is not a Kubernetes
		// object at all.
		return out, append(bad, &client.ObjectError{Source: source, Err: fmt.Errorf("not a Kubernetes object: %w", err)})
	}
	if h.Kind == "List" || (len(h.Items) > 0 && len(h.Kind) > 4 && h.Kind[len(h.Kind)-4:] == "List") {
		for j, item := range h.Items {
			out, bad = appendObjects(out, bad, item, fmt.Sprintf("%s.items[%d]", source, j), cidrs)
		}
		return out, bad
	}
	d := newDoc(h.Kind, h.Metadata.Namespace, h.Metadata.Name, js)
	switch h.Kind {
	case "Service":
		var s *corev1.Service
		if s, err = decode[corev1.Service](js, fast); err == nil {
			s.Namespace = d.ref.namespace
			d.obj = s
		}
	case "EndpointSlice":
		var es *discoveryv1.EndpointSlice
		if es, err = decode[discoveryv1.EndpointSlice](js, fast); err == nil {
			es.Namespace = d.ref.namespace
			d.obj = es
		}
	case "Node":
		var n *corev1.Node
		if n, err = decode[corev1.Node](js, fast); err == nil {
			d.obj = n
		}
	case "ServiceCIDR":
		if !cidrs {
			return out, bad
		}
		var c *networkingv1.ServiceCIDR
		if c, err = decode[networkingv1.ServiceCIDR](js, fast); err == nil {
			d.obj = c
		}
	default:
		return out, bad
	}
	if err != nil {
		d.err = &client.ObjectError{Kind: h.Kind, Namespace: d.ref.namespace, Name: d.ref.name, Source: source, Err: err}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			d.err.Field = te.Field
			d.err.Err = typeError{te}
		}
	}
	return append(out, d), bad
}

// typeError words a JSON type error as `cannot use string as int32` (the
// field is the ObjectError's) and keeps it in the chain.
type typeError struct{ te *json.UnmarshalTypeError }

func (e typeError) Error() string { return fmt.Sprintf("cannot use %s as %s", e.te.Value, e.te.Type) }

func (e typeError) Unwrap() error { return e.te }

// decode decodes JSON into a new T the way encoding/json does. When fast
// (the JSON is plain ASCII) it tries github.com/goccy/go-json first, three
// times faster on these types; on any error, and for other input, it uses
// encoding/json, so errors (and the result whenever go-json fails) are
// encoding/json's. FuzzDecode checks that both agree.
func decode[T any](js []byte, fast bool) (*T, error) {
	v := new(T)
	if fast {
		if err := gojson.Unmarshal(js, v); err == nil {
			return v, nil
		}
		v = new(T)
	}
	if err := json.Unmarshal(js, v); err != nil {
		return nil, err
	}
	return v, nil
}

// asciiOnly reports whether b has no byte above 0x7f.
func asciiOnly(b []byte) bool {
	for len(b) >= 8 {
		w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		if w&0x8080808080808080 != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// convertDocs replaces the decoded Services, EndpointSlices and
// ServiceCIDRs of docs by their node-local forms
// (*nodelocal.ConvertedService, *nodelocal.ParsedSlice,
// *nodelocal.ParsedServiceCIDR).
func convertDocs(docs []doc, proxyName string) {
	for i := range docs {
		switch o := docs[i].obj.(type) {
		case *corev1.Service:
			c := nodelocal.ConvertServiceObject(o, proxyName)
			docs[i].obj = &c
		case *discoveryv1.EndpointSlice:
			p := nodelocal.ParseSliceObject(o)
			docs[i].obj = &p
		case *networkingv1.ServiceCIDR:
			p := nodelocal.ParseServiceCIDRObject(o)
			docs[i].obj = &p
		}
	}
}
