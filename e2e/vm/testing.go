package vm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Environment variables that steer VM tests on the host:
//   - SkipEnv=1 skips them (make test-unit: the VM level runs separately);
//   - RequireEnv=1 fails them when the VM cannot run (make test-vm), so a
//     missing kernel or qemu never passes silently.
const (
	SkipEnv    = "PROXYSINKS_SKIP_VM"
	RequireEnv = "PROXYSINKS_REQUIRE_VM"
)

// Require checks that the VM can run here, and skips the test (or fails it,
// under RequireEnv=1) naming what is missing.
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv(SkipEnv) == "1" {
		t.Skip("VM tests are skipped (" + SkipEnv + "=1); make test-vm runs them")
	}
	missing := func(what string) {
		t.Helper()
		if os.Getenv(RequireEnv) == "1" {
			t.Fatal("vm: cannot run: " + what)
		}
		t.Skip("vm: cannot run: " + what)
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		missing("qemu-system-x86_64 not found (run make deps)")
	}
	dir, err := DefaultCacheDir()
	if err != nil {
		missing(err.Error())
	}
	if _, err := FindKernel(dir); err != nil {
		missing(err.Error())
	}
}

// timeout returns how long a run may take: what is left of the test's
// deadline minus a margin to report, at most max.
func timeout(t testing.TB, max time.Duration) time.Duration {
	d := max
	if dl, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := dl.Deadline(); ok {
			if left := time.Until(end) - 30*time.Second; left < d {
				d = left
			}
		}
	}
	if d < 30*time.Second {
		d = 30 * time.Second
	}
	return d
}

// logWriter sends each console line to t.Log and keeps a copy.
type logWriter struct {
	t   testing.TB
	buf bytes.Buffer
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// RunShell runs a shell command in the VM and returns its exit status and
// console output; the output is also logged line by line. It fails the test
// when the guest hangs, crashes or cannot start.
func RunShell(t testing.TB, command string, opt Options) (int, string) {
	t.Helper()
	status, console, err := RunShellOutput(t, command, opt)
	if err != nil {
		t.Fatal(err)
	}
	return status, console
}

// RunShellOutput is RunShell returning the error (the guest hung, crashed,
// could not start or was stopped from outside) with the console output
// up to then, instead of failing the test: for callers that keep what the
// guest printed before it went.
func RunShellOutput(t testing.TB, command string, opt Options) (int, string, error) {
	t.Helper()
	Require(t)
	w := &logWriter{t: t}
	opt.Output = w
	if opt.Timeout == 0 {
		opt.Timeout = timeout(t, 15*time.Minute)
	}
	status, err := Run(context.Background(), command, opt)
	return status, w.buf.String(), err
}

// RunTests compiles the tests of a workspace package (an import path) as a
// static binary, runs it in the VM with args (for example "-test.run",
// "Kernel", "-test.v") and fails t if it fails. The binary runs as root in
// the package's directory, copied into the guest, with PROXYSINKS_VM=1 set,
// so kernel features it finds missing fail instead of skipping.
func RunTests(t *testing.T, pkg string, args ...string) {
	t.Helper()
	RunTestsWith(t, pkg, Options{}, args...)
}

// RunTestsWith is RunTests with VM options (a NIC, a work directory of
// its own instead of the package's directory, more memory); the test
// binary is added to opt.Files.
func RunTestsWith(t *testing.T, pkg string, opt Options, args ...string) {
	t.Helper()
	Require(t)
	bin, dir := CompileTests(t, pkg)
	name := filepath.Base(bin)
	cmd := commandLine(name, args)
	files := map[string]string{name: bin}
	for k, v := range opt.Files {
		files[k] = v
	}
	opt.Files = files
	if opt.WorkDir == "" {
		opt.WorkDir = dir
	}
	status, _ := RunShell(t, cmd, opt)
	if status != 0 {
		t.Fatalf("vm: tests of %s failed in the VM (exit status %d)", pkg, status)
	}
}

// CompileTests compiles the tests of a workspace package (an import path)
// as a static binary for the guest, named after the package's directory
// (for example bench.test), into the tree's build directory (BuildDir),
// and returns its path and the package's directory; it fails t if it
// cannot.
func CompileTests(t *testing.T, pkg string) (bin, dir string) {
	t.Helper()
	root, err := WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err = goOutput(root, "list", "-f", "{{.Dir}}", pkg)
	if err != nil {
		t.Fatalf("vm: find package %s: %v", pkg, err)
	}
	out, err := BuildDir(root, "tests", pkg)
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(out, filepath.Base(dir)+".test")
	if _, err := goOutput(root, "test", "-c", "-o", bin, pkg); err != nil {
		t.Fatalf("vm: compile tests of %s: %v", pkg, err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("vm: package %s has no tests to run", pkg)
	}
	return bin, dir
}

// BuildSink builds a sink's main package (sinks/<sink> of the workspace)
// as a static binary, as make build does, for this host or the guest, into
// the tree's build directory (BuildDir), and returns its path; it fails t
// if it cannot.
func BuildSink(t testing.TB, sink string) string {
	t.Helper()
	root, err := WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := BuildDir(root, "sinks")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(out, sink)
	if _, err := goOutput(root, "build", "-o", bin, "./sinks/"+sink); err != nil {
		t.Fatalf("vm: build sink %s: %v", sink, err)
	}
	return bin
}

// BuildDir returns (and makes) the directory where the tests of the tree at
// root keep the binaries they build, under key: one directory per tree
// and key in the temporary directory, kept from run to run. The go command
// does not link again a binary whose file is up to date (its build ID
// matches), so the packages of a make test that build the same sink or the
// same guest test binary link it once, and a second run links nothing that
// has not changed. It is on the file system of the go command's work
// directory (the temporary directory, unless GOTMPDIR says otherwise), so
// a binary replaced there is renamed into place: a process running the
// old one keeps it.
func BuildDir(root string, key ...string) (string, error) {
	sum := sha256.Sum256([]byte(strings.Join(append([]string{root}, key...), "\x00")))
	dir := filepath.Join(os.TempDir(), "proxysinks-builds", fmt.Sprintf("%x", sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("vm: build directory: %w", err)
	}
	return dir, nil
}

// commandLine is the guest's shell command running the program name (on
// $PATH) with args, each quoted.
func commandLine(name string, args []string) string {
	words := []string{name}
	for _, a := range args {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

// goOutput runs the go command in dir with cgo off (the guest has no libc
// for Go binaries) and returns its trimmed output.
func goOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", &goError{args: args, err: err, stderr: stderr.String()}
	}
	return strings.TrimSpace(string(out)), nil
}

type goError struct {
	args   []string
	err    error
	stderr string
}

func (e *goError) Error() string {
	return "go " + strings.Join(e.args, " ") + ": " + e.err.Error() + ": " + strings.TrimSpace(e.stderr)
}

func (e *goError) Unwrap() error { return e.err }
