package file

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/proxysinks/proxysinks/client"
)

// ref names an object of a manifest.
type ref struct {
	kind, namespace, name string
}

// doc is one object read from a manifest file.
type doc struct {
	ref ref
	// raw is the object's JSON: an unchanged object is not processed again.
	raw []byte
	// obj is the decoded *corev1.Service, *discoveryv1.EndpointSlice or
	// *corev1.Node; nil when decoding failed (err says why).
	obj any
	err *client.ObjectError
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

// parseFile splits a multi-document YAML (or JSON) file into the objects a
// source reads: Services, EndpointSlices and Nodes, also inside List
// objects. Other kinds are ignored. It fails only when the file is not
// valid YAML; an object that does not decode is returned with its error.
func parseFile(name string, data []byte) ([]doc, error) {
	var out []doc
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		chunk, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		if len(bytes.TrimSpace(chunk)) == 0 {
			continue
		}
		js := chunk
		if !utilyaml.IsJSONBuffer(chunk) {
			if js, err = yaml.YAMLToJSON(chunk); err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
			}
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue // a document holding only comments
		}
		out, err = appendObjects(out, js, fmt.Sprintf("%s#%d", name, i))
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func appendObjects(out []doc, js []byte, source string) ([]doc, error) {
	var h header
	if err := json.Unmarshal(js, &h); err != nil {
		// Not even an object header: the document is not a Kubernetes
		// object at all.
		return nil, fmt.Errorf("%s: not a Kubernetes object: %w", source, err)
	}
	if h.Kind == "List" || (len(h.Items) > 0 && len(h.Kind) > 4 && h.Kind[len(h.Kind)-4:] == "List") {
		for j, item := range h.Items {
			var err error
			if out, err = appendObjects(out, item, fmt.Sprintf("%s.items[%d]", source, j)); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	d := doc{ref: ref{kind: h.Kind, namespace: h.Metadata.Namespace, name: h.Metadata.Name}, raw: js}
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
