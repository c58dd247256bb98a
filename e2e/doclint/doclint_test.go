package doclint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// maxLines is the most lines a README may have.
const maxLines = 150

// skipDirs are the directory names whose READMEs are not the project's own:
// the shared kube binaries and kits, build output, test inputs, git.
var skipDirs = map[string]bool{".cache": true, "bin": true, "testdata": true, ".git": true}

// repoRoot is the repository root: the directory of go.work above this
// package (e2e/doclint).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatalf("doclint: find the repository root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("doclint: repository root %s has no go.work: %v", root, err)
	}
	return root
}

// readmes returns every README.md under root outside skipDirs, as paths
// relative to root, sorted.
func readmes(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && skipDirs[d.Name()] {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "README.md" {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("doclint: walk %s for READMEs: %w", root, err)
	}
	sort.Strings(out)
	return out, nil
}

// resultsName matches a benchmark result file and captures its run label.
var resultsName = regexp.MustCompile(`^results-(.+)\.json$`)

// runLabels returns the run labels of the result files in dir
// (bench/report/results-<label>.json), sorted.
func runLabels(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("doclint: read run labels from %s: %w", dir, err)
	}
	var labels []string
	for _, e := range entries {
		if m := resultsName.FindStringSubmatch(e.Name()); m != nil && !e.IsDir() {
			labels = append(labels, m[1])
		}
	}
	sort.Strings(labels)
	return labels, nil
}

// dateRe matches a calendar date YYYY-MM-DD that is not part of a longer
// number (group 1: the date).
var dateRe = regexp.MustCompile(`(?:^|[^0-9A-Za-z.-])((?:19|20|21)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01]))(?:$|T|[^0-9A-Za-z-])`)

// dates returns the calendar dates in line.
func dates(line string) []string {
	var out []string
	for _, m := range dateRe.FindAllStringSubmatch(line, -1) {
		out = append(out, m[1])
	}
	return out
}

// timeRe matches a time of day with a time zone: HH:MM, optionally :SS and
// a fraction, then UTC, GMT, Z, a numeric offset or a common zone
// abbreviation. The hour must not follow a digit, a dot, a colon or a
// bracket, so addresses with ports (10.96.0.10:80, [::1]:10249) never
// match (group 1: the time and its zone).
var timeRe = regexp.MustCompile(`(?:^|[^0-9.:\]\[])((?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?(?:Z|[+-](?:0\d|1[0-4]):?[0-5]\d| ?(?:UTC|GMT|CET|CEST|BST|EST|EDT|CST|CDT|PST|PDT)(?:[+-]\d{1,2}(?::?\d\d)?)?))(?:$|[^0-9A-Za-z])`)

// times returns the times of day with a time zone in line.
func times(line string) []string {
	var out []string
	for _, m := range timeRe.FindAllStringSubmatch(line, -1) {
		out = append(out, m[1])
	}
	return out
}

// labelsIn returns the run labels that line carries. A label is matched as
// a whole token (letters, digits, '-' and '_'), so 1k-vm does not match
// inside 1k-vm-changes; a label that is a plain word (no digit, no '-',
// such as "short") is matched only when quoted ("short" or `short`), since
// the word itself is ordinary English. A results file's name
// (results-<label>.json) carries its label too.
func labelsIn(line string, labels []string) []string {
	var out []string
	for _, label := range labels {
		if strings.Contains(line, "results-"+label+".json") {
			out = append(out, label)
			continue
		}
		if plainWord(label) {
			if strings.Contains(line, `"`+label+`"`) || strings.Contains(line, "`"+label+"`") {
				out = append(out, label)
			}
			continue
		}
		for i := 0; ; {
			j := strings.Index(line[i:], label)
			if j < 0 {
				break
			}
			start, end := i+j, i+j+len(label)
			if (start == 0 || !tokenByte(line[start-1])) && (end == len(line) || !tokenByte(line[end])) {
				out = append(out, label)
				break
			}
			i = start + 1
		}
	}
	return out
}

