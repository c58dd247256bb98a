package sinktest

import (
	"strings"
	"testing"
)

// InputRules returns the arguments of a dry run of the sink binary name on
// sinktest/testdata/input-rules.yaml (values kube-proxy v1.37.2 skips
// alone, repairs or reads per family), run from sinks/<name>, as
// ExampleNode's node.
func InputRules(name string) []string {
	args := ExampleNode(name)
	args[3] = "../sinktest/testdata/input-rules.yaml"
	return args
}

// Lines requires every line of want to be in out, and no line of out to
// contain any of unwanted.
func Lines(t *testing.T, out string, want, unwanted []string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		have[l] = true
		for _, u := range unwanted {
			if strings.Contains(l, u) {
				t.Errorf("output has %q: %s", u, l)
			}
		}
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("output lacks %s", w)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
