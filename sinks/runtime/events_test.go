package runtime

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/proxysinks/proxysinks/client/source/kube/kubetest"
)

// TestKubeEvents: a refusal becomes a Warning Event KernelRefused on the
// Service, from the node's proxysinks.
func TestKubeEvents(t *testing.T) {
	cs := fake.NewClientset()
	ev := newKubeEvents(kubetest.Clientset(cs), component, "node-1")
	defer ev.close()
	ev.Refused("ns", "lb", "the node's kernel refused SetEntry X: invalid CIDR")
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		l, err := cs.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) > 0 {
			e := l.Items[0]
			if e.Reason != ReasonKernelRefused || e.Type != "Warning" || e.InvolvedObject.Kind != "Service" || e.InvolvedObject.Name != "lb" ||
				e.Source.Component != component || e.Source.Host != "node-1" {
				t.Errorf("event %+v", e)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no Event recorded in 10 s")
}
