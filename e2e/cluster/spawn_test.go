package cluster

import (
	"context"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestComponentsSurviveExitingThreads ends many OS threads the way
// nstest.NetNS.Do does (a goroutine exits locked to its thread) after the
// control plane started: its components, started with Pdeathsig, must not
// die with one of them.
func TestComponentsSurviveExitingThreads(t *testing.T) {
	c := Start(t, Options{})
	for i := 0; i < 64; i++ {
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			close(done)
		}()
		<-done
		runtime.Gosched()
	}
	time.Sleep(time.Second)
	for _, p := range []*process{c.etcd, c.api, c.slices} {
		if p.exited() {
			t.Errorf("%s exited: %v", p.name, p.err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Admin.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("the apiserver does not answer: %v", err)
	}
}
