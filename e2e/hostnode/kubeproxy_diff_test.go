package hostnode

import (
	"os"
	"testing"

	"github.com/proxysinks/proxysinks/e2e/differential"
)

// TestKubeProxyDifferential is the iptables mode's kube-proxy
// differential (e2e/differential): kube-proxy v1.37.2
// --proxy-mode=iptables and the iptables sink binary, each in a fresh
// network namespace of this host with the same node address, against the
// same control plane; the same iptables-save and ip6tables-save (counters
// dropped, comments kept; rule order compared within chains where it
// matters) up to the reviewed differences in
// e2e/cluster/testdata/kubeproxy-iptables-differences.txt.
func TestKubeProxyDifferential(t *testing.T) {
	differential.Run(t, differential.Modes["iptables"])
}

// TestKubeProxyHostileDifferential is the iptables mode's kube-proxy
// differential on the hostile cluster (differential.RunHostile): one
// control plane loaded through a strict apiserver, into etcd past it, and
// through the same apiserver restarted with strict IP validation off;
// kube-proxy v1.37.2 and the iptables sink, each in a fresh network
// namespace; the same rules up to the reviewed differences in
// e2e/cluster/testdata/kubeproxy-iptables-hostile-differences.txt.
func TestKubeProxyHostileDifferential(t *testing.T) {
	differential.RunHostile(t, differential.Modes["iptables"])
}

// TestKubeProxySettingsDifferential is the iptables mode's kube-proxy
// differential under each configuration of differential.Settings that
// changes iptables rules (local-traffic detection modes, localhost node
// ports, --nodeport-addresses=primary): one control plane with the broad
// cluster, and kube-proxy v1.37.2 and the iptables sink given the same
// flags, per setting; the same rules up to the reviewed differences in
// e2e/cluster/testdata/kubeproxy-iptables-settings-differences.txt.
// About 2.5 minutes: a long test (make test-long, PROXYSINKS_LONG=1).
func TestKubeProxySettingsDifferential(t *testing.T) {
	if os.Getenv("PROXYSINKS_LONG") != "1" {
		t.Skip("a long test: make test-long runs it (PROXYSINKS_LONG=1)")
	}
	differential.RunSettings(t, differential.Modes["iptables"])
}
