package scripts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// kubebinModule is the module scripts/kubebin.sh builds the Kubernetes
// binaries from (outside go.work).
const kubebinModule = "tools/kubebin/kubernetes"

// kubeVersion is the Kubernetes release scripts/kubebin.sh builds.
const kubeVersion = "v1.37.2"

// kubebinCommands are the main packages scripts/kubebin.sh builds there.
var kubebinCommands = []string{
	"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-proxy", "./endpointslice-controller",
}

// TestKubebinSharesWorkspace: every module that both the workspace's
// packages (their tests included) and the Kubernetes binaries compile is at
// the workspace's version in tools/kubebin/kubernetes (or above it, where
// Kubernetes requires more), so that from a cold Go cache k8s.io/api,
// apimachinery, client-go and what they import compile once for make
// test's tests and for scripts/kubebin.sh (the same flags: CGO_ENABLED=0,
// no -trimpath).
func TestKubebinSharesWorkspace(t *testing.T) {
	kubeSources(t)
	ws := moduleVersions(t, ".", nil, "-test", "work")
	kube := moduleVersions(t, kubebinModule, []string{"GOWORK=off"}, kubebinCommands...)
	shared := 0
	for mod, v := range ws {
		kv, ok := kube[mod]
		if !ok {
			continue
		}
		shared++
		if versionLess(kv, v) {
			t.Errorf("%s: %s is at %s there, below the workspace's %s: its packages and all that import them compile twice (cd %s && GOWORK=off go get %s@%s)",
				kubebinModule, mod, kv, v, kubebinModule, mod, v)
		}
	}
	if shared < 20 {
		t.Errorf("only %d modules in common between the workspace and %s: the listing is wrong", shared, kubebinModule)
	}
	t.Logf("%d modules compiled by both the workspace and the Kubernetes binaries", shared)
}

// kubeSources skips the test when the module cache lacks Kubernetes'
// sources (make deps has not run: listing would download them), or fails
// it under PROXYSINKS_REQUIRE_KUBE=1 (make test, after make deps).
func kubeSources(t *testing.T) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "k8s.io", "kubernetes@"+kubeVersion)
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("PROXYSINKS_REQUIRE_KUBE") == "1" {
			t.Fatalf("Kubernetes sources missing (run make deps): %v", err)
		}
		t.Skipf("Kubernetes sources missing (make deps downloads them; PROXYSINKS_REQUIRE_KUBE=1 fails instead): %v", err)
	}
}

// moduleVersions returns the version of every module (not the main ones)
// providing a package that pkgs import, listed in dir of the repository.
func moduleVersions(t *testing.T, dir string, env []string, pkgs ...string) map[string]string {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}"}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(root, dir)
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	versions := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if mod, v, ok := strings.Cut(line, " "); ok && v != "" {
			versions[mod] = v
		}
	}
	return versions
}

// versionLess reports whether module version a is below b: the numbers
// of vMAJOR.MINOR.PATCH, then a pre-release (a pseudo-version of the next
// release among them) below the release, pre-releases in string order.
func versionLess(a, b string) bool {
	an, apre := splitVersion(a)
	bn, bpre := splitVersion(b)
	for i := range an {
		if an[i] != bn[i] {
			return an[i] < bn[i]
		}
	}
	switch {
	case apre == bpre:
		return false
	case apre == "" || bpre == "":
		return bpre == ""
	}
	return apre < bpre
}

func splitVersion(v string) ([3]int, string) {
	v, _, _ = strings.Cut(strings.TrimPrefix(v, "v"), "+")
	v, pre, _ := strings.Cut(v, "-")
	var n [3]int
	for i, f := range strings.SplitN(v, ".", 3) {
		n[i], _ = strconv.Atoi(f)
	}
	return n, pre
}

func TestVersionLess(t *testing.T) {
	for _, c := range []struct {
		a, b string
		less bool
	}{
		{"v0.47.0", "v0.50.0", true},
		{"v0.50.0", "v0.47.0", false},
		{"v1.9.4", "v1.9.0", false},
		{"v1.36.12-0.20260120151049-f2248ac996af", "v1.36.12", true},
		{"v1.36.12", "v1.36.12-0.20260120151049-f2248ac996af", false},
		{"v0.0.0-20260108192941-914a6e750570", "v0.0.0-20260626114624-be93311217bd", true},
		{"v2.0.0+incompatible", "v2.0.0+incompatible", false},
		{"v1.10.1", "v1.9.0", false},
	} {
		if got := versionLess(c.a, c.b); got != c.less {
			t.Errorf("versionLess(%s, %s) = %v, want %v", c.a, c.b, got, c.less)
		}
	}
}
