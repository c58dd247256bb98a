package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestKubeProxyFlags: kube-proxy's own flags, without --config, reach the
// configuration (the sync periods of the sink's mode, --v, --logging-format,
// the deprecated ports), or are logged as ignored, or refused by name.
func TestKubeProxyFlags(t *testing.T) {
	dry := []string{"--dry-run", "--from-file", "../../examples/demo/cluster.yaml", "--node-name", "demo-node", "--node-address", "10.244.2.1"}
	for _, tc := range []struct {
		name    string
		args    []string
		check   func(Config) bool
		want    string // in stderr
		wantErr bool
	}{
		{name: "ipvs sync periods", args: []string{"--ipvs-sync-period", "7s", "--ipvs-min-sync-period=2s"},
			check: func(c Config) bool { return c.SyncPeriod == 7*time.Second && c.MinSyncPeriod == 2*time.Second }},
		{name: "iptables sync period in an ipvs sink", args: []string{"--iptables-sync-period", "7s"},
			check: func(c Config) bool { return c.SyncPeriod == 30*time.Second },
			want:  "--iptables-sync-period ignored: another proxy mode's (this sink takes --ipvs-sync-period)"},
		{name: "both sync periods", args: []string{"--ipvs-sync-period", "7s", "--sync-period", "8s"}, wantErr: true,
			want: "--sync-period and --ipvs-sync-period: give one, not both"},
		{name: "proxy mode of the sink", args: []string{"--proxy-mode", "ipvs"}, check: func(Config) bool { return true }},
		{name: "proxy mode empty", args: []string{"--proxy-mode="}, wantErr: true,
			want: "--proxy-mode: is empty, which is kube-proxy's default mode iptables, but this is the ipvs sink"},
		{name: "proxy mode of another sink", args: []string{"--proxy-mode", "nftables"}, wantErr: true,
			want: `--proxy-mode: is "nftables", but this is the ipvs sink`},
		{name: "v", args: []string{"--v=4", "--logging-format", "json"},
			check: func(c Config) bool { return c.LogLevel == "debug" && c.LogFormat == "json" }},
		{name: "v wins over log-level", args: []string{"-v", "2", "--log-level", "debug"}, check: func(c Config) bool { return c.LogLevel == "info" }},
		{name: "bare bind addresses take the ports", args: []string{"--healthz-bind-address", "127.0.0.2", "--metrics-bind-address", "::1", "--metrics-port", "9999"},
			check: func(c Config) bool { return c.HealthzAddress == "127.0.0.2:10256" && c.MetricsAddress == "[::1]:9999" }},
		{name: "port 0 turns a server off", args: []string{"--healthz-port", "0"}, check: func(c Config) bool { return c.HealthzAddress == "" }},
		{name: "gates", args: []string{"--feature-gates", "AllowServiceExternalIPs=true,SidecarContainers=true"},
			check: func(c Config) bool { return len(c.FeatureGates) == 2 },
			want:  "--feature-gates: SidecarContainers=true ignored: the gate changes nothing kube-proxy v1.37.2 programs"},
		{name: "gate refused", args: []string{"--feature-gates", "KubeProxyIPVS=false"}, wantErr: true,
			want: "--feature-gates: KubeProxyIPVS=false: it turns kube-proxy's ipvs mode off"},
		{name: "bad gate", args: []string{"--feature-gates", "KubeProxyIPVS"}, wantErr: true, want: `--feature-gates: "KubeProxyIPVS" is not Name=true`},
		{name: "profiling", args: []string{"--profiling"}, check: func(Config) bool { return true }, want: "--profiling ignored: no profiling endpoint"},
		{name: "write-config-to", args: []string{"--write-config-to", "/tmp/x"}, wantErr: true, want: "--write-config-to: the sinks do not write kube-proxy's configuration"},
		{name: "master with a file source", args: []string{"--master", "https://10.0.0.1"}, wantErr: true, want: "--from-file and --master: give one source"},
		{name: "node name as kube-proxy takes it", args: []string{"--node-name", " Demo-Node "}, check: func(c Config) bool { return c.NodeName == "demo-node" }},
		{name: "empty node name", args: []string{"--node-name", " "}, wantErr: true, want: `--node-name: " " is empty`},
		{name: "oom score out of range", args: []string{"--oom-score-adj", "-1001"}, wantErr: true, want: "--oom-score-adj: -1001 is not in [-1000, 1000]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, cfg, _, stderr := main(t, append(dry, tc.args...)...)
			if tc.wantErr != (status == 2) || !tc.wantErr && status != 0 {
				t.Fatalf("status %d, want error %t:\n%s", status, tc.wantErr, stderr)
			}
			if tc.check != nil && !tc.check(cfg) {
				t.Errorf("config %+v", cfg)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q, want %q", stderr, tc.want)
			}
		})
	}
}