// plainWord reports whether label has neither a digit nor a '-'.
func plainWord(label string) bool {
	return !strings.ContainsAny(label, "0123456789-")
}

// tokenByte reports whether b belongs to a label token.
func tokenByte(b byte) bool {
	return b == '-' || b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// finding is one rule a README breaks: where and what.
type finding struct {
	Line int    // 1-based; 0 for the whole file
	What string // the rule and the offending text
}

// check returns what data, a README's contents, breaks.
func check(data []byte, labels []string) []finding {
	var out []finding
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(data) == 0 {
		lines = nil
	}
	if len(lines) > maxLines {
		out = append(out, finding{0, fmt.Sprintf("%d lines, at most %d (move measurements and long explanations to docs/)", len(lines), maxLines)})
	}
	for i, line := range lines {
		for _, l := range labelsIn(line, labels) {
			out = append(out, finding{i + 1, fmt.Sprintf("run label %q: %s", l, line)})
		}
		for _, d := range dates(line) {
			out = append(out, finding{i + 1, fmt.Sprintf("calendar date %q: %s", d, line)})
		}
		for _, tm := range times(line) {
			out = append(out, finding{i + 1, fmt.Sprintf("time of day %q: %s", tm, line)})
		}
	}
	return out
}

// TestREADMEs fails for every README that is too long or carries a run
// label, a calendar date or a time of day, naming file, line and text.
func TestREADMEs(t *testing.T) {
	root := repoRoot(t)
	labels, err := runLabels(filepath.Join(root, "bench", "report"))
	if err != nil {
		t.Fatal(err)
	}
	if len(labels) == 0 {
		t.Fatalf("doclint: no bench/report/results-<label>.json under %s: the run labels cannot be checked", root)
	}
	files, err := readmes(root)
	if err != nil {
		t.Fatal(err)
	}
	if !containsString(files, "README.md") {
		t.Fatalf("doclint: no README.md at the repository root %s (found %v)", root, files)
	}
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Errorf("doclint: read %s: %v", name, err)
			continue
		}
		for _, f := range check(data, labels) {
			if f.Line == 0 {
				t.Errorf("%s: %s", name, f.What)
				continue
			}
			t.Errorf("%s:%d: %s", name, f.Line, f.What)
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestDates(t *testing.T) {
	tests := []struct {
		line string
		want []string
	}{
		{"run 2026-12-04 17:49 UTC", []string{"2026-12-04"}},
		{"(2026-12-03)", []string{"2026-12-03"}},
		{"from 2025-01-31 to 2025-02-01.", []string{"2025-01-31", "2025-02-01"}},
		{"2026-12-01T04:56:00Z", []string{"2026-12-01"}},
		{"`2024-06-30`", []string{"2024-06-30"}},
		{"10.96.0.10:80", nil},
		{"v0.0.0-20260626114624-be93311217bd", nil},
		{"2026-13-01 is no month", nil},
		{"2026-12-32 is no day", nil},
		{"12026-12-01", nil},
		{"2026-12-011", nil},
		{"2026-12-01x", nil},
		{"ports 2000-2010 and 1000-10-10", nil},
		{"results-2026-12-01.json", nil},
		{"", nil},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, dates(tt.line)); diff != "" {
				t.Errorf("dates(%q) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

func TestTimes(t *testing.T) {
	tests := []struct {
		line string
		want []string
	}{
		{"run 2026-12-04 17:49 UTC", []string{"17:49 UTC"}},
		{"at 09:28:03 UTC, twice", []string{"09:28:03 UTC"}},
		{"2026-12-01T04:56:00Z", []string{"04:56:00Z"}},
		{"2026-12-01T04:56:00.123Z", []string{"04:56:00.123Z"}},
		{"at 21:20+01:00", []string{"21:20+01:00"}},
		{"at 21:20:05-0500 then", []string{"21:20:05-0500"}},
		{"9:05 GMT", []string{"9:05 GMT"}},
		{"(23:59 CEST)", []string{"23:59 CEST"}},
		{"17:49UTC", []string{"17:49UTC"}},
		{"10:00 UTC+1", []string{"10:00 UTC+1"}},
		{"21:20 and 21:31 UTC", []string{"21:31 UTC"}},
		{"10.96.0.10:80", nil},
		{"10.96.0.10:53 UTC", nil},
		{"[::1]:10249", nil},
		{"[::1]:10 UTC", nil},
		{"fd00::10:20 Z", nil},
		{"127.0.0.1:10249 and 0.0.0.0:10256", nil},
		{"--metrics-bind-address=:10249", nil},
		{"a 12:30 meeting", nil},
		{"ratio 10:1", nil},
		{"24:00 UTC", nil},
		{"12:60 UTC", nil},
		{"12:30 UTCX", nil},
		{"12:30 Zone", nil},
		{"123:45 UTC", nil},
		{"image proxysinks/iptables:v1.2", nil},
		{"", nil},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, times(tt.line)); diff != "" {
				t.Errorf("times(%q) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

func TestLabelsIn(t *testing.T) {
	labels := []string{"10k-vm", "10k-vm-reps3", "1k-vm", "nft-check", "short", "short-host"}
	tests := []struct {
		line string
		want []string
	}{
		{`run "10k-vm-reps3", 101 min`, []string{"10k-vm-reps3"}},
		{"runs 10k-vm and 1k-vm", []string{"10k-vm", "1k-vm"}},
		{"`PROXYSINKS_BENCH_LABEL=nft-check`", []string{"nft-check"}},
		{`run "short-host"`, []string{"short-host"}},
		{`run "short"`, []string{"short"}},
		{"run `short`", []string{"short"}},
		{"(1k-vm)", []string{"1k-vm"}},
		{"the short subset, SHORT=1", nil},
		{"a short run on the host", nil},
		{"10k-vm-changes", nil},
		{"bench/report/results-10k-vm.json", []string{"10k-vm"}},
		{"see results-short.json", []string{"short"}},
		{"bench/report/results-<label>.json", nil},
		{"results-10k-vm-changes.json", nil},
		{"a 10k-vmx run", nil},
		{"x10k-vm", nil},
		{"1k-vm_old", nil},
		{"", nil},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, labelsIn(tt.line, labels)); diff != "" {
				t.Errorf("labelsIn(%q) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	long := strings.Repeat("a line\n", maxLines)
	tests := []struct {
		name string
		data string
		want []finding
	}{
		{"empty", "", nil},
		{"at the limit", long, nil},
		{"at the limit without a final newline", strings.TrimSuffix(long, "\n"), nil},
		{"one line over", long + "one more\n", []finding{{0, "151 lines, at most 150 (move measurements and long explanations to docs/)"}}},
		{"clean", "# x\n\nServes 10.96.0.10:80 and [::1]:10249.\n", nil},
		{
			"each rule on its line",
			"# x\nrun \"10k-vm\"\n\nmeasured 2026-12-03\nat 18:52 UTC\n",
			[]finding{
				{2, `run label "10k-vm": run "10k-vm"`},
				{4, `calendar date "2026-12-03": measured 2026-12-03`},
				{5, `time of day "18:52 UTC": at 18:52 UTC`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, check([]byte(tt.data), []string{"10k-vm"})); diff != "" {
				t.Errorf("check (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunLabels(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"results-10k-vm.json", "results-short.json", "NOTES.md", "results-.json", "plot.png"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "results-dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := runLabels(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"10k-vm", "short"}, got); diff != "" {
		t.Errorf("runLabels (-want +got):\n%s", diff)
	}
	if _, err := runLabels(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("runLabels of a missing directory: got %v, want an error wrapping fs.ErrNotExist", err)
	}
}

func TestReadmes(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"README.md", "a/README.md", "a/b/README.md", ".cache/kind/README.md", "bin/README.md", "a/testdata/README.md", "a/readme.md", "a/NOTREADME.md"} {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readmes(root)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"README.md", "a/README.md", "a/b/README.md"}, got); diff != "" {
		t.Errorf("readmes (-want +got):\n%s", diff)
	}
}
