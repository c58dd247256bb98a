package runtime

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// TestDetectLocalFlags: --detect-local-mode and its companions, from
// flags and from kube-proxy's file, resolve to the detection kube-proxy
// makes of them; an interface mode without its interface and an unknown
// mode are flag errors naming the flag.
func TestDetectLocalFlags(t *testing.T) {
	pfx := netip.MustParsePrefix
	node := &client.Node{Name: "node-a", PodCIDRs: []netip.Prefix{pfx("10.244.7.0/24"), pfx("fd00:244:7::/64")}}
	dry := []string{"--dry-run", "--from-file", "../../examples/demo/cluster.yaml", "--node-name", "demo-node", "--node-address", "10.244.2.1"}
	for _, tc := range []struct {
		name    string
		args    []string
		file    string // a KubeProxyConfiguration's body, given with --config
		want    xtables.LocalTraffic
		wantErr string
	}{
		{name: "default: ClusterCIDR", args: []string{"--cluster-cidr", "10.244.0.0/16"}, want: xtables.LocalTraffic{CIDRs: []netip.Prefix{pfx("10.244.0.0/16")}}},
		{name: "NodeCIDR", args: []string{"--detect-local-mode", "NodeCIDR", "--cluster-cidr", "10.244.0.0/16"}, want: xtables.LocalTraffic{CIDRs: node.PodCIDRs}},
		{name: "BridgeInterface", args: []string{"--detect-local-mode=BridgeInterface", "--pod-bridge-interface=cbr0"}, want: xtables.LocalTraffic{Interface: "cbr0"}},
		{name: "InterfaceNamePrefix", args: []string{"--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=veth"}, want: xtables.LocalTraffic{Interface: "veth+"}},
		{name: "file: InterfaceNamePrefix", file: "detectLocalMode: InterfaceNamePrefix\ndetectLocal:\n  interfaceNamePrefix: cali\n", want: xtables.LocalTraffic{Interface: "cali+"}},
		{name: "file: BridgeInterface", file: "detectLocalMode: BridgeInterface\ndetectLocal:\n  bridgeInterface: cni0\n", want: xtables.LocalTraffic{Interface: "cni0"}},
		{name: "file: NodeCIDR", file: "detectLocalMode: NodeCIDR\n", want: xtables.LocalTraffic{CIDRs: node.PodCIDRs}},
		{name: "bridge without its name", args: []string{"--detect-local-mode=BridgeInterface"}, wantErr: "--detect-local-mode: BridgeInterface needs --pod-bridge-interface"},
		{name: "prefix without its name", file: "detectLocalMode: InterfaceNamePrefix\n", wantErr: "--detect-local-mode: InterfaceNamePrefix needs --pod-interface-name-prefix"},
		{name: "unknown mode", args: []string{"--detect-local-mode=Pods"}, wantErr: `--detect-local-mode: "Pods" is not ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string(nil), tc.args...), dry...)
			if tc.file != "" {
				args = append(args, "--config", writeConfig(t, tc.file))
			}
			status, cfg, _, stderr := main(t, args...)
			if tc.wantErr != "" {
				if status != 2 || !strings.Contains(stderr, tc.wantErr) {
					t.Errorf("status %d, stderr %q; want 2 and %q", status, stderr, tc.wantErr)
				}
				return
			}
			if status != 0 {
				t.Fatalf("status %d: %s", status, stderr)
			}
			if diff := cmp.Diff(tc.want, cfg.LocalTraffic(node)); diff != "" {
				t.Errorf("local traffic (-want +got):\n%s", diff)
			}
		})
	}
}

// writeConfig writes a KubeProxyConfiguration of mode ipvs with body and
// returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
