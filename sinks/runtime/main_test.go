package runtime

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/version"
	"github.com/urfave/cli/v2"
)

// cfgSink is a controller that does nothing; main keeps the configuration it was built with.
type cfgSink struct{}

func (cfgSink) Snapshot(*client.Snapshot) {}
func (cfgSink) Resync() SyncStats         { return SyncStats{} }

// testSink returns a sink of mode "ipvs" built by build, with a flag of its
// own (--knob, alias --ipvs-scheduler, which the file's ipvs.scheduler
// sets; Parse puts its value in Config.SinkConfig), another sink's flag
// it refuses (--weight) and one it ignores (--other).
func testSink(build func(Env) (Built, error)) Sink {
	return Sink{Name: "test-sink", Mode: "ipvs", New: build,
		Flags: func() []Flag {
			return []Flag{
				{Flag: &cli.StringFlag{Name: "knob", Aliases: []string{"ipvs-scheduler"}, Value: "rr"}, Class: kpconfig.Honoured},
				{Flag: &cli.Int64Flag{Name: "weight"}, Class: kpconfig.Refused},
				{Flag: &cli.BoolFlag{Name: "other"}, Class: kpconfig.Ignored, Why: "another sink's"},
			}
		},
		Parse: func(c *cli.Context) (any, error) {
			if k := c.String("knob"); k != "bad" {
				return k, nil
			}
			return nil, errors.New("--knob: bad")
		},
		Fields: []kpconfig.Field{
			{Name: "ipvs.scheduler", Class: kpconfig.Honoured, Flag: "ipvs-scheduler"},
			{Name: "ipvs.syncPeriod", Class: kpconfig.Honoured, Flag: "sync-period"},
			{Name: "ipvs.minSyncPeriod", Class: kpconfig.Honoured, Flag: "min-sync-period"},
		},
	}
}

// main runs Main with a sink that records its Env, in a dry run of the
// demo cluster.
func main(t *testing.T, args ...string) (status int, cfg Config, stdout, stderr string) {
	t.Helper()
	sink := testSink(func(e Env) (Built, error) {
		cfg = e.Config
		return Built{Controller: cfgSink{}}, nil
	})
	var out, errs bytes.Buffer
	status = Main(sink, append([]string{"test-sink"}, args...), &out, &errs)
	return status, cfg, out.String(), errs.String()
}

func TestVersion(t *testing.T) {
	status, _, stdout, _ := main(t, "--version")
	if want := "test-sink version " + version.Get().String(); status != 0 || strings.TrimSpace(stdout) != want {
		t.Errorf("--version: status %d, %q; want 0, %q", status, stdout, want)
	}
}

