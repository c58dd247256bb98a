package hostnode

import (
	"os"
	"testing"

	"github.com/proxysinks/proxysinks/e2e/differential"
)

// TestKubeProxyNFTablesDifferential is the nftables mode's kube-proxy
// differential (e2e/differential): kube-proxy v1.37.2
// --proxy-mode=nftables and the nftables sink binary, each in a fresh
// network namespace of this host with the same node address, against the
// same control plane; the same tables (nft list tables) and the same
// kube-proxy table of each family (nft list table ip|ip6 kube-proxy:
// handles and counters dropped, elements sorted, each chain's rule order
// kept) up to the reviewed differences in
// e2e/cluster/testdata/kubeproxy-nftables-differences.txt.
func TestKubeProxyNFTablesDifferential(t *testing.T) {
	differential.Run(t, differential.Modes["nftables"])
}

// TestKubeProxyNFTablesHostileDifferential is the nftables mode's
// kube-proxy differential on the hostile cluster
// (differential.RunHostile), against
// e2e/cluster/testdata/kubeproxy-nftables-hostile-differences.txt.
func TestKubeProxyNFTablesHostileDifferential(t *testing.T) {
	differential.RunHostile(t, differential.Modes["nftables"])
}

// TestKubeProxyNFTablesSettingsDifferential is the nftables mode's
// kube-proxy differential under each configuration of
// differential.Settings that changes its rules, against
// e2e/cluster/testdata/kubeproxy-nftables-settings-differences.txt. A long
// test (make test-long, PROXYSINKS_LONG=1).
func TestKubeProxyNFTablesSettingsDifferential(t *testing.T) {
	if os.Getenv("PROXYSINKS_LONG") != "1" {
		t.Skip("a long test: make test-long runs it (PROXYSINKS_LONG=1)")
	}
	differential.RunSettings(t, differential.Modes["nftables"])
}

// TestKubeProxyNFTablesChurnDifferential is the nftables mode's
// kube-proxy differential after changes (differential.RunChurn):
// kube-proxy and the nftables sink side by side on the broad cluster,
// which then changes (a service deleted and one added, session affinity,
// source ranges and a traffic policy changed, an endpoint deleted); the
// states they settle in must be the same up to the reviewed differences
// of e2e/cluster/testdata/kubeproxy-nftables-differences.txt. About a
// minute: a long test (make test-long, PROXYSINKS_LONG=1).
func TestKubeProxyNFTablesChurnDifferential(t *testing.T) {
	if os.Getenv("PROXYSINKS_LONG") != "1" {
		t.Skip("a long test: make test-long runs it (PROXYSINKS_LONG=1)")
	}
	differential.RunChurn(t, differential.Modes["nftables"])
}
