package iptablessink

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
)

// TestConfigFileFields: the iptables sink takes the iptables sync periods,
// ignores the ipvs and nftables settings with a warning, as kube-proxy's
// iptables mode does, and refuses iptables.localhostNodePorts by name.
func TestConfigFileFields(t *testing.T) {
	const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\n"
	for _, tc := range []struct {
		name        string
		body        string
		want        []kpconfig.Setting
		wantWarning string
		wantErr     string
	}{
		{name: "sync periods", body: "iptables:\n  syncPeriod: 10s\n  minSyncPeriod: 2s\n",
			want: []kpconfig.Setting{{Field: "iptables.syncPeriod", Flag: "sync-period", Value: "10s"}, {Field: "iptables.minSyncPeriod", Flag: "min-sync-period", Value: "2s"}}},
		{name: "ipvs sync period", body: "ipvs:\n  syncPeriod: 10s\n", wantWarning: "--config: ipvs.syncPeriod ignored: the iptables sink takes iptables.syncPeriod"},
		{name: "ipvs settings", body: "ipvs:\n  scheduler: wrr\n  strictARP: true\n", wantWarning: "--config: ipvs ignored: another proxy mode's settings (kube-proxy's iptables mode ignores them too)"},
		{name: "nftables", body: "nftables:\n  syncPeriod: 1s\n", wantWarning: "--config: nftables ignored: another proxy mode's settings (the nftables sink takes them)"},
		{name: "localhost node ports", body: "iptables:\n  localhostNodePorts: false\n",
			want: []kpconfig.Setting{{Field: "iptables.localhostNodePorts", Flag: "iptables-localhost-nodeports", Value: "false"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, err := kpconfig.Decode([]byte(head+tc.body), "f.yaml")
			if err != nil {
				t.Fatal(err)
			}
			got, warnings, err := kpconfig.Settings(cfg, kpconfig.Table("iptables", fields), func(string) bool { return true })
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
			if tc.wantWarning != "" && (len(warnings) != 1 || warnings[0] != tc.wantWarning) {
				t.Errorf("warnings %q, want %q", warnings, tc.wantWarning)
			}
		})
	}
}