// TestConfigFile: kube-proxy's configuration file sets the flags it maps
// onto; as in kube-proxy, flags and environment variables the file
// replaces are ignored (logged once), while --hostname-override and the
// logging flags win over it; a file for another mode is a flag error.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ipvs := write("ipvs.yaml", "mode: ipvs\nhostnameOverride: file-node\nipvs:\n  scheduler: wrr\n  syncPeriod: 45s\n  minSyncPeriod: 3s\nconntrack:\n  maxPerCore: 1\nlogging:\n  verbosity: 4\n")
	dry := []string{"--dry-run", "--from-file", "../../examples/demo/cluster.yaml", "--node-name", "demo-node", "--node-address", "10.244.2.1"}

	status, cfg, _, stderr := main(t, append([]string{"--config", ipvs}, dry...)...)
	if status != 0 || cfg.SinkConfig != "wrr" || cfg.SyncPeriod != 45*time.Second || cfg.MinSyncPeriod != 3*time.Second || cfg.LogLevel != "debug" {
		t.Errorf("--config: status %d, knob %q, sync %v/%v, log level %s; want wrr 45s/3s debug\n%s", status, cfg.SinkConfig, cfg.SyncPeriod, cfg.MinSyncPeriod, cfg.LogLevel, stderr)
	}
	if cfg.Conntrack.MaxPerCore != 1 || cfg.Conntrack.Min != 128*1024 {
		t.Errorf("--config: conntrack max per core %d, min %d; want the file's 1 and the default 131072", cfg.Conntrack.MaxPerCore, cfg.Conntrack.Min)
	}
	if cfg.NodeName != "demo-node" {
		t.Errorf("--node-name (--hostname-override) with --config: %q, want the flag's demo-node over the file's", cfg.NodeName)
	}

	t.Setenv("PROXYSINKS_MIN_SYNC_PERIOD", "5s")
	args := append([]string{"--config", ipvs, "--ipvs-scheduler", "lc", "--ipvs-sync-period=9s", "--proxy-mode", "nftables", "--feature-gates", "AllowServiceExternalIPs=false", "--v", "2"}, dry...)
	status, cfg, _, stderr = main(t, args...)
	if status != 0 || cfg.SinkConfig != "wrr" || cfg.SyncPeriod != 45*time.Second || cfg.MinSyncPeriod != 3*time.Second || cfg.LogLevel != "info" {
		t.Errorf("flags and environment with --config: status %d, knob %q, sync %v/%v, log level %s; want the file's wrr 45s/3s and --v's info\n%s",
			status, cfg.SinkConfig, cfg.SyncPeriod, cfg.MinSyncPeriod, cfg.LogLevel, stderr)
	}
	for _, want := range []string{"--knob ignored: --config is given, and kube-proxy then takes ipvs.scheduler from the file",
		"--min-sync-period ignored: --config is given", "--ipvs-sync-period ignored: --config is given", "--proxy-mode ignored: --config is given",
		"--feature-gates ignored: --config is given"} {
		if strings.Count(stderr, want) != 1 {
			t.Errorf("want the warning %q once:\n%s", want, stderr)
		}
	}
	other := write("nft.yaml", "mode: nftables\n")
	if status, _, _, stderr := main(t, append([]string{"--config", other}, dry...)...); status != 2 || !strings.Contains(stderr, `--config: mode is "nftables", but this is the ipvs sink`) {
		t.Errorf("--config for another mode: status %d, stderr %q; want 2 naming the mode", status, stderr)
	}
	gates := write("gates.yaml", "mode: ipvs\nfeatureGates:\n  AllowServiceExternalIPs: false\n")
	if status, _, _, stderr := main(t, append([]string{"--config", gates}, dry...)...); status != 2 || !strings.Contains(stderr, "--config: featureGates: AllowServiceExternalIPs=false: the sinks always program") {
		t.Errorf("--config with a gate refused: status %d, stderr %q; want 2 naming featureGates and the gate", status, stderr)
	}
	if status, _, _, stderr := main(t, append([]string{"--config", filepath.Join(dir, "missing.yaml")}, dry...)...); status != 2 || !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("--config missing: status %d, stderr %q; want 2 naming the file", status, stderr)
	}

	// A field the sink refuses is named as such.
	sink := Sink{Name: "test-sink", Mode: "iptables", Fields: []kpconfig.Field{kpconfig.NoFlag("ipvs.scheduler", "ipvs-scheduler")},
		New: func(Env) (Built, error) { return Built{Controller: cfgSink{}}, nil }}
	iptables := write("iptables.yaml", "mode: iptables\nipvs:\n  scheduler: wrr\n")
	var out, errs bytes.Buffer
	status = Main(sink, append([]string{"test-sink", "--config", iptables}, dry...), &out, &errs)
	if want := "--config: ipvs.scheduler has no meaning for this sink (no --ipvs-scheduler)"; status != 2 || !strings.Contains(errs.String(), want) {
		t.Errorf("--config with a refused flag: status %d, stderr %q; want 2 and %q", status, errs.String(), want)
	}
}

// TestHelpHidesUnsupported: a flag the sink does not honour is not in its
// --help; giving it is refused by name, or ignored with a warning naming
// it; every flag of a table is of a kind that can be hidden and unbound
// from the environment.
func TestHelpHidesUnsupported(t *testing.T) {
	for _, f := range testSink(nil).Table().Flags {
		if !prepare(f.Flag, false) || !unbindEnv(f.Flag) {
			t.Errorf("flag --%s (%T) cannot be hidden or unbound from the environment", f.Name(), f.Flag)
		}
	}
	status, _, help, stderr := main(t, "--help")
	if status != 0 {
		t.Fatalf("--help: status %d: %s", status, stderr)
	}
	for _, name := range []string{"--weight", "--other"} {
		if strings.Contains(help, name) {
			t.Errorf("--help lists %s, which the sink does not honour:\n%s", name, help)
		}
	}
	if !strings.Contains(help, "--knob") {
		t.Errorf("--help lacks --knob, the sink's own:\n%s", help)
	}
	dry := []string{"--dry-run", "--from-file", "../../examples/demo/cluster.yaml", "--node-name", "demo-node", "--node-address", "10.244.2.1"}
	status, _, _, stderr = main(t, append(dry, "--weight", "2")...)
	if want := `test-sink: --weight: does not apply to proxy mode "ipvs"; remove it`; status != 2 || !strings.Contains(stderr, want) {
		t.Errorf("--weight given: status %d, %q; want 2 and %q", status, stderr, want)
	}
	t.Setenv("PROXYSINKS_OTHER", "true")
	status, _, _, stderr = main(t, dry...)
	if want := "--other ignored: another sink's"; status != 0 || !strings.Contains(stderr, want) {
		t.Errorf("--other from the environment: status %d, %q; want 0 and %q", status, stderr, want)
	}
	status, _, _, stderr = main(t, append(dry, "--knob", "bad")...)
	if want := "test-sink: --knob: bad"; status != 2 || !strings.Contains(stderr, want) {
		t.Errorf("--knob bad: status %d, %q; want 2 and %q", status, stderr, want)
	}
}
