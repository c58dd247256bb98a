package vm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Suite is one part of a RunSuites guest: a workspace package's tests
// (Pkg, an import path, run with Args in a copy of the package's
// directory) or a shell command (Command, run in an empty directory).
type Suite struct {
	// Name names the subtest; default: the package's last path element.
	Name    string
	Pkg     string
	Args    []string
	Command string
}

// SuiteResult is what one suite of a RunSuites guest printed, and how it
// ended.
type SuiteResult struct {
	Name string
	// Output is the suite's part of the console.
	Output string
	// Status is the suite's exit status; Done is false when the guest
	// stopped (hung, crashed) before the suite ended.
	Status int
	Done   bool
}

// RunSuites runs several suites in one guest, one after the other in the
// order given: one boot instead of one per package (a boot under TCG costs
// about 7 s of host CPU). Each suite becomes a subtest of t named after it,
// holding its part of the console, and fails when the suite fails; a
// failing suite does not stop the ones after it. Suites share the guest's
// kernel: each package's kernel tests must leave the initial network
// namespace as they found it, and a suite that changes it (a shell
// script creating links or IPVS services there) goes last. It returns the
// suites' results by name, for checks on their output.
func RunSuites(t *testing.T, opt Options, suites ...Suite) map[string]SuiteResult {
	t.Helper()
	Require(t)
	root, err := WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	var pkgs []string
	names := make([]string, len(suites))
	seen := map[string]bool{}
	for i, s := range suites {
		if (s.Pkg == "") == (s.Command == "") {
			t.Fatalf("vm: suite %d (%q): set exactly one of Pkg and Command", i, s.Name)
		}
		names[i] = s.Name
		if names[i] == "" {
			names[i] = path.Base(s.Pkg)
		}
		if seen[names[i]] || strings.ContainsAny(names[i], "/ '") {
			t.Fatalf("vm: suite name %q repeated or not a plain word", names[i])
		}
		seen[names[i]] = true
		if s.Pkg != "" {
			pkgs = append(pkgs, s.Pkg)
		}
	}
	// One go command compiles every package's tests, into a build
	// directory of their own (BuildDir): they load together instead of one
	// go process each, and a binary already up to date is not linked again.
	dirs := map[string]string{}
	var bins string
	if len(pkgs) > 0 {
		out, err := goOutput(root, append([]string{"list", "-f", "{{.ImportPath}} {{.Dir}}"}, pkgs...)...)
		if err != nil {
			t.Fatalf("vm: find packages: %v", err)
		}
		for _, line := range strings.Split(out, "\n") {
			if p, d, ok := strings.Cut(line, " "); ok {
				dirs[p] = d
			}
		}
		bins, err = BuildDir(root, append([]string{"suites"}, pkgs...)...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := goOutput(root, append([]string{"test", "-c", "-o", bins + "/"}, pkgs...)...); err != nil {
			t.Fatalf("vm: compile tests: %v", err)
		}
	}
	files := map[string]string{}
	for k, v := range opt.Files {
		files[k] = v
	}
	tag := "PROXYSINKS-SUITE-" + nonce()
	var script strings.Builder
	script.WriteString("st=0\n")
	for i, s := range suites {
		dir := filepath.Join(work, strconv.Itoa(i))
		cmd := s.Command
		if s.Pkg != "" {
			src, ok := dirs[s.Pkg]
			if !ok {
				t.Fatalf("vm: package %s not found", s.Pkg)
			}
			bin := filepath.Base(src) + ".test"
			if _, err := os.Stat(filepath.Join(bins, bin)); err != nil {
				t.Fatalf("vm: package %s has no tests to run", s.Pkg)
			}
			if _, dup := files[bin]; dup {
				t.Fatalf("vm: two packages compile to %s", bin)
			}
			files[bin] = filepath.Join(bins, bin)
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatalf("vm: copy %s: %v", src, err)
			}
			cmd = commandLine(bin, s.Args)
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&script, "echo %s begin %s\n(cd /job/work/%d && %s)\ns=$?\necho %s end %s $s\n[ $s -eq 0 ] || st=1\n",
			tag, names[i], i, cmd, tag, names[i])
	}
	script.WriteString("exit $st\n")
	opt.Files, opt.WorkDir = files, work
	if opt.Timeout == 0 {
		opt.Timeout = timeout(t, 15*time.Minute)
	}
	var console bytes.Buffer
	opt.Output = &console
	status, runErr := Run(context.Background(), script.String(), opt)
	results, rest := splitSuites(console.String(), tag)
	if strings.TrimSpace(rest) != "" {
		t.Log(rest)
	}
	byName := map[string]SuiteResult{}
	for i, name := range names {
		r := results[name]
		r.Name = name
		byName[name] = r
		t.Run(name, func(t *testing.T) {
			if r.Output != "" {
				t.Log(r.Output)
			}
			switch {
			case !r.Done:
				t.Errorf("vm: suite %s did not finish: the guest stopped first", name)
			case r.Status != 0:
				t.Errorf("vm: suite %s failed in the VM (exit status %d)", describe(suites[i]), r.Status)
			}
		})
	}
	if runErr != nil {
		t.Fatal(runErr)
	}
	if ok := !t.Failed(); ok != (status == 0) {
		t.Errorf("vm: the guest's status %d disagrees with its suites' results", status)
	}
	return byName
}

// describe names a suite in a failure message.
func describe(s Suite) string {
	if s.Pkg != "" {
		return "tests of " + s.Pkg
	}
	return "command " + strconv.Quote(s.Command)
}

// splitSuites splits a RunSuites console at its tag lines ("<tag> begin
// <name>", "<tag> end <name> <status>") into the suites' results, and
// returns the lines outside every suite (the boot's) apart.
func splitSuites(console, tag string) (map[string]SuiteResult, string) {
	results := map[string]SuiteResult{}
	var rest, buf strings.Builder
	cur := ""
	flush := func(status int, done bool) {
		results[cur] = SuiteResult{Name: cur, Output: buf.String(), Status: status, Done: done}
		cur = ""
		buf.Reset()
	}
	for _, line := range strings.SplitAfter(console, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == tag && f[1] == "begin":
			if cur != "" {
				flush(0, false)
			}
			cur = f[2]
		case len(f) == 4 && f[0] == tag && f[1] == "end" && f[2] == cur:
			n, err := strconv.Atoi(f[3])
			if err != nil {
				n = -1
			}
			flush(n, true)
		case cur != "":
			buf.WriteString(line)
		default:
			rest.WriteString(line)
		}
	}
	if cur != "" {
		flush(0, false)
	}
	return results, rest.String()
}
