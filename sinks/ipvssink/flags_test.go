package ipvssink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/runtime"
	"github.com/urfave/cli/v2"
)

// TestConfigFileFields: the IPVS sinks' table maps every field they take
// onto their flags, in the file's order of concerns.
func TestConfigFileFields(t *testing.T) {
	full, err := os.ReadFile(filepath.Join("..", "kpconfig", "testdata", "full-ipvs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, warnings, err := kpconfig.Decode(full, "full.yaml")
	if err != nil || len(warnings) > 0 {
		t.Fatalf("Decode: %v, warnings %v", err, warnings)
	}
	got, warnings, err := kpconfig.Settings(cfg, kpconfig.Table("ipvs", fields), func(string) bool { return true })
	if err != nil || len(warnings) > 0 {
		t.Fatalf("Settings: %v, warnings %v", err, warnings)
	}
	want := []kpconfig.Setting{
		{Field: "hostnameOverride", Flag: "hostname-override", Value: "node-a"},
		{Field: "healthzBindAddress", Flag: "healthz-bind-address", Value: "0.0.0.0:10256"},
		{Field: "metricsBindAddress", Flag: "metrics-bind-address", Value: "127.0.0.1:10249"},
		{Field: "clientConnection.kubeconfig", Flag: "kubeconfig", Value: "/var/lib/kube-proxy/kubeconfig.conf"},
		{Field: "nodePortAddresses", Flag: "nodeport-addresses", Value: "192.168.0.0/16,fd00:1::/64"},
		{Field: "clusterCIDR", Flag: "cluster-cidr", Value: "10.244.0.0/16,fd00:244::/56"},
		{Field: "detectLocalMode", Flag: "detect-local-mode", Value: "ClusterCIDR"},
		{Field: "iptables.masqueradeBit", Flag: "iptables-masquerade-bit", Value: "15"},
		{Field: "iptables.masqueradeAll", Flag: "masquerade-all", Value: "true"},
		{Field: "ipvs.syncPeriod", Flag: "sync-period", Value: "45s"},
		{Field: "ipvs.minSyncPeriod", Flag: "min-sync-period", Value: "2s"},
		{Field: "ipvs.scheduler", Flag: "ipvs-scheduler", Value: "wrr"},
		{Field: "ipvs.excludeCIDRs", Flag: "ipvs-exclude-cidrs", Value: "10.10.0.0/16"},
		{Field: "ipvs.strictARP", Flag: "ipvs-strict-arp", Value: "true"},
		{Field: "ipvs.tcpTimeout", Flag: "ipvs-tcp-timeout", Value: "15m0s"},
		{Field: "ipvs.tcpFinTimeout", Flag: "ipvs-tcpfin-timeout", Value: "30s"},
		{Field: "ipvs.udpTimeout", Flag: "ipvs-udp-timeout", Value: "5s"},
		{Field: "logging.format", Flag: "log-format", Value: "json"},
		{Field: "logging.verbosity", Flag: "log-level", Value: "debug"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Settings (-want +got):\n%s", diff)
	}
}

// parseArgs parses args with the IPVS sinks' flags.
func parseArgs(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	var fs []cli.Flag
	for _, f := range flags() {
		fs = append(fs, f.Flag)
	}
	var cfg Config
	var perr error
	app := &cli.App{Flags: fs, Action: func(c *cli.Context) error {
		v, err := parse(c)
		if err == nil {
			cfg = v.(Config)
		}
		perr = err
		return nil
	}}
	if err := app.Run(append([]string{"sink"}, args...)); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return cfg, perr
}

// TestParse: the IPVS sinks' flags and their defaults reach Config; a bad
// value is an error naming the flag.
func TestParse(t *testing.T) {
	got, err := parseArgs(t)
	if want := (Config{Scheduler: "rr", Weight: 1, VIPBinding: dataplane.BindAddresses}); err != nil || !cmp.Equal(got, want) {
		t.Errorf("defaults: %+v, %v; want %+v", got, err, want)
	}
	got, err = parseArgs(t, "--ipvs-scheduler", "mh", "--weight", "3", "--ipvs-strict-arp", "--ipvs-tcp-timeout", "15m", "--ipvs-vip-binding", "routes")
	want := Config{Scheduler: "mh", Weight: 3, StrictARP: true, TCPTimeout: 15 * time.Minute, VIPBinding: dataplane.BindRoutes}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("flags: %+v, %v; want %+v", got, err, want)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--weight", "0"}, "--weight: 0 is not in [1, 65535]"},
		{[]string{"--scheduling-method", "fastest"}, `--scheduling-method: unknown scheduler "fastest"`},
		{[]string{"--ipvs-udp-timeout", "500ms"}, "--ipvs-udp-timeout: 500ms is not a whole number of seconds"},
		{[]string{"--ipvs-exclude-cidrs", "x"}, `--ipvs-exclude-cidrs: "x" is not a CIDR`},
		{[]string{"--ipvs-vip-binding", "route"}, `--ipvs-vip-binding: "route" is neither addresses nor routes`},
	} {
		if _, err := parseArgs(t, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v; want %q", tt.args, err, tt.want)
		}
	}
}

// TestConfigOf: a runtime.Config without the IPVS flags gives the zero
// Config.
func TestConfigOf(t *testing.T) {
	if got := config(runtime.Config{}); !cmp.Equal(got, Config{}) {
		t.Errorf("config of an empty runtime.Config: %+v", got)
	}
}
