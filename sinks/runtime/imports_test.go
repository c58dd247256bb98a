package runtime

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// forbiddenImports are the client-go packages no sink binary may compile:
// the clientset and its typed clients and scheme (which register every
// API group of k8s.io/api), the generated informers and listers, and the
// apply configurations. With them a cold build of a sink compiles about
// 20 MB more Go source (docs/build-times.md); the kube source and the
// Events use REST clients of the few groups they read
// (client/source/kube.NewAPI) instead. Tests may use the clientset (its
// fakes, through client/source/kube/kubetest): test imports do not reach
// the binaries.
var forbiddenImports = []string{
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/listers",
	"k8s.io/client-go/applyconfigurations",
}

// forbidden returns the entry of forbiddenImports that pkg is or is under.
func forbidden(pkg string) (string, bool) {
	for _, f := range forbiddenImports {
		if pkg == f || strings.HasPrefix(pkg, f+"/") {
			return f, true
		}
	}
	return "", false
}

// importGraph returns each dependency of main (main included) with the
// packages it imports, from go list -deps.
func importGraph(t *testing.T, main string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, main)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", main, err, stderr.String())
	}
	g := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			g[f[0]] = f[1:]
		}
	}
	return g
}

// forbiddenChains returns, for each forbidden package main reaches, the
// shortest import chain from main to it ("main -> a -> b"), sorted.
func forbiddenChains(g map[string][]string, main string) []string {
	parent := map[string]string{main: ""}
	queue := []string{main}
	var chains []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if _, bad := forbidden(p); bad {
			chain := []string{p}
			for q := parent[p]; q != ""; q = parent[q] {
				chain = append(chain, q)
			}
			slices.Reverse(chain)
			chains = append(chains, strings.Join(chain, " -> "))
			continue // what it imports is reached through it
		}
		for _, imp := range g[p] {
			if _, seen := parent[imp]; !seen {
				parent[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	slices.Sort(chains)
	return chains
}

// TestSinkBinariesCompileNoClientset: no main package under sinks/ depends
// on the clientset, the generated informers or listers, or the apply
// configurations; a failure names each forbidden package reached and the
// import chain that reaches it.
func TestSinkBinariesCompileNoClientset(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "github.com/proxysinks/proxysinks/sinks/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	mains := strings.Fields(string(out))
	if len(mains) == 0 {
		t.Fatal("go list found no main package under sinks/")
	}
	for _, m := range mains {
		g := importGraph(t, m)
		if _, ok := g["k8s.io/client-go/tools/cache"]; !ok {
			t.Errorf("%s: go list -deps has no k8s.io/client-go/tools/cache: not the graph of a sink", m)
		}
		for _, c := range forbiddenChains(g, m) {
			t.Errorf("%s depends on a forbidden package: %s", m, c)
		}
	}
}

// TestForbiddenChains: the chain search names the forbidden package and
// the shortest path to it, and stops at it.
func TestForbiddenChains(t *testing.T) {
	g := map[string][]string{
		"m":                            {"a", "b"},
		"a":                            {"k8s.io/client-go/kubernetes", "k8s.io/client-go/rest"},
		"b":                            {"c"},
		"c":                            {"k8s.io/client-go/informers/core/v1"},
		"k8s.io/client-go/kubernetes":  {"k8s.io/client-go/kubernetes/scheme"},
		"k8s.io/client-go/rest":        nil,
		"k8s.io/client-go/kubernetesx": nil,
	}
	got := forbiddenChains(g, "m")
	want := []string{
		"m -> a -> k8s.io/client-go/kubernetes",
		"m -> b -> c -> k8s.io/client-go/informers/core/v1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("forbiddenChains (-want +got):\n%s", diff)
	}
	if _, bad := forbidden("k8s.io/client-go/kubernetesx"); bad {
		t.Error("k8s.io/client-go/kubernetesx is not under k8s.io/client-go/kubernetes")
	}
}
