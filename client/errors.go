package client

import (
	"fmt"
	"strings"
)

// ObjectError is a Kubernetes object that a source could not use: which
// object (kind, namespace, name), which field, and why. The object is skipped
// and counted; everything else keeps working. A part of a manifest that
// names no object (a file that cannot be read, a document that is not a
// Kubernetes object) has only Source and Err.
type ObjectError struct {
	// Kind is the object's kind: Service, EndpointSlice, Node or
	// ServiceCIDR.
	Kind      string
	Namespace string
	Name      string
	// Field is the JSON path of the bad field, e.g.
	// "spec.ports[1].protocol"; empty when the whole object is bad.
	Field string
	// Source says where the object came from, e.g. a file name and document
	// index; empty for API objects.
	Source string
	Err    error
}

// Error returns e.g. `Service default/web: spec.clusterIPs[0]: invalid IP "10.0.0.300"`,
// or `m.yaml#3: not a Kubernetes object: ...` for a part of a manifest that
// names no object.
func (e *ObjectError) Error() string {
	var b strings.Builder
	if e.Kind == "" && e.Name == "" && e.Source != "" {
		b.WriteString(e.Source)
		b.WriteString(": ")
		if e.Err != nil {
			b.WriteString(e.Err.Error())
		} else {
			b.WriteString("invalid")
		}
		return b.String()
	}
	b.WriteString(e.Kind)
	b.WriteByte(' ')
	if e.Namespace != "" {
		b.WriteString(e.Namespace)
		b.WriteByte('/')
	}
	b.WriteString(e.Name)
	if e.Source != "" {
		fmt.Fprintf(&b, " (%s)", e.Source)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("invalid")
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *ObjectError) Unwrap() error { return e.Err }
