package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// NewRecorder returns a recorder of Events from component on host,
// written through api's EventSink by client-go's event broadcaster (which
// aggregates repeated Events and patches their count, and rate-limits
// them); stop ends it.
func NewRecorder(api API, component, host string) (rec record.EventRecorder, stop func()) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(api.EventSink())
	return b.NewRecorder(Scheme, corev1.EventSource{Component: component, Host: host}), b.Shutdown
}

// eventSink writes Events as client-go's typed EventSinkImpl does, in the
// Event's own namespace. Its errors are the REST client's, unwrapped:
// client-go's recorder tells by their type whether to retry.
type eventSink struct{ c rest.Interface }

// of addresses r to the events of e's namespace.
func (eventSink) of(r *rest.Request, e *corev1.Event) *rest.Request {
	return r.NamespaceIfScoped(e.Namespace, e.Namespace != "").Resource("events")
}

// Create creates e.
func (s eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.of(s.c.Post(), e).Body(e).Do(context.Background()).Into(out)
	return out, err
}

// Update replaces e (its ResourceVersion set).
func (s eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.of(s.c.Put(), e).Name(e.Name).Body(e).Do(context.Background()).Into(out)
	return out, err
}

// Patch applies the strategic merge patch data to the Event named as e.
func (s eventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := s.of(s.c.Patch(types.StrategicMergePatchType), e).Name(e.Name).Body(data).Do(context.Background()).Into(out)
	return out, err
}
