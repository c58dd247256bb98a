package cluster_test

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxysinks/proxysinks/e2e/cluster"
)

// TestLoadHostile loads the hostile cluster (each object the only way
// the control plane takes it: LoadHostile checks the refusals and reads
// back what it wrote into etcd) and checks that the apiserver lists every
// hostile object of the mode's cluster.
func TestLoadHostile(t *testing.T) {
	const mode = "ipvs"
	c := cluster.Start(t, cluster.Options{NoEndpointSliceController: true})
	ctx := ctxFor(t, 2*time.Minute)
	cluster.LoadHostile(t, ctx, c, mode)
	svcs, err := c.Admin.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eps, err := c.Admin.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, s := range svcs.Items {
		have["Service "+s.Name] = true
	}
	for _, s := range eps.Items {
		have["EndpointSlice "+s.Name] = true
	}
	vias := map[cluster.Via]int{}
	for _, o := range cluster.HostileObjects() {
		if slices.Contains(o.KubeProxyFails, mode) {
			continue
		}
		key := "EndpointSlice "
		if o.Service != nil {
			key = "Service " + o.Service.Name
		} else {
			key += o.Slice.Name
		}
		if !have[key] {
			t.Errorf("%s (%s, via %s) not listed", key, o.Class, o.Via)
		}
		vias[o.Via]++
	}
	t.Logf("hostile objects by way: %v", vias)
}
