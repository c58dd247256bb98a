package kpconfig

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/urfave/cli/v2"
)

// full sets every field that maps onto a flag, as a kube-proxy ConfigMap
// would (testdata/full-ipvs.yaml, which the IPVS sinks' tests read too).
var full = func() string {
	b, err := os.ReadFile(filepath.Join("testdata", "full-ipvs.yaml"))
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func allFlags(string) bool { return true }

// testMode is the table of a sink of mode "ipvs" that honours two of the
// ipvs fields and ignores the iptables sync periods: the shape of the
// IPVS sinks' (sinks/ipvssink), whose own test checks theirs.
var testMode = []Field{
	{Name: "iptables.localhostNodePorts", Class: Honoured, Flag: "iptables-localhost-nodeports"},
	{Name: "iptables.syncPeriod", Class: Ignored, Why: "the IPVS sinks take ipvs.syncPeriod"},
	{Name: "ipvs.syncPeriod", Class: Honoured, Flag: "sync-period"},
	{Name: "ipvs.scheduler", Class: Honoured, Flag: "ipvs-scheduler"},
	{Name: "ipvs.tcpTimeout", Class: Honoured, Flag: "ipvs-tcp-timeout"},
	NFTables,
}

func TestSettings(t *testing.T) {
	cfg, warnings, err := Decode([]byte(full), "full.yaml")
	if err != nil || len(warnings) > 0 {
		t.Fatalf("Decode: %v, warnings %v", err, warnings)
	}
	got, warnings, err := Settings(cfg, Table("ipvs", testMode), allFlags)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("Settings: %v, warnings %v", err, warnings)
	}
	want := []Setting{
		{"hostnameOverride", "hostname-override", "node-a"},
		{"healthzBindAddress", "healthz-bind-address", "0.0.0.0:10256"},
		{"metricsBindAddress", "metrics-bind-address", "127.0.0.1:10249"},
		{"clientConnection.kubeconfig", "kubeconfig", "/var/lib/kube-proxy/kubeconfig.conf"},
		{"nodePortAddresses", "nodeport-addresses", "192.168.0.0/16,fd00:1::/64"},
		{"clusterCIDR", "cluster-cidr", "10.244.0.0/16,fd00:244::/56"},
		{"detectLocalMode", "detect-local-mode", "ClusterCIDR"},
		{"iptables.masqueradeBit", "iptables-masquerade-bit", "15"},
		{"iptables.masqueradeAll", "masquerade-all", "true"},
		{"ipvs.syncPeriod", "sync-period", "45s"},
		{"ipvs.scheduler", "ipvs-scheduler", "wrr"},
		{"ipvs.tcpTimeout", "ipvs-tcp-timeout", "15m0s"},
		{"logging.format", "log-format", "json"},
		{"logging.verbosity", "log-level", "debug"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Settings (-want +got):\n%s", diff)
	}
}

// TestConntrackSettings: every sink honours kube-proxy's conntrack
// settings through the --conntrack-* flags; a zero set explicitly is
// kept (it leaves the kernel's value, where the default would not).
func TestConntrackSettings(t *testing.T) {
	const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	for _, tc := range []struct {
		name, body string
		want       []Setting
	}{
		{"every setting", "conntrack:\n  maxPerCore: 65536\n  min: 262144\n  tcpEstablishedTimeout: 2h\n  tcpCloseWaitTimeout: 30m\n  tcpBeLiberal: true\n  udpTimeout: 45s\n  udpStreamTimeout: 3m\n", []Setting{
			{"conntrack.maxPerCore", "conntrack-max-per-core", "65536"},
			{"conntrack.min", "conntrack-min", "262144"},
			{"conntrack.tcpEstablishedTimeout", "conntrack-tcp-timeout-established", "2h0m0s"},
			{"conntrack.tcpCloseWaitTimeout", "conntrack-tcp-timeout-close-wait", "30m0s"},
			{"conntrack.tcpBeLiberal", "conntrack-tcp-be-liberal", "true"},
			{"conntrack.udpTimeout", "conntrack-udp-timeout", "45s"},
			{"conntrack.udpStreamTimeout", "conntrack-udp-timeout-stream", "3m0s"},
		}},
		{"kind's: leave the limit", "conntrack:\n  maxPerCore: 0\n  tcpEstablishedTimeout: 0s\n", []Setting{
			{"conntrack.maxPerCore", "conntrack-max-per-core", "0"},
			{"conntrack.tcpEstablishedTimeout", "conntrack-tcp-timeout-established", "0s"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []string{"ipvs", "iptables"} {
				cfg, warnings, err := Decode([]byte(head+"mode: "+mode+"\n"+tc.body), "f.yaml")
				if err != nil || len(warnings) > 0 {
					t.Fatalf("Decode: %v, warnings %v", err, warnings)
				}
				got, warnings, err := Settings(cfg, Table(mode, nil), allFlags)
				if err != nil || len(warnings) > 0 {
					t.Fatalf("%s: Settings: %v, warnings %v", mode, err, warnings)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s: Settings (-want +got):\n%s", mode, diff)
				}
			}
		})
	}
}

func TestSettingsErrorsAndWarnings(t *testing.T) {
	const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	ipvsOnly := func(flag string) bool { return !strings.HasPrefix(flag, "iptables-") }
	for _, tc := range []struct {
		name         string
		body         string
		mode         string
		has          func(string) bool
		wantErr      []string // substrings of the error; none means no error
		wantWarnings []string // substrings, one per warning
	}{
		{name: "empty file sets nothing", mode: "ipvs"},
		{name: "other mode", body: "mode: iptables\n", mode: "ipvs", wantErr: []string{`mode is "iptables", but this is the ipvs sink`}},
		{name: "nftables fields", body: "nftables:\n  masqueradeAll: true\n", mode: "iptables", wantWarnings: []string{"nftables ignored: another proxy mode's settings"}},
		{name: "empty mode is iptables", body: "mode: \"\"\n", mode: "iptables"},
		{name: "empty mode in another sink", body: "mode: \"\"\n", mode: "ipvs", wantErr: []string{"mode is empty, which is kube-proxy's default mode iptables, but this is the ipvs sink: set ipvs"}},
		{name: "a field without a flag in this sink", body: "iptables:\n  localhostNodePorts: false\n", mode: "ipvs", has: ipvsOnly,
			wantErr: []string{"iptables.localhostNodePorts has no meaning for this sink (no --iptables-localhost-nodeports)"}},
		{name: "two errors are both named", body: "mode: nftables\nlogging:\n  format: xml\n", mode: "ipvs",
			wantErr: []string{`mode is "nftables"`, `logging.format "xml" is not supported`}},
		{name: "detect local by interface", body: "detectLocalMode: InterfaceNamePrefix\ndetectLocal:\n  interfaceNamePrefix: veth\n  bridgeInterface: cbr0\n", mode: "ipvs"},
		{name: "iptables sync period in the ipvs sink", body: "iptables:\n  syncPeriod: 10s\n", mode: "ipvs", wantWarnings: []string{"iptables.syncPeriod ignored"}},
		{name: "process tuning", body: "clientConnection:\n  qps: 50\n", mode: "ipvs",
			wantWarnings: []string{"clientConnection.qps/burst/contentType ignored"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if !strings.Contains(body, "mode:") {
				body = "mode: " + tc.mode + "\n" + body
			}
			cfg, warnings, err := Decode([]byte(head+body), "f.yaml")
			if err != nil || len(warnings) > 0 {
				t.Fatalf("Decode: %v, warnings %v", err, warnings)
			}
			has := tc.has
			if has == nil {
				has = allFlags
			}
			_, warnings, err = Settings(cfg, Table(tc.mode, testMode), has)
			if len(tc.wantErr) == 0 && err != nil {
				t.Errorf("error %v, want none", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to say %q", err, w)
				}
			}
			if len(warnings) != len(tc.wantWarnings) {
				t.Errorf("warnings %q, want %d", warnings, len(tc.wantWarnings))
			}
			for i, w := range tc.wantWarnings {
				if i < len(warnings) && !strings.Contains(warnings[i], w) {
					t.Errorf("warning %d: %q, want it to say %q", i, warnings[i], w)
				}
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path  string
		wantErr     string
		wantWarning string
	}{
		{name: "good", path: write("good.yaml", full)},
		{name: "json", path: write("good.json", `{"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration","mode":"ipvs"}`)},
		{name: "missing", path: filepath.Join(dir, "nope.yaml"), wantErr: "no such file"},
		{name: "directory", path: dir, wantErr: "not a regular file"},
		{name: "fifo does not block", path: fifo, wantErr: "not a regular file"},
		{name: "too large", path: write("big.yaml", strings.Repeat("#", maxSize+1)), wantErr: "larger than"},
		{name: "another kind", path: write("pod.yaml", "apiVersion: v1\nkind: Pod\n"), wantErr: "want apiVersion kubeproxy.config.k8s.io/v1alpha1"},
		{name: "not YAML", path: write("bad.yaml", "apiVersion: [\n"), wantErr: "bad.yaml"},
		{name: "unknown field", path: write("typo.yaml", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nipvs:\n  sheduler: wrr\n"),
			wantWarning: `unknown field "ipvs.sheduler"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			var warnings []string
			var err error
			go func() {
				defer close(done)
				_, warnings, err = Load(tc.path)
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Load blocked")
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if tc.wantWarning != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.wantWarning)) {
				t.Errorf("warnings %q, want one saying %q", warnings, tc.wantWarning)
			}
		})
	}
}

// TestApply checks that Apply leaves the flags still set (the runtime has
// dropped those the file replaces, so these are the ones kube-proxy
// applies over the file) and sets the others, aliases reaching the flag
// the sink reads.
func TestApply(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_MIN_SYNC", "7s")
	type values struct {
		Node, Scheduler, Kubeconfig, MinSync, Sync string
		Bit                                        int
		StrictARP                                  bool
	}
	var got values
	var warnings []string
	app := &cli.App{
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config"},
			&cli.StringFlag{Name: "node-name", Aliases: []string{"hostname-override"}},
			&cli.StringFlag{Name: "scheduling-method", Aliases: []string{"ipvs-scheduler"}, Value: "rr"},
			&cli.StringFlag{Name: "kubeconfig"},
			&cli.StringFlag{Name: "healthz-bind-address"},
			&cli.StringFlag{Name: "metrics-bind-address"},
			&cli.StringSliceFlag{Name: "nodeport-addresses"},
			&cli.StringSliceFlag{Name: "cluster-cidr"},
			&cli.StringSliceFlag{Name: "ipvs-exclude-cidrs"},
			&cli.IntFlag{Name: "masquerade-bit", Aliases: []string{"iptables-masquerade-bit"}, Value: 14},
			&cli.BoolFlag{Name: "masquerade-all"},
			&cli.BoolFlag{Name: "ipvs-strict-arp"},
			&cli.DurationFlag{Name: "sync-period", Value: 30 * time.Second},
			&cli.DurationFlag{Name: "min-sync-period", Value: time.Second, EnvVars: []string{"TEST_MIN_SYNC"}},
			&cli.DurationFlag{Name: "ipvs-tcp-timeout"},
			&cli.DurationFlag{Name: "ipvs-tcpfin-timeout"},
			&cli.DurationFlag{Name: "ipvs-udp-timeout"},
			&cli.StringFlag{Name: "log-format"},
			&cli.StringFlag{Name: "log-level"},
			&cli.StringFlag{Name: "detect-local-mode"},
		},
		Action: func(c *cli.Context) error {
			var err error
			fields := Table("ipvs", []Field{
				{Name: "ipvs.syncPeriod", Class: Honoured, Flag: "sync-period"},
				{Name: "ipvs.minSyncPeriod", Class: Honoured, Flag: "min-sync-period"},
				{Name: "ipvs.scheduler", Class: Honoured, Flag: "ipvs-scheduler"},
				{Name: "ipvs.excludeCIDRs", Class: Honoured, Flag: "ipvs-exclude-cidrs"},
				{Name: "ipvs.strictARP", Class: Honoured, Flag: "ipvs-strict-arp"},
				{Name: "ipvs.tcpTimeout", Class: Honoured, Flag: "ipvs-tcp-timeout"},
				{Name: "ipvs.tcpFinTimeout", Class: Honoured, Flag: "ipvs-tcpfin-timeout"},
				{Name: "ipvs.udpTimeout", Class: Honoured, Flag: "ipvs-udp-timeout"},
			})
			if _, warnings, err = Apply(c, fields, nil); err != nil {
				return err
			}
			got = values{c.String("node-name"), c.String("scheduling-method"), c.String("kubeconfig"),
				c.Duration("min-sync-period").String(), c.Duration("sync-period").String(), c.Int("masquerade-bit"), c.Bool("ipvs-strict-arp")}
			return nil
		},
	}
	if err := app.Run([]string{"sink", "--config", path, "--ipvs-scheduler", "lc", "--kubeconfig=/tmp/kc"}); err != nil {
		t.Fatal(err)
	}
	want := values{Node: "node-a", Scheduler: "lc", Kubeconfig: "/tmp/kc", MinSync: "7s", Sync: "45s", Bit: 15, StrictARP: true}
	if diff := cmp.Diff(want, got); diff != "" || len(warnings) > 0 {
		t.Errorf("flags after --config (-want +got):\n%s\nwarnings %q", diff, warnings)
	}
}

// TestTableEntries: an entry naming no field is an error; one without a
// class too; a group warns once, by its name.
func TestTableEntries(t *testing.T) {
	cfg, _, err := Decode([]byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclientConnection:\n  qps: 5\n  burst: 10\n"), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, warnings, err := Settings(cfg, []Field{
		{Name: "ipvs.sheduler", Class: Honoured, Flag: "ipvs-scheduler"},
		{Name: "ipvs.scheduler"},
		{Name: "burst and qps", Paths: []string{"clientConnection.qps", "clientConnection.burst"}, Class: Ignored, Why: "defaults"},
	}, allFlags)
	for _, want := range []string{"ipvs.sheduler is classed as honoured, but ipvs.sheduler is not a field", "ipvs.scheduler has no class"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
	if want := []string{"--config: burst and qps ignored: defaults"}; !cmp.Equal(warnings, want) {
		t.Errorf("warnings %q, want %q", warnings, want)
	}
}

// TestSettingsPrimary: nodePortAddresses' primary keyword passes to
// --nodeport-addresses as it is, and bindAddress, which primary reads,
// sets --bind-address (it was ignored as deprecated).
func TestSettingsPrimary(t *testing.T) {
	const body = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nbindAddress: 192.168.7.2\nnodePortAddresses: [primary, 10.0.0.0/8]\n"
	cfg, warnings, err := Decode([]byte(body), "primary.yaml")
	if err != nil || len(warnings) > 0 {
		t.Fatalf("Decode: %v, warnings %v", err, warnings)
	}
	got, warnings, err := Settings(cfg, Table("ipvs", testMode), allFlags)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("Settings: %v, warnings %v", err, warnings)
	}
	want := []Setting{
		{"nodePortAddresses", "nodeport-addresses", "primary,10.0.0.0/8"},
		{"bindAddress", "bind-address", "192.168.7.2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Settings (-want +got):\n%s", diff)
	}
}

// TestDetectLocalSettings: every local-traffic mode and its companions set
// the flags kube-proxy has for them.
func TestDetectLocalSettings(t *testing.T) {
	const head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	body := "mode: iptables\ndetectLocalMode: BridgeInterface\ndetectLocal:\n  bridgeInterface: cbr0\n  interfaceNamePrefix: veth\nclusterCIDR: 10.244.0.0/16\n"
	cfg, _, err := Decode([]byte(head+body), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, warnings, err := Settings(cfg, Table("iptables", nil), allFlags)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("Settings: %v, warnings %v", err, warnings)
	}
	want := []Setting{
		{"clusterCIDR", "cluster-cidr", "10.244.0.0/16"},
		{"detectLocalMode", "detect-local-mode", "BridgeInterface"},
		{"detectLocal.bridgeInterface", "pod-bridge-interface", "cbr0"},
		{"detectLocal.interfaceNamePrefix", "pod-interface-name-prefix", "veth"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Settings (-want +got):\n%s", diff)
	}
}