// TestInitOnly: --init-only checks the configuration, applies
// --oom-score-adj and exits 0 without starting the sink.
func TestInitOnly(t *testing.T) {
	OOMScoreAdjFile = filepath.Join(t.TempDir(), "oom_score_adj")
	t.Cleanup(func() { OOMScoreAdjFile = "/proc/self/oom_score_adj" })
	built := false
	sink := testSink(func(Env) (Built, error) { built = true; return Built{Controller: cfgSink{}}, nil })
	var out, errs strings.Builder
	status := Main(sink, []string{"test-sink", "--init-only", "--oom-score-adj=-998", "--from-file", "../../examples/demo/cluster.yaml"}, &out, &errs)
	b, err := os.ReadFile(OOMScoreAdjFile)
	if status != 0 || built || out.Len() > 0 || err != nil || string(b) != "-998" {
		t.Errorf("--init-only: status %d, built %t, stdout %q, oom_score_adj %q (%v); want 0, not built, nothing, -998\n%s", status, built, out.String(), b, err, errs.String())
	}
	OOMScoreAdjFile = filepath.Join(t.TempDir(), "missing", "oom_score_adj")
	errs.Reset()
	if status := Main(sink, []string{"test-sink", "--init-only", "--oom-score-adj=1"}, &out, &errs); status != 0 || !strings.Contains(errs.String(), "--oom-score-adj not applied") {
		t.Errorf("--oom-score-adj that cannot be written: status %d, stderr %q; want 0 and a warning", status, errs.String())
	}
}

// TestWithoutFlags: the flags --config replaces leave the arguments in
// each of the flag package's forms, values with them; others stay.
func TestWithoutFlags(t *testing.T) {
	table := testSink(nil).Table()
	var drop []Flag
	for _, n := range []string{"ipvs-sync-period", "knob", "masquerade-all", "cluster-cidr"} {
		f, ok := table.lookup(n)
		if !ok {
			t.Fatalf("no flag %s", n)
		}
		drop = append(drop, f)
	}
	args := []string{"sink", "--ipvs-sync-period", "5s", "-ipvs-scheduler=lc", "--masquerade-all", "--node-name", "--cluster-cidr",
		"--cluster-cidr=10.0.0.0/8", "--v", "2", "--masquerade-all=false", "--dry-run", "--", "--cluster-cidr"}
	want := []string{"sink", "--node-name", "--cluster-cidr", "--v", "2", "--dry-run", "--", "--cluster-cidr"}
	if diff := cmp.Diff(want, table.withoutFlags(args, drop)); diff != "" {
		t.Errorf("withoutFlags (-want +got):\n%s", diff)
	}
}

// TestAPIConfig: --master replaces the kubeconfig's server.
func TestAPIConfig(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://10.0.0.1:6443}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for master, want := range map[string]string{"": "https://10.0.0.1:6443", "https://api.internal.example:443": "https://api.internal.example:443"} {
		rc, err := apiConfig(kc, master)
		if err != nil || rc.Host != want {
			t.Errorf("apiConfig(%q): %v, host %q; want %q", master, err, rc.Host, want)
		}
	}
}
