// Command endpointslice-controller runs Kubernetes' own EndpointSlice
// controller (k8s.io/kubernetes/pkg/controller/endpointslice) against an
// apiserver, alone: the one controller the e2e control plane of
// e2e/cluster needs, without the rest of kube-controller-manager (whose
// other controllers are 343 packages its build would compile for nothing).
// It wires the controller the way kube-controller-manager's
// --controllers=endpointslice-controller does (shared informers for Pods,
// Services, Nodes and EndpointSlices with managed fields trimmed, the same
// client settings and defaults), with no leader election and no serving
// port. It logs to stderr and exits 0 on SIGTERM or SIGINT.
//
// scripts/kubebin.sh builds it with the Kubernetes binaries.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/endpointslice"
)

// options are the command's flags, named and defaulted as
// kube-controller-manager's.
type options struct {
	kubeconfig      string
	syncs           int
	maxPerSlice     int
	batchPeriod     time.Duration
	minResyncPeriod time.Duration
	qps             float64
	burst           int
}

func main() {
	var o options
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig file with the apiserver's address and credentials (empty: in-cluster configuration).")
	fs.IntVar(&o.syncs, "concurrent-service-endpoint-syncs", 5, "The number of service endpoint syncing operations that will be done concurrently.")
	fs.IntVar(&o.maxPerSlice, "max-endpoints-per-slice", 100, "The maximum number of endpoints that will be added to an EndpointSlice.")
	fs.DurationVar(&o.batchPeriod, "endpoint-updates-batch-period", 0, "The length of endpoint slice updates batching period (0: every pod change is processed at once).")
	fs.DurationVar(&o.minResyncPeriod, "min-resync-period", 12*time.Hour, "The resync period of the informers is random between min-resync-period and 2*min-resync-period.")
	fs.Float64Var(&o.qps, "kube-api-qps", 50, "QPS to use while talking with the apiserver.")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "Burst to use while talking with the apiserver.")
	klog.InitFlags(fs)
	fs.Parse(os.Args[1:])
	if err := validate(o); err != nil {
		fmt.Fprintf(os.Stderr, "endpointslice-controller: %v\n", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := run(ctx, o)
	klog.Flush()
	if err != nil {
		fmt.Fprintf(os.Stderr, "endpointslice-controller: %v\n", err)
		os.Exit(1)
	}
}

// validate applies kube-controller-manager's bounds on the controller's
// settings.
func validate(o options) error {
	if o.syncs < 1 || o.syncs > 50 {
		return fmt.Errorf("--concurrent-service-endpoint-syncs %d: must be between 1 and 50", o.syncs)
	}
	if o.maxPerSlice < 1 || o.maxPerSlice > 1000 {
		return fmt.Errorf("--max-endpoints-per-slice %d: must be between 1 and 1000", o.maxPerSlice)
	}
	if o.minResyncPeriod <= 0 {
		return fmt.Errorf("--min-resync-period %s: must be positive", o.minResyncPeriod)
	}
	return nil
}

// run runs the controller until ctx ends, then stops its workers and the
// informers.
func run(ctx context.Context, o options) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %q: %w", o.kubeconfig, err)
	}
	// kube-controller-manager's client defaults.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	informerClient, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "shared-informers"))
	if err != nil {
		return fmt.Errorf("client for the informers: %w", err)
	}
	client, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "endpointslice-controller"))
	if err != nil {
		return fmt.Errorf("client for the controller: %w", err)
	}

	resync := time.Duration(float64(o.minResyncPeriod) * (rand.Float64() + 1))
	factory := informers.NewSharedInformerFactoryWithOptions(informerClient, resync, informers.WithTransform(trimManagedFields))
	c := endpointslice.NewController(ctx,
		factory.Core().V1().Pods(),
		factory.Core().V1().Services(),
		factory.Core().V1().Nodes(),
		factory.Discovery().V1().EndpointSlices(),
		int32(o.maxPerSlice),
		client,
		o.batchPeriod,
	)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, o.syncs)
	}()
	<-ctx.Done()
	klog.InfoS("Stopping", "reason", context.Cause(ctx))
	<-done
	factory.Shutdown()
	return nil
}

// trimManagedFields drops the objects' managed fields in the informers'
// caches, as kube-controller-manager does: the controller never reads them.
func trimManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}
