package kube

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/client/internal/cputime"
	"github.com/proxysinks/proxysinks/client/internal/gen"
	"github.com/proxysinks/proxysinks/client/source/kube/kubetest"
)

// BenchmarkFirstSnapshot is the kube path at startup: real informers list
// 10,000 services and 10,000 EndpointSlices (10 endpoints each) from the
// fake clientset, sync, and the source delivers its first full snapshot.
// ns/op is from Run to that snapshot; heap-MB is what the running source
// keeps (informer caches included), beyond the fake API's own copy.
func BenchmarkFirstSnapshot(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			cs := fakeCluster(n)
			var heap float64
			var cpu time.Duration
			b.ReportAllocs() // the fake's copies included
			for b.Loop() {
				b.StopTimer()
				before := cputime.HeapMB()
				c0 := cputime.Now()
				ctx, cancel := context.WithCancel(context.Background())
				got := make(chan *client.Snapshot, 1)
				src := New(kubetest.Clientset(cs), Config{NodeName: "node-1", MinInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
				done := make(chan struct{})
				b.StartTimer()
				go func() {
					defer close(done)
					_ = src.Run(ctx, func(s *client.Snapshot) {
						select {
						case got <- s:
						default:
						}
					})
				}()
				s := <-got
				b.StopTimer()
				cpu += cputime.Now() - c0
				if s.Len() != n {
					b.Fatalf("first snapshot has %d services, want %d", s.Len(), n)
				}
				heap = cputime.HeapMB() - before
				cancel()
				<-done
				b.StartTimer()
			}
			b.ReportMetric(heap, "heap-MB")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkFakeList is the fake clientset's share of BenchmarkFirstSnapshot:
// one list of all services and one of all EndpointSlices, as the informers'
// reflectors make them (each list deep-copies every object from the fake's
// tracker). A real API server replaces this by network and decoding.
func BenchmarkFakeList(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			cs := fakeCluster(n)
			var cpu time.Duration
			for b.Loop() {
				c0 := cputime.Now()
				sl, err := cs.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
				if err != nil || len(sl.Items) != n {
					b.Fatalf("list services: %d, %v", len(sl.Items), err)
				}
				el, err := cs.DiscoveryV1().EndpointSlices("").List(context.Background(), metav1.ListOptions{})
				if err != nil || len(el.Items) != n {
					b.Fatalf("list slices: %d, %v", len(el.Items), err)
				}
				cpu += cputime.Now() - c0
			}
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// fakeCluster is a fake clientset holding gen.Cluster(n, 10).
func fakeCluster(n int) *fake.Clientset {
	svcs, slices := gen.Cluster(n, 10)
	objs := make([]kruntime.Object, 0, 2*n)
	for i := range svcs {
		objs = append(objs, svcs[i], slices[i])
	}
	return fake.NewClientset(objs...)
}
