package runtime

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/sinks/version"
)

// cfgSink is a controller that does nothing; main keeps the configuration it was built with.
type cfgSink struct{}

func (cfgSink) Snapshot(*client.Snapshot)   {}
func (cfgSink) Resync() dataplane.SyncStats { return dataplane.SyncStats{} }

// main runs Main with a sink that records its Env, in a dry run of the
// demo cluster.
func main(t *testing.T, args ...string) (status int, cfg Config, stdout, stderr string) {
	t.Helper()
	sink := Sink{Name: "test-sink", Mode: "ipvs", New: func(e Env) (Built, error) {
		cfg = e.Config
		return Built{Controller: cfgSink{}}, nil
	}}
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
// onto; flags and environment variables win; a file for another mode is a
// flag error.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ipvs := write("ipvs.yaml", "mode: ipvs\nipvs:\n  scheduler: wrr\n  syncPeriod: 45s\n  minSyncPeriod: 3s\nconntrack:\n  maxPerCore: 1\n")
	dry := []string{"--dry-run", "--from-file", "../../examples/demo/cluster.yaml", "--node-name", "demo-node", "--node-address", "10.244.2.1"}

	status, cfg, _, stderr := main(t, append([]string{"--config", ipvs}, dry...)...)
	if status != 0 || cfg.Scheduler != "wrr" || cfg.SyncPeriod != 45*time.Second || cfg.MinSyncPeriod != 3*time.Second {
		t.Errorf("--config: status %d, scheduler %q, sync %v/%v; want wrr 45s/3s\n%s", status, cfg.Scheduler, cfg.SyncPeriod, cfg.MinSyncPeriod, stderr)
	}
	if !strings.Contains(stderr, "conntrack ignored") {
		t.Errorf("no warning for the conntrack settings:\n%s", stderr)
	}

	t.Setenv("PROXYSINKS_MIN_SYNC_PERIOD", "5s")
	status, cfg, _, stderr = main(t, append([]string{"--config", ipvs, "--ipvs-scheduler", "lc"}, dry...)...)
	if status != 0 || cfg.Scheduler != "lc" || cfg.SyncPeriod != 45*time.Second || cfg.MinSyncPeriod != 5*time.Second {
		t.Errorf("flag and environment over --config: status %d, scheduler %q, sync %v/%v; want lc 45s/5s\n%s", status, cfg.Scheduler, cfg.SyncPeriod, cfg.MinSyncPeriod, stderr)
	}

	other := write("nft.yaml", "mode: nftables\n")
	if status, _, _, stderr := main(t, append([]string{"--config", other}, dry...)...); status != 2 || !strings.Contains(stderr, `--config: mode is "nftables", but this is the ipvs sink`) {
		t.Errorf("--config for another mode: status %d, stderr %q; want 2 naming the mode", status, stderr)
	}
	if status, _, _, stderr := main(t, append([]string{"--config", filepath.Join(dir, "missing.yaml")}, dry...)...); status != 2 || !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("--config missing: status %d, stderr %q; want 2 naming the file", status, stderr)
	}

	// A field that maps onto a flag the sink refuses is named as such.
	sink := Sink{Name: "test-sink", Mode: "iptables", Unsupported: []string{"scheduling-method"},
		New: func(Env) (Built, error) { return Built{Controller: cfgSink{}}, nil }}
	iptables := write("iptables.yaml", "mode: iptables\nipvs:\n  scheduler: wrr\n")
	var out, errs bytes.Buffer
	status = Main(sink, append([]string{"test-sink", "--config", iptables}, dry...), &out, &errs)
	if want := "--config: ipvs.scheduler has no meaning for this sink (no --ipvs-scheduler)"; status != 2 || !strings.Contains(errs.String(), want) {
		t.Errorf("--config with a refused flag: status %d, stderr %q; want 2 and %q", status, errs.String(), want)
	}
}

// TestHelpHidesUnsupported: a flag that does not apply to a sink is not in
// its --help, and giving it is still refused by name; every flag of the
// runtime is of a kind that can be hidden.
func TestHelpHidesUnsupported(t *testing.T) {
	for _, f := range Flags() {
		if !hide(f) {
			t.Errorf("flag --%s (%T) cannot be hidden", f.Names()[0], f)
		}
	}
	sink := Sink{Name: "test-sink", Mode: "iptables", Unsupported: []string{"weight", "ipvs-udp-timeout"},
		New: func(Env) (Built, error) { return Built{Controller: cfgSink{}}, nil }}
	var out, errs bytes.Buffer
	if status := Main(sink, []string{"test-sink", "--help"}, &out, &errs); status != 0 {
		t.Fatalf("--help: status %d: %s", status, errs.String())
	}
	help := out.String()
	for _, name := range []string{"--weight", "--ipvs-udp-timeout"} {
		if strings.Contains(help, name) {
			t.Errorf("--help lists %s, which the sink refuses:\n%s", name, help)
		}
	}
	if !strings.Contains(help, "--scheduling-method") {
		t.Errorf("--help lacks --scheduling-method, which applies:\n%s", help)
	}
	out.Reset()
	errs.Reset()
	status := Main(sink, []string{"test-sink", "--dry-run", "--weight", "2"}, &out, &errs)
	if want := `--weight: does not apply to proxy mode "iptables"`; status != 2 || !strings.Contains(errs.String(), want) {
		t.Errorf("--weight given: status %d, %q; want 2 and %q", status, errs.String(), want)
	}
}
