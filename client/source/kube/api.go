package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
)

// API is the part of the Kubernetes API the source reads and a sink
// writes: the list-and-watch of a resource, and core/v1 Events. NewAPI
// implements it with REST clients of the three API groups involved;
// package kubetest adapts a clientset (its fakes) for tests. The sinks do
// not import client-go's clientset, whose scheme and typed clients
// compile every API group (docs/build-times.md).
type API interface {
	// ListWatch lists and watches resource in namespace (every namespace
	// when empty), each request's options first passed to tweak when it
	// is not nil.
	ListWatch(resource schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher
	// EventSink creates, updates and patches core/v1 Events.
	EventSink() record.EventSink
}

// The resources the source watches.
var (
	servicesResource       = corev1.SchemeGroupVersion.WithResource("services")
	nodesResource          = corev1.SchemeGroupVersion.WithResource("nodes")
	endpointSlicesResource = discoveryv1.SchemeGroupVersion.WithResource("endpointslices")
	serviceCIDRsResource   = networkingv1.SchemeGroupVersion.WithResource("servicecidrs")
)

// Scheme holds the API types NewAPI's clients decode and encode: core/v1
// (Services, Nodes, Events), discovery.k8s.io/v1, networking.k8s.io/v1,
// and the unversioned meta types (Status, WatchEvent, the options) that
// client-go's kubernetes/scheme also registers.
var Scheme = newScheme()

var (
	codecs         = serializer.NewCodecFactory(Scheme)
	parameterCodec = runtime.NewParameterCodec(Scheme)
)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(discoveryv1.AddToScheme(s))
	utilruntime.Must(networkingv1.AddToScheme(s))
	return s
}

// groups are the API groups NewAPI has a client for, with their paths.
var groups = []struct {
	gv   schema.GroupVersion
	path string
}{
	{corev1.SchemeGroupVersion, "/api"},
	{discoveryv1.SchemeGroupVersion, "/apis"},
	{networkingv1.SchemeGroupVersion, "/apis"},
}

// restAPI is API over one REST client per group.
type restAPI struct {
	clients map[schema.GroupVersion]rest.Interface
}

// NewAPI returns API through REST clients for rc, configured as
// client-go's clientset configures its typed clients: one HTTP client
// shared by every group, one rate limiter shared when rc sets QPS (else
// client-go's default per client), client-go's user agent unless rc sets
// one, and protobuf requested unless rc names content types.
func NewAPI(rc *rest.Config) (API, error) {
	c := *rc
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	hc, err := rest.HTTPClientFor(&c)
	if err != nil {
		return nil, fmt.Errorf("kube source: API client for %s: %w", c.Host, err)
	}
	if c.RateLimiter == nil && c.QPS > 0 {
		if c.Burst <= 0 {
			return nil, fmt.Errorf("kube source: API client for %s: QPS %v needs a positive burst", c.Host, c.QPS)
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	a := &restAPI{clients: map[schema.GroupVersion]rest.Interface{}}
	for _, g := range groups {
		gc := c
		gv := g.gv
		gc.GroupVersion, gc.APIPath = &gv, g.path
		gc.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(Scheme, codecs).WithoutConversion()
		cl, err := rest.RESTClientForConfigAndClient(&gc, hc)
		if err != nil {
			return nil, fmt.Errorf("kube source: API client of %s for %s: %w", gv, c.Host, err)
		}
		a.clients[gv] = cl
	}
	return a, nil
}

// ListWatch is API's, with the requests of client-go's typed clients
// (protobuf preferred, TimeoutSeconds also the client's timeout).
func (a *restAPI) ListWatch(resource schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	c := a.clients[resource.GroupVersion()]
	request := func(o *metav1.ListOptions) *rest.Request {
		if tweak != nil {
			tweak(o)
		}
		var timeout time.Duration
		if o.TimeoutSeconds != nil {
			timeout = time.Duration(*o.TimeoutSeconds) * time.Second
		}
		return c.Get().UseProtobufAsDefault().NamespaceIfScoped(namespace, namespace != "").
			Resource(resource.Resource).VersionedParams(o, parameterCodec).Timeout(timeout)
	}
	list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		if c == nil {
			return nil, fmt.Errorf("kube source: list %s: no API client for its group", resource)
		}
		return request(&o).Do(ctx).Get()
	}
	watchf := func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		if c == nil {
			return nil, fmt.Errorf("kube source: watch %s: no API client for its group", resource)
		}
		o.Watch = true
		return request(&o).Watch(ctx)
	}
	return &cache.ListWatch{
		ListWithContextFunc:  list,
		WatchFuncWithContext: watchf,
	}
}

// EventSink is API's: the core/v1 client's Events.
func (a *restAPI) EventSink() record.EventSink {
	return eventSink{c: a.clients[corev1.SchemeGroupVersion]}
}
