package ipvssink

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// TestFamiliesFromHost: the families come from the host, not from the
// node addresses given: a node with only an IPv4 address on a host with
// IPv6 is dual-stack (KUBE-6-* sets and ip6tables rules exist for the IPv6
// virtual servers it renders), and the node's sets and rules cover exactly
// the families that are rendered.
func TestFamiliesFromHost(t *testing.T) {
	v4only := []netip.Addr{netip.MustParseAddr("192.168.1.10")}
	for _, tt := range []struct {
		ipv6 bool
		want []xtables.Family
	}{
		{true, []xtables.Family{xtables.IPv4, xtables.IPv6}},
		{false, []xtables.Family{xtables.IPv4}},
	} {
		rc := renderConfig(Config{}, v4only, dataplanetest.HostSysctl(t, tt.ipv6))
		nc := nodeConfig(runtime.Config{}, Config{}, v4only, rc.Families)
		if d := cmp.Diff(tt.want, rc.Families); d != "" {
			t.Errorf("IPv6 %v: rendered families -want +got:\n%s", tt.ipv6, d)
		}
		if d := cmp.Diff(rc.Families, nc.Families); d != "" {
			t.Errorf("IPv6 %v: node families differ from rendered ones:\n%s", tt.ipv6, d)
		}
	}
}
