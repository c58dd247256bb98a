package e2e_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/e2e/benchmatrix"
	"github.com/proxysinks/proxysinks/e2e/differential"
	"github.com/proxysinks/proxysinks/e2e/node"
)

// root is the repository's root, above this module.
const root = ".."

// sinkBinaries returns the names of the sink binaries: the directories
// under sinks/ whose main.go is a main package.
func sinkBinaries(t *testing.T) []string {
	t.Helper()
	mains, err := filepath.Glob(filepath.Join(root, "sinks", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range mains {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "\npackage main\n") {
			names = append(names, filepath.Base(filepath.Dir(m)))
		}
	}
	return names
}

// missingParts lists the parts of docs/adding-a-sink.md that the sink
// binary name lacks (its main.go is assumed).
func missingParts(name string) []string {
	var missing []string
	exists := func(rel string) bool {
		_, err := os.Stat(filepath.Join(root, rel))
		return err == nil
	}
	mainTest, _ := os.ReadFile(filepath.Join(root, "sinks", name, "main_test.go"))
	if !strings.Contains(string(mainTest), "sinktest.Golden(") && !strings.Contains(string(mainTest), "sinktest.Same(") {
		missing = append(missing, "dry-run golden test (sinks/"+name+"/main_test.go calling sinktest.Golden or sinktest.Same)")
	}
	if !exists(filepath.Join("deploy", name, "kustomization.yaml")) {
		missing = append(missing, "deploy overlay (deploy/"+name+"/kustomization.yaml)")
	}
	if _, ok := node.Sinks[name]; !ok {
		missing = append(missing, "traffic cases (e2e/node.Sinks)")
	}
	mode, ok := differential.Sinks[name]
	switch {
	case !ok:
		missing = append(missing, "kube-proxy differential (e2e/differential.Modes)")
	case !exists(filepath.Join("e2e", "cluster", "testdata", differential.Modes[mode].Differences)):
		missing = append(missing, "differences list (e2e/cluster/testdata/"+differential.Modes[mode].Differences+")")
	}
	rows := benchmatrix.Rows(func(s string) string { return s }, "kube-proxy")
	if !slices.ContainsFunc(rows, func(r benchmatrix.Sink) bool { return r.Name == name && r.Bin == name && !r.KubeProxy }) {
		missing = append(missing, "bench row (e2e/benchmatrix.Rows)")
	}
	return missing
}

// TestEverySinkHasItsParts: every sink binary under sinks/ has each part
// that docs/adding-a-sink.md lists.
func TestEverySinkHasItsParts(t *testing.T) {
	names := sinkBinaries(t)
	if len(names) < 3 {
		t.Fatalf("found sink binaries %v under %s/sinks; want at least the three", names, root)
	}
	for _, name := range names {
		if m := missingParts(name); len(m) > 0 {
			t.Errorf("sink %s lacks (docs/adding-a-sink.md):\n  %s", name, strings.Join(m, "\n  "))
		}
	}
}

// TestMissingPartsNamesEach: a sink with none of the parts is told each
// one, so the check above can fail.
func TestMissingPartsNamesEach(t *testing.T) {
	want := []string{
		"dry-run golden test (sinks/no-such-sink/main_test.go calling sinktest.Golden or sinktest.Same)",
		"deploy overlay (deploy/no-such-sink/kustomization.yaml)",
		"traffic cases (e2e/node.Sinks)",
		"kube-proxy differential (e2e/differential.Modes)",
		"bench row (e2e/benchmatrix.Rows)",
	}
	if diff := cmp.Diff(want, missingParts("no-such-sink")); diff != "" {
		t.Errorf("missing parts (-want +got):\n%s", diff)
	}
}
