package runtime_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/sinks/ipvssink/ipvssinktest"
	"github.com/proxysinks/proxysinks/sinks/runtime"
	"github.com/proxysinks/proxysinks/sinks/sinktest"
	"sigs.k8s.io/yaml"
)

// fixture is one real configuration: kube-proxy's file (config.conf) or
// its flags, and the proxy mode it names.
type fixture struct {
	name   string
	config string   // the KubeProxyConfiguration, "" for none
	flags  []string // kube-proxy's flags
	// mode is the proxy mode it names; "" when it names none (flags
	// without --proxy-mode): every sink takes it.
	mode string
}

// fixtures reads the real configurations of sinks/kpconfig/testdata: the
// ConfigMaps of kubeadm and kubespray (in its default ipvs mode and in
// iptables mode), kubeadm's in nftables mode, kube-proxy's own defaults, and kops' flags (with its
// --proxy-mode, and without).
func fixtures(t *testing.T) []fixture {
	t.Helper()
	dir := filepath.Join("..", "kpconfig", "testdata")
	configMap := func(file string) string {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		var cm struct{ Data map[string]string }
		if err := yaml.Unmarshal(b, &cm); err != nil || cm.Data["config.conf"] == "" || cm.Data["kubeconfig.conf"] == "" {
			t.Fatalf("%s: %v, keys %v; want config.conf and kubeconfig.conf", file, err, cm.Data)
		}
		return cm.Data["config.conf"]
	}
	defaults, err := os.ReadFile(filepath.Join(dir, "kube-proxy-defaults.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "kops-flags.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var kops []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			kops = append(kops, l)
		}
	}
	kubeadm, kubespray := configMap("kubeadm-configmap.yaml"), configMap("kubespray-configmap.yaml")
	kopsDefault := slices.DeleteFunc(slices.Clone(kops), func(f string) bool { return strings.HasPrefix(f, "--proxy-mode") })
	return []fixture{
		{name: "kubeadm", config: kubeadm, mode: "iptables"},
		// Older kubeadm releases left the mode empty: kube-proxy's default.
		{name: "kubeadm-empty-mode", config: strings.Replace(kubeadm, "mode: iptables", `mode: ""`, 1), mode: "iptables"},
		{name: "kubespray", config: kubespray, mode: "ipvs"},
		// kubespray with kube_proxy_mode iptables: the same ipvs section.
		{name: "kubespray-iptables", config: strings.Replace(kubespray, "mode: ipvs", "mode: iptables", 1), mode: "iptables"},
		{name: "kube-proxy-defaults", config: string(defaults), mode: "iptables"},
		// kubeadm's ConfigMap switched to kube-proxy's nftables mode.
		{name: "kubeadm-nftables", config: strings.Replace(kubeadm, "mode: iptables", "mode: nftables", 1), mode: "nftables"},
		{name: "kops-ipvs", flags: kops, mode: "ipvs"},
		{name: "kops-no-mode", flags: kopsDefault},
	}
}

// TestRealConfigurations: every sink whose mode a real configuration
// names (every sink when it names none) starts with it (a dry run of
// examples/cluster; kops' flags also with --init-only, which reads every
// flag as the static pod gives them), and every other sink refuses it,
// naming the mode.
func TestRealConfigurations(t *testing.T) {
	ipvssinktest.DualStackHost(t)
	runtime.OOMScoreAdjFile = filepath.Join(t.TempDir(), "oom_score_adj")
	t.Cleanup(func() { runtime.OOMScoreAdjFile = "/proc/self/oom_score_adj" })
	for _, fx := range fixtures(t) {
		for _, sink := range registered {
			t.Run(fx.name+"/"+sink.Name, func(t *testing.T) {
				// The manifest is the source: the API's flags stay out of
				// the dry run, and are read by --init-only below.
				api := func(f string) bool { return strings.HasPrefix(f, "--kubeconfig") || strings.HasPrefix(f, "--master") }
				status, stdout, stderr := runFixture(t, sink, fx, sinktest.ExampleNode(sink.Name), api)
				if fx.mode != "" && sink.Mode != fx.mode {
					if status != 2 || !strings.Contains(stderr, "this is the "+sink.Mode+" sink") {
						t.Errorf("a %s configuration in the %s sink: status %d, stderr %q; want 2 naming the mode", fx.mode, sink.Mode, status, stderr)
					}
					return
				}
				if status != 0 || !strings.Contains(stdout, "\n") {
					t.Fatalf("status %d, %d bytes of operations; want 0 and the operations\n%s", status, len(stdout), stderr)
				}
				if len(fx.flags) > 0 {
					status, _, stderr := runFixture(t, sink, fx, []string{sink.Name, "--init-only"}, func(string) bool { return false })
					if status != 0 {
						t.Errorf("--init-only %v: status %d\n%s", fx.flags, status, stderr)
					}
				}
			})
		}
	}
}

// runFixture runs sink with args and fx (its file as --config, its flags
// but those leave reports).
func runFixture(t *testing.T, sink runtime.Sink, fx fixture, args []string, leave func(string) bool) (int, string, string) {
	t.Helper()
	flags := slices.DeleteFunc(slices.Clone(fx.flags), leave)
	if i := slices.Index(args, "--node-name"); i >= 0 && slices.ContainsFunc(flags, func(f string) bool { return strings.HasPrefix(f, "--hostname-override") }) {
		// The fixture names the node (one of the two names of the flag).
		args = slices.Delete(slices.Clone(args), i, i+2)
	}
	a := slices.Clone(args)
	if fx.config != "" {
		p := filepath.Join(t.TempDir(), "config.conf")
		if err := os.WriteFile(p, []byte(fx.config), 0o644); err != nil {
			t.Fatal(err)
		}
		a = append(a, "--config", p)
	}
	var stdout, stderr bytes.Buffer
	status := runtime.Main(sink, append(a, flags...), &stdout, &stderr)
	return status, stdout.String(), stderr.String()
}
