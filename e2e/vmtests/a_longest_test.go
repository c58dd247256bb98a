package vmtests

// The longest tests of make test-vm are in this file, whose name sorts
// first: go test starts parallel tests in the order of their files' names
// and then of their declarations, and with two guests at a time the
// longest ones started first end the run about half a minute sooner than
// when they start last (docs/build-times.md).

import (
	"testing"

	"github.com/proxysinks/proxysinks/e2e/differential"
	"github.com/proxysinks/proxysinks/e2e/vm"
)

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

// TestKubeProxyDifferential is the IPVS mode's kube-proxy differential
// (e2e/differential): kube-proxy v1.37.2 --proxy-mode=ipvs and each IPVS
// sink, each in a fresh VM against the same control plane on the host;
// the same kernel state (IPVS, ipsets, kube-ipvs0 addresses, iptables) up
// to the reviewed differences in
// e2e/cluster/testdata/kubeproxy-ipvs-differences.txt.
func TestKubeProxyDifferential(t *testing.T) {
	t.Parallel()
	differential.Run(t, differential.Modes["ipvs"])
}
