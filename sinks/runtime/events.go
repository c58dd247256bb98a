package runtime

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/proxysinks/proxysinks/client/source/kube"
)

// ReasonKernelRefused is the reason of the Warning Event a sink records on
// a Service one of whose kernel objects the kernel refused.
const ReasonKernelRefused = "KernelRefused"

// kubeEvents records Events through the API (deploy/base/rbac.yaml lets
// the sinks create and patch events).
type kubeEvents struct {
	rec  record.EventRecorder
	stop func()
}

// newKubeEvents starts recording Events through api, from component on
// node; close stops it.
func newKubeEvents(api kube.API, component, node string) *kubeEvents {
	rec, stop := kube.NewRecorder(api, component, node)
	return &kubeEvents{rec: rec, stop: stop}
}

// Refused records a Warning Event on the Service.
func (k *kubeEvents) Refused(namespace, name, message string) {
	ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: namespace, Name: name}
	k.rec.Event(ref, corev1.EventTypeWarning, ReasonKernelRefused, message)
}

func (k *kubeEvents) close() { k.stop() }
