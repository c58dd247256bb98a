package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// report is a ginkgo v2 JUnit report of e2e.test with the given test cases.
func report(focus string, cases ...string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="9" disabled="1" errors="0" failures="1" time="12.5">
  <testsuite name="Kubernetes e2e suite" tests="9" skipped="1" failures="1" time="12.5">
    <properties>
      <property name="FocusStrings" value="` + focus + `"></property>
      <property name="SkipStrings" value="\[Slow\]"></property>
    </properties>
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="0.1"></testcase>
` + strings.Join(cases, "\n") + `
  </testsuite>
</testsuites>`
}

const (
	passA    = `<testcase name="[It] [sig-network] Services a" status="passed" time="1"></testcase>`
	failA    = `<testcase name="[It] [sig-network] Services a" status="failed" time="1"><failure message="wget timed out&#xA;second line" type="failed">stack</failure></testcase>`
	passB    = `<testcase name="[It] [sig-network] Services b" status="passed" time="1"></testcase>`
	failB    = `<testcase name="[It] [sig-network] Services b" status="failed" time="1"><failure message="no route to host" type="failed"></failure></testcase>`
	skipC    = `<testcase name="[It] [sig-network] Services c" status="skipped" time="0"><skipped message="skipped - Requires at least 2 nodes (not 1)"></skipped></testcase>`
	filtered = `<testcase name="[It] [sig-apps] Deployment d" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>`
	timedOut = `<testcase name="[It] [sig-network] Services e" status="timedout" time="1"><failure message="timed out" type="timedout"></failure></testcase>`
	failText = `<testcase name="[It] [sig-network] Services f" status="failed" time="1"><failure message="" type="failed">[FAILED] waiting for service to be down timed out&#xA;In [It] at: service.go:2416</failure></testcase>`
)

func TestParseReport(t *testing.T) {
	for _, tc := range []struct {
		name    string
		xml     string
		want    map[string]Spec
		wantErr bool
	}{
		{
			name: "states",
			xml:  report("Services", passB, failA, skipC, filtered, timedOut, failText),
			want: map[string]Spec{
				"[sig-network] Services a": {State: Failed, Reason: "wget timed out"},
				"[sig-network] Services b": {State: Passed},
				"[sig-network] Services c": {State: Skipped, Reason: "Requires at least 2 nodes (not 1)"},
				"[sig-network] Services e": {State: Failed, Reason: "timed out"},
				"[sig-network] Services f": {State: Failed, Reason: "waiting for service to be down timed out"},
			},
		},
		{name: "only filtered out", xml: report("x", filtered), want: map[string]Spec{}},
		{name: "not xml", xml: "<testsuites", wantErr: true},
		{name: "no suite", xml: "<testsuites></testsuites>", wantErr: true},
		{
			name:    "unknown status",
			xml:     report("x", `<testcase name="[It] x" status="pending"></testcase>`),
			wantErr: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseReport([]byte(tc.xml))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, r.Specs); diff != "" {
				t.Errorf("specs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kube-proxy-iptables")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadRun(dir); err == nil {
		t.Fatal("ReadRun without a report: no error")
	}
	write("junit_01.xml", report(`\[sig-network\] Services`, passA, failB, skipC))
	write("cluster.yaml", "nodes:\n  - role: control-plane\n  - role: worker\n  - role: worker\n")
	r, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{r.Name, r.Focus, r.Skip, r.Nodes, r.Seconds, r.Count(Passed), r.Count(Failed), r.Count(Skipped)}
	want := []any{"kube-proxy-iptables", `\[sig-network\] Services`, `\[Slow\]`, 3, 12.5, 1, 1, 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("run (-want +got):\n%s", diff)
	}
}

func TestRender(t *testing.T) {
	parse := func(name, xml string) Run {
		r, err := ParseReport([]byte(xml))
		if err != nil {
			t.Fatal(err)
		}
		r.Name, r.Report, r.Nodes = name, name+"/junit_01.xml", 3
		return r
	}
	runs := []Run{
		parse("iptables", report("S", failA, failB, skipC)),
		parse("nftables-old", report("other", passA)),
		parse("kube-proxy-iptables", report("S", passA, failB, skipC)),
	}
	page := Render(runs)
	for _, tc := range []struct {
		name, want string
	}{
		{"summary, kube-proxy first", "| kube-proxy-iptables | 3 | 1 | 1 | 1 | 12 | `kube-proxy-iptables/junit_01.xml` |\n| iptables | 3 | 0 | 2 | 1 | 12 |"},
		{"columns", "| spec | kube-proxy-iptables | iptables |\n"},
		{"row a", "| [sig-network] Services a | pass | **fail** |\n"},
		{"row b", "| [sig-network] Services b | **fail** | **fail** |\n"},
		{"row c", "| [sig-network] Services c | skip | skip |\n"},
		{"sink bug", "kube-proxy in its mode passes (1):\n\n- iptables, [sig-network] Services a: wget timed out\n"},
		{"environment", "kube-proxy in its mode too (1):\n\n- kube-proxy-iptables and iptables, [sig-network] Services b: no route to host\n"},
		{"skip reason", "- kube-proxy-iptables, [sig-network] Services c: Requires at least 2 nodes (not 1)\n"},
		{"other focus apart", "## Focus `other`, skip `\\[Slow\\]`\n"},
	} {
		if !strings.Contains(page, tc.want) {
			t.Errorf("%s: page lacks %q:\n%s", tc.name, tc.want, page)
		}
	}
	if i, j := strings.Index(page, "## Focus `S`"), strings.Index(page, "## Focus `other`"); i < 0 || j < i {
		t.Errorf("groups not sorted by focus:\n%s", page)
	}
}

func TestRun(t *testing.T) {
	root := t.TempDir()
	if err := run(root, ""); err == nil {
		t.Error("run of an empty directory: no error")
	}
	dir := filepath.Join(root, "iptables")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "junit_01.xml"), []byte(report("S", passA)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "results.md")
	if err := run(root, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "| [sig-network] Services a | pass |") {
		t.Errorf("%s:\n%s", out, b)
	}
}
