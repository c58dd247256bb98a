package ipvssink

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/dataplane/kernel"
	"github.com/proxysinks/proxysinks/dataplane/rules"
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
		disable string
		want    []rules.Family
	}{
		{"0", []rules.Family{rules.IPv4, rules.IPv6}},
		{"1", []rules.Family{rules.IPv4}},
	} {
		s := kernel.Sysctl{Root: t.TempDir()}
		p := filepath.Join(s.Root, "net/ipv6/conf/all/disable_ipv6")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(tt.disable+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		rc := renderConfig(runtime.Config{}, v4only, s)
		nc := nodeConfig(runtime.Config{}, v4only, rc.Families)
		if d := cmp.Diff(tt.want, rc.Families); d != "" {
			t.Errorf("disable_ipv6=%s: rendered families -want +got:\n%s", tt.disable, d)
		}
		if d := cmp.Diff(rc.Families, nc.Families); d != "" {
			t.Errorf("disable_ipv6=%s: node families differ from rendered ones:\n%s", tt.disable, d)
		}
	}
}
