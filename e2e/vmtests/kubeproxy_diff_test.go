package vmtests

import (
	"testing"

	"github.com/proxysinks/proxysinks/e2e/differential"
)

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

// TestKubeProxyHostileDifferentialVM is the IPVS mode's kube-proxy
// differential on the hostile cluster (differential.RunHostile: one
// control plane on the host loaded through a strict apiserver, into etcd
// past it, and through the same apiserver restarted with strict IP
// validation off): kube-proxy v1.37.2 --proxy-mode=ipvs and each IPVS
// sink in a fresh VM; the same kernel state and no sink ERROR line up to
// the reviewed differences in
// e2e/cluster/testdata/kubeproxy-ipvs-hostile-differences.txt. Three VM
// runs: a long test (make test-long).
func TestKubeProxyHostileDifferentialVM(t *testing.T) {
	longVM(t)
	t.Parallel()
	differential.RunHostile(t, differential.Modes["ipvs"])
}

// TestKubeProxySettingsDifferentialVM is the IPVS mode's kube-proxy
// differential under each configuration of differential.Settings that
// changes IPVS rules (local-traffic detection modes,
// --nodeport-addresses=primary): kube-proxy v1.37.2 --proxy-mode=ipvs and
// each IPVS sink given the same flags, each in a fresh VM, per setting;
// the same kernel state up to the reviewed differences in
// e2e/cluster/testdata/kubeproxy-ipvs-differences.txt and
// kubeproxy-ipvs-settings-differences.txt. Three VM runs per setting
// (2 to 6 minutes a setting): a long test (make test-long).
func TestKubeProxySettingsDifferentialVM(t *testing.T) {
	longVM(t)
	t.Parallel()
	differential.RunSettings(t, differential.Modes["ipvs"])
}
