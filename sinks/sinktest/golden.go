// Package sinktest holds what the sink binaries' tests share: running a
// sink's main entry with arguments, and comparing its dry-run output with
// a golden file (-update rewrites the file).
package sinktest

import (
	"bytes"
	"flag"
	"io"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// Main is a sink binary's main entry: it runs with args (args[0] the
// program's name) and returns the exit status.
type Main func(args []string, stdout, stderr io.Writer) int

// DryRun runs main with args and returns what it printed on stdout; a
// non-zero exit status fails t with the program's stderr.
func DryRun(t *testing.T, main Main, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if status := main(args, &stdout, &stderr); status != 0 {
		t.Fatalf("%v: exit status %d; stderr:\n%s", args, status, stderr.String())
	}
	return stdout.String()
}

// Golden runs main with args (a dry run) and requires its stdout to be the
// content of the golden file; with -update it writes the output there
// first.
func Golden(t *testing.T, main Main, golden string, args ...string) {
	t.Helper()
	got := DryRun(t, main, args...)
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatalf("update golden file: %v", err)
		}
	}
	compare(t, golden, got)
}

// Same runs main with args (a dry run) and requires its stdout to be the
// content of another sink's golden file, which -update leaves alone (the
// sink that owns the file rewrites it).
func Same(t *testing.T, main Main, golden string, args ...string) {
	t.Helper()
	compare(t, golden, DryRun(t, main, args...))
}

// compare requires got to be the content of the golden file.
func compare(t *testing.T, golden, got string) {
	t.Helper()
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden file: %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("dry-run output (-%s +got):\n%s", golden, diff)
	}
}

// ExampleNode returns the arguments of a dry run of the sink binary name
// on examples/cluster, run from sinks/<name>, as the cluster's node-1 with
// an IPv4 and an IPv6 address and no HTTP listener.
func ExampleNode(name string) []string {
	return []string{name, "--dry-run", "--from-file", "../../examples/cluster",
		"--node-name", "node-1", "--node-address", "192.168.1.10,fd00:1::10",
		"--metrics-bind-address", "", "--healthz-bind-address", ""}
}
