package runtime

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// ReasonKernelRefused is the reason of the Warning Event a sink records on
// a Service one of whose kernel objects the kernel refused.
const ReasonKernelRefused = "KernelRefused"

// kubeEvents records Events through the API (deploy/base/rbac.yaml lets
// the sinks create and patch events).
type kubeEvents struct {
	b   record.EventBroadcaster
	rec record.EventRecorder
}

// newKubeEvents starts recording Events through cs, from component on
// node; close stops it.
func newKubeEvents(cs kubernetes.Interface, component, node string) *kubeEvents {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	return &kubeEvents{b: b, rec: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component, Host: node})}
}

// Refused records a Warning Event on the Service.
func (k *kubeEvents) Refused(namespace, name, message string) {
	ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: namespace, Name: name}
	k.rec.Event(ref, corev1.EventTypeWarning, ReasonKernelRefused, message)
}

func (k *kubeEvents) close() { k.b.Shutdown() }
