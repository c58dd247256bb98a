package vmtests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/e2e/vm"
)

const nodePkg = "github.com/proxysinks/proxysinks/e2e/node"

// guestTimeout bounds a node test binary in the guest. It is shorter than
// the VM's own limit (15 minutes, boot included), so a case that hangs
// fails in the guest with its goroutines and the sink's log printed,
// instead of the VM being killed with nothing to show why.
const guestTimeout = "11m"

// ipvsSinks are the sinks whose node tests run in the VM: those of
// node.Sinks whose kernel needs it (IPVS).
var ipvsSinks = []string{"ipvs-fullstate", "ipvs-incremental"}

// sinkFiles builds a sink's binary for the guest, where the node tests
// find it on $PATH (/job/bin) by its name.
func sinkFiles(t *testing.T, sink string) map[string]string {
	return map[string]string{sink: vm.BuildSink(t, sink)}
}

// TestNodeE2EVM runs the node end-to-end tests in the VM, the traffic
// case table (e2e/node's TestTraffic) and the IPVS sinks' kernel-side
// tests, once with each IPVS sink's binary, fed from manifest files (the
// hostile suite apart: TestHostileKernelVM).
func TestNodeE2EVM(t *testing.T) {
	t.Parallel()
	vm.Require(t) // before sinkFiles: make test-unit skips it without building the sinks
	for _, sink := range ipvsSinks {
		t.Run(sink, func(t *testing.T) {
			t.Parallel()
			vm.RunTestsWith(t, nodePkg, vm.Options{Files: sinkFiles(t, sink)},
				"-test.v", "-test.skip", "^"+hostileSuite+"$", "-test.timeout", guestTimeout, "-sink", sink)
		})
	}
}

// routesCases are the node cases TestNodeE2ERoutesVM runs again with
// --ipvs-vip-binding=routes: every kind of VIP (cluster, node port,
// external, load-balancer, dual-stack), hairpin, type changes, a restart
// (traffic cases, subtests of TestTraffic), cleanup.
const routesCases = "^(TestTraffic|TestCleanup)$/^(BasicEndpoint|NodePortFromOutside|ExternalIPAndLoadBalancerSourceRanges|Hairpin|TypeChanges|RestartNoWritesNoDrops|DualStack|ExternalTrafficLocalKeepsClientAddress)$"

// TestNodeE2ERoutesVM runs routesCases with ipvs-incremental binding
// IPv4 VIPs as local routes instead of addresses (TestVIPBindingSwitch,
// in both sinks' runs above, switches between the two). About 100 s:
// long-only (longVM), as TestVIPBindingSwitch covers both bindings'
// traffic in make test.
func TestNodeE2ERoutesVM(t *testing.T) {
	t.Parallel()
	longVM(t)
	vm.Require(t)
	vm.RunTestsWith(t, nodePkg, vm.Options{Files: sinkFiles(t, "ipvs-incremental")},
		"-test.v", "-test.run", routesCases, "-test.timeout", guestTimeout, "-sink", "ipvs-incremental",
		"-sink-args", "--ipvs-vip-binding=routes")
}

// nodeAPIServer is the server of the sinks' kubeconfig in the node e2e
// tests' real-API mode: the relay in the node's namespace (node.nodeAPIAddr).
const nodeAPIServer = "https://127.0.0.1:6443"

// apiSkipped are the node cases TestNodeE2EAPIVM leaves out: they test the
// sink's kernel side (cleanup, the hostile suite, a sysctl warning), which does not
// depend on where the cluster state comes from; the manifest run has them.
const apiSkipped = "^(TestCleanup|" + hostileSuite + "|TestBridgeNetfilterWarning)$"

// TestNodeE2EAPIVM runs the same node end-to-end cases against a real
// control plane on the host (e2e/cluster): the VM's NIC reaches its
// apiserver, the cases create Services and Pods through the API, the
// EndpointSlice controller writes the slices, and each IPVS sink runs with
// the kubeconfig of the shipped ServiceAccount. About 4 minutes for
// ipvs-incremental alone: long-only (longVM); make test runs both IPVS
// sinks against the real API in TestKubeProxyDifferential, the kube
// source against it on the host (e2e/cluster) and these cases from
// manifests (TestNodeE2EVM).
func TestNodeE2EAPIVM(t *testing.T) {
	t.Parallel()
	longVM(t)
	vm.Require(t)
	c := cluster.Start(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "admin.kubeconfig"), c.Kubeconfig("https://"+cluster.GuestAPIAddr, c.AdminToken), 0o600); err != nil {
		t.Fatal(err)
	}
	sinkKC, err := c.SinkKubeconfig(ctx, nodeAPIServer)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sinkKC, filepath.Join(work, "sink.kubeconfig")); err != nil {
		t.Fatal(err)
	}
	for _, sink := range ipvsSinks {
		t.Run(sink, func(t *testing.T) {
			vm.RunTestsWith(t, nodePkg, vm.Options{
				Files:   sinkFiles(t, sink),
				WorkDir: work,
				NIC:     &vm.NIC{Forwards: []vm.Forward{{Guest: cluster.GuestAPIAddr, Host: fmt.Sprintf("127.0.0.1:%d", c.APIPort)}}},
			}, "-test.v", "-test.timeout", guestTimeout, "-test.skip", apiSkipped, "-sink", sink,
				"-kubeconfig", "/job/work/admin.kubeconfig", "-sink-kubeconfig", "/job/work/sink.kubeconfig")
		})
	}
}
