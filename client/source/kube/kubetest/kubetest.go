// Package kubetest adapts a client-go clientset (in tests, a fake one) to
// the kube source's API (kube.API), so that tests may drive the source and
// the sinks' Events with fake clientsets. It is for tests only: it imports
// the clientset, which no sink binary may compile (sinks/runtime's
// TestSinkBinariesCompileNoClientset).
package kubetest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// API is a clientset as a kube.API.
type API struct {
	cs kubernetes.Interface
}

// Clientset returns cs as a kube.API.
func Clientset(cs kubernetes.Interface) *API { return &API{cs: cs} }

// lister is the list and watch of one resource through the clientset.
type lister struct {
	list  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// listerFor returns the list and watch of resource in namespace, for the
// resources the kube source watches.
func (a *API) listerFor(resource schema.GroupVersionResource, namespace string) (lister, error) {
	switch resource {
	case corev1.SchemeGroupVersion.WithResource("services"):
		c := a.cs.CoreV1().Services(namespace)
		return lister{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }, c.Watch}, nil
	case corev1.SchemeGroupVersion.WithResource("nodes"):
		c := a.cs.CoreV1().Nodes()
		return lister{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }, c.Watch}, nil
	case discoveryv1.SchemeGroupVersion.WithResource("endpointslices"):
		c := a.cs.DiscoveryV1().EndpointSlices(namespace)
		return lister{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }, c.Watch}, nil
	case networkingv1.SchemeGroupVersion.WithResource("servicecidrs"):
		c := a.cs.NetworkingV1().ServiceCIDRs()
		return lister{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) }, c.Watch}, nil
	}
	return lister{}, fmt.Errorf("kubetest: list and watch %s: not a resource the kube source watches", resource)
}

// ListWatch is kube.API's, with the list-and-watch that client-go's
// generated informers build on the clientset (a fake clientset's
// informers list and watch without watch-list semantics).
func (a *API) ListWatch(resource schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	l, err := a.listerFor(resource, namespace)
	list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		if err != nil {
			return nil, err
		}
		if tweak != nil {
			tweak(&o)
		}
		return l.list(ctx, o)
	}
	watchf := func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		if err != nil {
			return nil, err
		}
		if tweak != nil {
			tweak(&o)
		}
		return l.watch(ctx, o)
	}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc:  list,
		WatchFuncWithContext: watchf,
	}, a.cs)
}

// EventSink is kube.API's: the clientset's Events in every namespace.
func (a *API) EventSink() record.EventSink {
	return &typedcorev1.EventSinkImpl{Interface: a.cs.CoreV1().Events("")}
}
