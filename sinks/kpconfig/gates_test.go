package kpconfig

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCheckGates: the gates that change what kube-proxy programs are
// honoured at the value the sinks behave as and refused by name at the
// other; locked gates are refused at the value kube-proxy refuses; every
// other gate is logged once.
func TestCheckGates(t *testing.T) {
	for _, tc := range []struct {
		name, mode   string
		gates        map[string]bool
		wantErr      []string
		wantWarnings []string
	}{
		{name: "none", mode: "ipvs"},
		{name: "on values", mode: "ipvs", gates: map[string]bool{"AllowServiceExternalIPs": true, "KubeProxyIPVS": true, "PreferSameTrafficDistribution": true, "MultiCIDRServiceAllocator": true}},
		{name: "external IPs off", mode: "iptables", gates: map[string]bool{"AllowServiceExternalIPs": false},
			wantErr: []string{"AllowServiceExternalIPs=false: the sinks always program Services' externalIPs"}},
		{name: "IPVS off in an IPVS sink", mode: "ipvs", gates: map[string]bool{"KubeProxyIPVS": false},
			wantErr: []string{"KubeProxyIPVS=false: it turns kube-proxy's ipvs mode off"}},
		{name: "IPVS off in the iptables sink", mode: "iptables", gates: map[string]bool{"KubeProxyIPVS": false},
			wantWarnings: []string{"KubeProxyIPVS=false ignored: only ipvs mode"}},
		{name: "locked", mode: "iptables", gates: map[string]bool{"PreferSameTrafficDistribution": false, "WinDSR": false},
			wantErr: []string{"PreferSameTrafficDistribution=false: kube-proxy v1.37.2 locks it to true", "WinDSR=false: kube-proxy v1.37.2 locks it to true"}},
		{name: "nftables only", mode: "ipvs", gates: map[string]bool{"KubeProxyNFTablesLocalhostNodePorts": true, "NFTablesNetlink": false},
			wantWarnings: []string{"KubeProxyNFTablesLocalhostNodePorts=true ignored: only nftables mode", "NFTablesNetlink=false ignored: only nftables mode"}},
		{name: "nftables mode", mode: "nftables", gates: map[string]bool{"KubeProxyNFTablesLocalhostNodePorts": false, "NFTablesNetlink": true}},
		{name: "localhost node ports in nftables mode", mode: "nftables", gates: map[string]bool{"KubeProxyNFTablesLocalhostNodePorts": true},
			wantErr: []string{"KubeProxyNFTablesLocalhostNodePorts=true: the nftables sink does not serve NodePorts on localhost"}},
		{name: "nft binary in nftables mode", mode: "nftables", gates: map[string]bool{"NFTablesNetlink": false},
			wantWarnings: []string{"NFTablesNetlink=false ignored: the nftables sink always writes over netlink"}},
		{name: "others", mode: "ipvs", gates: map[string]bool{"SidecarContainers": true, "ComponentFlagz": false},
			wantWarnings: []string{"ComponentFlagz=false ignored: the gate changes nothing", "SidecarContainers=true ignored: the gate changes nothing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warnings, err := CheckGates(tc.mode, tc.gates)
			if len(tc.wantErr) == 0 && err != nil {
				t.Errorf("error %v, want none", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to say %q", err, w)
				}
			}
			if len(warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings %q, want %d", warnings, len(tc.wantWarnings))
			}
			for i, w := range tc.wantWarnings {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %d: %q, want it to say %q", i, warnings[i], w)
				}
			}
		})
	}
}

func TestParseGates(t *testing.T) {
	got, err := ParseGates([]string{"B=false, A=true", "C=1"})
	if want := map[string]bool{"A": true, "B": false, "C": true}; err != nil || !cmp.Equal(got, want) {
		t.Errorf("ParseGates: %v, %v; want %v", got, err, want)
	}
	if s := FormatGates(got); s != "A=true,B=false,C=true" {
		t.Errorf("FormatGates: %q", s)
	}
	for _, bad := range []string{"A", "A=maybe"} {
		if _, err := ParseGates([]string{bad}); err == nil {
			t.Errorf("ParseGates(%q): no error", bad)
		}
	}
}

// TestGatesAndOOMFromFile: featureGates and oomScoreAdj set their flags.
func TestGatesAndOOMFromFile(t *testing.T) {
	cfg, _, err := Decode([]byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\noomScoreAdj: -999\nfeatureGates:\n  Z: false\n  AllowServiceExternalIPs: true\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, warnings, err := Settings(cfg, Table("ipvs", nil), allFlags)
	want := []Setting{{"oomScoreAdj", "oom-score-adj", "-999"}, {"featureGates", "feature-gates", "AllowServiceExternalIPs=true,Z=false"}}
	if diff := cmp.Diff(want, got); err != nil || len(warnings) > 0 || diff != "" {
		t.Errorf("Settings: %v, warnings %q, (-want +got):\n%s", err, warnings, diff)
	}
}
