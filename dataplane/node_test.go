package dataplane

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/host/kernel"
	"github.com/proxysinks/proxysinks/host/xtables"
)

func TestOwned(t *testing.T) {
	cfg := NodeConfig{
		NodeAddresses: []netip.Addr{netip.MustParseAddr("192.168.1.10")},
		ExcludeCIDRs:  []netip.Prefix{netip.MustParsePrefix("10.96.100.0/24")},
	}
	cfg.defaults()
	bound := map[netip.Addr]bool{netip.MustParseAddr("10.96.0.1"): true, netip.MustParseAddr("10.96.100.5"): true}
	vs := func(addr string, port uint16) render.VirtualServer {
		return render.VirtualServer{Protocol: render.TCP, Addr: netip.MustParseAddr(addr), Port: port}
	}
	tests := []struct {
		vs   render.VirtualServer
		want bool
	}{
		{vs("10.96.0.1", 80), true},        // bound on kube-ipvs0
		{vs("10.96.0.2", 80), false},       // not bound: someone else's
		{vs("192.168.1.10", 30080), true},  // a node port
		{vs("192.168.1.10", 443), false},   // keepalived on the node address
		{vs("192.168.1.11", 30080), false}, // not a node address
		{vs("10.96.100.5", 80), false},     // bound but excluded
	}
	for _, tt := range tests {
		if got := cfg.Owned(tt.vs, bound, nil); got != tt.want {
			t.Errorf("Owned(%s) = %v, want %v", tt.vs, got, tt.want)
		}
	}
}

func TestHostFamilies(t *testing.T) {
	tests := []struct {
		name  string
		value string // "" means no net/ipv6 sysctls
		want  []xtables.Family
	}{
		{"IPv6 on", "0\n", []xtables.Family{xtables.IPv4, xtables.IPv6}},
		{"IPv6 disabled", "1\n", []xtables.Family{xtables.IPv4}},
		{"no IPv6 in the kernel", "", []xtables.Family{xtables.IPv4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := kernel.Sysctl{Root: t.TempDir()}
			if tt.value != "" {
				p := filepath.Join(s.Root, "net/ipv6/conf/all/disable_ipv6")
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(tt.value), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if d := cmp.Diff(tt.want, HostFamilies(s)); d != "" {
				t.Errorf("HostFamilies -want +got:\n%s", d)
			}
		})
	}
}
