package monitoring

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	"sigs.k8s.io/yaml"

	"github.com/proxysinks/proxysinks/sinks/iptablessink"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

// kubeadmConfigMap is kubeadm's kube-proxy ConfigMap (metricsBindAddress
// "", kube-proxy's default 127.0.0.1:10249), as the sinks' tests keep it.
const kubeadmConfigMap = "sinks/kpconfig/testdata/kubeadm-configmap.yaml"

// metricsAddress runs the iptables sink with --init-only, --config file
// and extra flags, and returns the metrics address it would serve on and
// its log.
func metricsAddress(t *testing.T, file string, flags ...string) (string, string) {
	t.Helper()
	sink := iptablessink.Sink("iptables", "test")
	var addr string
	parse := sink.Parse
	sink.Parse = func(c *cli.Context) (any, error) {
		addr = c.String("metrics-bind-address")
		return parse(c)
	}
	var stdout, stderr bytes.Buffer
	args := append([]string{"iptables", "--init-only", "--config", file, "--hostname-override", "node-1"}, flags...)
	if status := runtime.Main(sink, args, &stdout, &stderr); status != 0 {
		t.Fatalf("%s: status %d\n%s", strings.Join(args, " "), status, stderr.String())
	}
	return addr, stderr.String()
}

// TestMetricsBindAddress runs README.md's command on kubeadm's kube-proxy
// ConfigMap and checks that a sink given the result as --config serves its
// metrics on 0.0.0.0:10249, and that --metrics-bind-address cannot do it.
func TestMetricsBindAddress(t *testing.T) {
	script := regexp.MustCompile(`\| sed '([^']+)'`).FindSubmatch(read(t, readmeFile))
	if script == nil {
		t.Fatalf("%s: no sed command", readmeFile)
	}
	dir := t.TempDir()
	conf := func(name string, configMap []byte) string {
		var cm struct{ Data map[string]string }
		if err := yaml.Unmarshal(configMap, &cm); err != nil || cm.Data["config.conf"] == "" {
			t.Fatalf("%s: want a ConfigMap with config.conf: %v", name, err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(cm.Data["config.conf"]), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	kubeadm := read(t, kubeadmConfigMap)
	sed := exec.Command("sed", string(script[1]))
	sed.Stdin = bytes.NewReader(kubeadm)
	edited, err := sed.Output()
	if err != nil {
		t.Fatalf("sed %s: %v", script[1], err)
	}
	before, after := conf("before.conf", kubeadm), conf("after.conf", edited)

	if addr, _ := metricsAddress(t, before); addr != "127.0.0.1:10249" {
		t.Errorf("kubeadm's ConfigMap: metrics on %q, want the default 127.0.0.1:10249", addr)
	}
	addr, log := metricsAddress(t, before, "--metrics-bind-address", "0.0.0.0:10249")
	if addr != "127.0.0.1:10249" || !strings.Contains(log, "--metrics-bind-address ignored: --config is given") {
		t.Errorf("kubeadm's ConfigMap and --metrics-bind-address: metrics on %q, want 127.0.0.1:10249 and the flag ignored\n%s", addr, log)
	}
	if addr, _ := metricsAddress(t, after); addr != "0.0.0.0:10249" {
		t.Errorf("the ConfigMap after %s's command: metrics on %q, want 0.0.0.0:10249", readmeFile, addr)
	}
}
