package nftablessink

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
)

// TestConfigFileFields: the nftables sink takes the nftables section as
// kube-proxy's nftables mode does (its sync periods, masqueradeBit and
// masqueradeAll) and ignores the iptables and ipvs settings with a
// warning naming each.
func TestConfigFileFields(t *testing.T) {
	const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\n"
	for _, tc := range []struct {
		name         string
		body         string
		want         []kpconfig.Setting
		wantWarnings []string
		wantErr      string
	}{
		{name: "nftables section", body: "nftables:\n  syncPeriod: 10s\n  minSyncPeriod: 2s\n  masqueradeBit: 3\n  masqueradeAll: true\n",
			want: []kpconfig.Setting{{Field: "nftables.masqueradeBit", Flag: "iptables-masquerade-bit", Value: "3"}, {Field: "nftables.masqueradeAll", Flag: "masquerade-all", Value: "true"},
				{Field: "nftables.syncPeriod", Flag: "sync-period", Value: "10s"}, {Field: "nftables.minSyncPeriod", Flag: "min-sync-period", Value: "2s"}}},
		{name: "masquerade bit 0", body: "nftables:\n  masqueradeBit: 0\n",
			want: []kpconfig.Setting{{Field: "nftables.masqueradeBit", Flag: "iptables-masquerade-bit", Value: "0"}}},
		{name: "iptables section", body: "iptables:\n  syncPeriod: 10s\n  minSyncPeriod: 2s\n  masqueradeBit: 3\n  masqueradeAll: true\n  localhostNodePorts: false\n",
			wantWarnings: []string{
				"--config: iptables.syncPeriod ignored: the nftables sink takes nftables.syncPeriod",
				"--config: iptables.minSyncPeriod ignored: the nftables sink takes nftables.minSyncPeriod",
				"--config: iptables.masqueradeBit ignored: the nftables sink takes nftables.masqueradeBit",
				"--config: iptables.masqueradeAll ignored: the nftables sink takes nftables.masqueradeAll",
				"--config: iptables.localhostNodePorts ignored: an iptables-mode setting (kube-proxy's nftables mode ignores it)",
			}},
		{name: "ipvs sync period", body: "ipvs:\n  syncPeriod: 10s\n", wantWarnings: []string{"--config: ipvs.syncPeriod ignored: the nftables sink takes nftables.syncPeriod"}},
		{name: "ipvs settings", body: "ipvs:\n  scheduler: wrr\n  strictARP: true\n",
			wantWarnings: []string{"--config: ipvs ignored: another proxy mode's settings (kube-proxy's nftables mode ignores them too)"}},
		{name: "another mode", body: "mode: iptables\n", wantErr: `mode is "iptables", but this is the nftables sink`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := head + tc.body
			if strings.HasPrefix(tc.body, "mode:") {
				body = strings.Replace(head, "mode: nftables\n", "", 1) + tc.body
			}
			cfg, _, err := kpconfig.Decode([]byte(body), "f.yaml")
			if err != nil {
				t.Fatal(err)
			}
			got, warnings, err := kpconfig.Settings(cfg, kpconfig.Table("nftables", fields), func(string) bool { return true })
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOtherSinksFlags: every IPVS flag keeps its class from the IPVS
// sinks' list, kube-proxy's with the nftables mode's reason, and the
// iptables sink's flag is ignored with the file's field it maps onto.
func TestOtherSinksFlags(t *testing.T) {
	got := map[string]string{}
	for _, f := range OtherSinks() {
		got[f.Name()] = f.Class.String() + " " + f.File
		if f.Class == kpconfig.Ignored && f.Why == "" {
			t.Errorf("--%s ignored without a reason", f.Name())
		}
	}
	want := map[string]string{
		"scheduling-method": "ignored ipvs.scheduler", "ipvs-strict-arp": "ignored ipvs.strictARP", "ipvs-tcp-timeout": "ignored ipvs.tcpTimeout",
		"ipvs-tcpfin-timeout": "ignored ipvs.tcpFinTimeout", "ipvs-udp-timeout": "ignored ipvs.udpTimeout", "ipvs-exclude-cidrs": "ignored ipvs.excludeCIDRs",
		"weight": "refused ", "ipvs-vip-binding": "refused ", "ipvs-stats": "refused ",
		"iptables-localhost-nodeports": "ignored iptables.localhostNodePorts",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("classes (-want +got):\n%s", diff)
	}
}
