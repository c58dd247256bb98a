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

// TestNodeE2EVM runs the node end-to-end traffic tests in the VM, once
// with each IPVS sink, fed from manifest files (the hostile suite apart:
// TestHostileKernelVM).
func TestNodeE2EVM(t *testing.T) {
	t.Parallel()
	for _, sink := range []string{"fullstate", "incremental"} {
		t.Run(sink, func(t *testing.T) {
			t.Parallel()
			vm.RunTests(t, nodePkg, "-test.v", "-test.skip", "^"+hostileSuite+"$", "-test.timeout", guestTimeout, "-sink", sink)
		})
	}
}

// routesCases are the node cases TestNodeE2ERoutesVM runs again with
// --ipvs-vip-binding=routes: every kind of VIP (cluster, node port,
// external, load-balancer, dual-stack), hairpin, type changes, a restart,
// cleanup.
const routesCases = "^(TestBasicEndpoint|TestNodePortFromOutside|TestExternalIPAndLoadBalancerSourceRanges|TestHairpin|TestTypeChanges|TestRestartNoWritesNoDrops|TestDualStack|TestCleanup|TestExternalTrafficLocalKeepsClientAddress)$"

// TestNodeE2ERoutesVM runs routesCases with ipvs-incremental binding
// IPv4 VIPs as local routes instead of addresses (TestVIPBindingSwitch,
// in both sinks' runs above, switches between the two).
func TestNodeE2ERoutesVM(t *testing.T) {
	t.Parallel()
	vm.RunTests(t, nodePkg, "-test.v", "-test.run", routesCases, "-test.timeout", guestTimeout, "-sink", "incremental",
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
// the kubeconfig of the shipped ServiceAccount. ipvs-fullstate's run is
// long-only (longVM).
func TestNodeE2EAPIVM(t *testing.T) {
	t.Parallel()
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
	for _, sink := range []string{"fullstate", "incremental"} {
		t.Run(sink, func(t *testing.T) {
			if sink == "fullstate" {
				// make test runs ipvs-fullstate's cases from manifests
				// and ipvs-incremental's (the event path) from the API.
				longVM(t)
			}
			vm.RunTestsWith(t, nodePkg, vm.Options{
				WorkDir: work,
				NIC:     &vm.NIC{Forwards: []vm.Forward{{Guest: cluster.GuestAPIAddr, Host: fmt.Sprintf("127.0.0.1:%d", c.APIPort)}}},
			}, "-test.v", "-test.timeout", guestTimeout, "-test.skip", apiSkipped, "-sink", sink,
				"-kubeconfig", "/job/work/admin.kubeconfig", "-sink-kubeconfig", "/job/work/sink.kubeconfig")
		})
	}
}
