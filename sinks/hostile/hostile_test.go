package hostile

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// binaries are the sink binaries, built once by TestMain.
var binaries []string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hostile-bin")
	if err != nil {
		panic(err)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		out, err := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "github.com/proxysinks/proxysinks/sinks/...").Output()
		if err != nil {
			os.Stderr.WriteString("hostile: go list: " + err.Error() + "\n")
			return 1
		}
		mains := strings.Fields(string(out))
		build := exec.Command("go", append([]string{"build", "-o", dir + "/"}, mains...)...)
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			os.Stderr.WriteString("hostile: go build: " + err.Error() + "\n")
			return 1
		}
		for _, m := range mains {
			binaries = append(binaries, filepath.Join(dir, filepath.Base(m)))
		}
		return m.Run()
	}()
	os.Exit(code)
}

// base are the flags of every case: a dry run as node-1, no HTTP.
var base = []string{"--dry-run", "--node-name", "node-1", "--node-address", "192.168.1.10",
	"--metrics-bind-address=", "--healthz-bind-address="}

// run runs bin with args and returns its exit status, stdout and stderr;
// a run longer than a minute is killed and fails the test.
func run(t *testing.T, bin string, args []string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v: did not end within a minute (hang); stderr:\n%s", filepath.Base(bin), args, stderr.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("%s %v: %v", filepath.Base(bin), args, err)
	return 0, "", ""
}

func TestBinariesFound(t *testing.T) {
	if len(binaries) < 2 {
		t.Fatalf("sink binaries: %v; want at least ipvs-fullstate and ipvs-incremental", binaries)
	}
}

// ipvsOnly reports whether flag is one of the IPVS sinks' own flags
// (sinks/ipvssink), which the other sinks refuse.
func ipvsOnly(flag string) bool {
	return flag == "--weight" || flag == "--ipvs-vip-binding"
}

// kubeProxyIPVS reports whether flag is one of kube-proxy's IPVS flags,
// which the other sinks ignore with a warning, as kube-proxy's other modes
// do.
func kubeProxyIPVS(flag string) bool {
	return flag == "--scheduling-method" || strings.HasPrefix(flag, "--ipvs-") && !ipvsOnly(flag)
}

// TestBadFlags: every bad flag is refused before anything else happens,
// with exit status 2 and a message naming the flag.
func TestBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--weight", "0"}, "--weight: 0 is not in [1, 65535]"},
		{[]string{"--weight", "65536"}, "--weight: 65536 is not in [1, 65535]"},
		{[]string{"--weight", "2147483648"}, "--weight: 2147483648 is not in [1, 65535]"},
		{[]string{"--weight", "4294967296"}, "--weight: 4294967296 is not in [1, 65535]"},
		{[]string{"--weight", "-1"}, "--weight: -1 is not in [1, 65535]"},
		{[]string{"--weight", "99999999999999999999"}, `invalid value "99999999999999999999" for flag -weight`},
		{[]string{"--weight", "many"}, `invalid value "many" for flag -weight`},
		{[]string{"--ipvs-tcp-timeout", "1000000h"}, "--ipvs-tcp-timeout: 1000000h0m0s is longer than the kernel's limit"},
		{[]string{"--ipvs-tcpfin-timeout", "-1s"}, "--ipvs-tcpfin-timeout: -1s is negative"},
		{[]string{"--ipvs-udp-timeout", "500ms"}, "--ipvs-udp-timeout: 500ms is not a whole number of seconds"},
		{[]string{"--ipvs-udp-timeout", "1.5s"}, "--ipvs-udp-timeout: 1.5s is not a whole number of seconds"},
		{[]string{"--metrics-bind-address", "nonsense"}, `--metrics-bind-address: "nonsense" is not IP:port`},
		{[]string{"--metrics-bind-address", "127.0.0.1:99999"}, `--metrics-bind-address: "127.0.0.1:99999" is not IP:port`},
		{[]string{"--healthz-bind-address", "localhost:10256"}, `--healthz-bind-address: "localhost:10256" is not IP:port`},
		{[]string{"--healthz-bind-address", "0.0.0.0:0"}, `--healthz-bind-address: "0.0.0.0:0" is not IP:port`},
		{[]string{"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10249"}, "--healthz-bind-address: \"127.0.0.1:10249\" is also --metrics-bind-address"},
		{[]string{"--log-level", "verbose"}, `--log-level: "verbose" is not debug, info, warn or error`},
		{[]string{"--log-format", "xml"}, `--log-format: "xml" is not text or json`},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--masquerade-bit", "32"}, "--masquerade-bit: 32 is not in [0, 31]"},
		{[]string{"--masquerade-bit", "-1"}, "--masquerade-bit: -1 is not in [0, 31]"},
		{[]string{"--sync-period", "0s"}, "--sync-period: 0s must be positive"},
		{[]string{"--min-sync-period", "-1s"}, "--min-sync-period: -1s is negative"},
		{[]string{"--min-sync-period", "1m"}, "--min-sync-period: 1m0s is longer than --sync-period 30s"},
		{[]string{"--scheduling-method", "fastest"}, `--scheduling-method: unknown scheduler "fastest"`},
		{[]string{"--cluster-cidr", "10.244.0.0"}, `--cluster-cidr: "10.244.0.0" is not a CIDR`},
		{[]string{"--nodeport-addresses", "10.0.0.0/33"}, `--nodeport-addresses: "10.0.0.0/33" is not a CIDR`},
		{[]string{"--ipvs-exclude-cidrs", "x"}, `--ipvs-exclude-cidrs: "x" is not a CIDR`},
		{[]string{"--ipvs-vip-binding", "route"}, `--ipvs-vip-binding: "route" is neither addresses nor routes`},
		{[]string{"--node-address", "10.0.0.300"}, `--node-address: "10.0.0.300" is not an IP address`},
		{[]string{"--node-address", "0.0.0.0"}, "--node-address: 0.0.0.0 is the unspecified address"},
		{[]string{"--node-address", "255.255.255.255"}, "--node-address: 255.255.255.255 is the broadcast address"},
		{[]string{"--node-address", "127.0.0.1"}, "--node-address: 127.0.0.1 is a loopback address"},
		{[]string{"--node-address", "ff02::1"}, "--node-address: ff02::1 is a multicast address"},
		{[]string{"--from-file", "x", "--kubeconfig", "y"}, "--from-file and --kubeconfig: give one source, not both"},
		{[]string{"--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
	}
	for _, bin := range binaries {
		name := filepath.Base(bin)
		for _, tt := range tests {
			t.Run(name+"/"+strings.Join(tt.args, " "), func(t *testing.T) {
				want := tt.want
				netfilter := name == "iptables" || name == "nftables" // the binary's name is its mode
				if flag := tt.args[0]; netfilter && ipvsOnly(flag) && strings.HasPrefix(want, flag+": ") {
					// The iptables and nftables sinks refuse the IPVS
					// sinks' flags by name, whatever their value (one
					// that does not parse as the flag's kind stays a
					// parse error).
					want = flag + `: does not apply to proxy mode "` + name + `"`
				}
				// The bad flag comes last, so it overrides base's.
				status, stdout, stderr := run(t, bin, append(append([]string{}, base...), tt.args...))
				if netfilter && kubeProxyIPVS(tt.args[0]) && strings.HasPrefix(want, tt.args[0]+": ") {
					// Ignored whatever its value (one that does not parse
					// as the flag's kind stays a parse error): not a flag
					// error.
					if status == 2 || !strings.Contains(stderr, tt.args[0]+" ignored") {
						t.Errorf("status %d, stderr %q; want not 2, and %q", status, stderr, tt.args[0]+" ignored")
					}
					return
				}
				if status != 2 || !strings.Contains(stderr, name+": "+want) {
					t.Errorf("status %d, stderr %q; want 2 and %q", status, stderr, name+": "+want)
				}
				if stdout != "" {
					t.Errorf("a bad flag printed operations:\n%s", stdout)
				}
			})
		}
	}
}

const (
	good = `apiVersion: v1
kind: Service
metadata: {name: good, namespace: default}
spec:
  clusterIP: 10.96.0.11
  ports: [{name: http, port: 80, protocol: TCP}]
`
	// badPort has a valid port and an invalid one.
	badPort = `apiVersion: v1
kind: Service
metadata: {name: ports, namespace: default}
spec:
  clusterIP: 10.96.0.12
  ports: [{name: ok, port: 81, protocol: TCP}, {name: bad, port: 70000, protocol: TCP}]
`
	emptyList = "apiVersion: v1\nkind: List\nitems: []\n"
)

// TestBadManifests: the dry run on bad manifests prints the operations of
// what could be read, prints the source's errors naming the file or
// object, and exits 1 when anything is wrong (0 only for a clean input);
// nothing hangs.
func TestBadManifests(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // in a directory given as --from-file
		path  string            // or this path
		fifo  string            // a FIFO of this name in the directory
		want  int
		// stderr must contain each of errs; stdout each of ops, and none
		// of notOps.
		errs, ops, notOps []string
	}{
		{name: "clean", files: map[string]string{"a.yaml": good}, want: 0, ops: []string{"10.96.0.11"}},
		{name: "empty List on purpose", files: map[string]string{"a.yaml": emptyList}, want: 0},
		{name: "truncated", files: map[string]string{"a.yaml": good, "b.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: x"}, want: 1,
			errs: []string{"b.yaml#0: not YAML", "source cannot give a trustworthy state"}, ops: []string{"10.96.0.11"}},
		{name: "non-UTF-8", files: map[string]string{"a.yaml": good, "b.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: \xff\xfe}\n"}, want: 1,
			errs: []string{"b.yaml#0"}, ops: []string{"10.96.0.11"}},
		{name: "bare scalar", files: map[string]string{"a.yaml": good + "---\nhello\n"}, want: 1,
			errs: []string{"a.yaml#1"}, ops: []string{"10.96.0.11"}},
		{name: "bad List item", files: map[string]string{"a.yaml": good, "b.yaml": "apiVersion: v1\nkind: List\nitems: [42]\n"}, want: 1,
			errs: []string{"b.yaml#0.items[0]"}, ops: []string{"10.96.0.11"}},
		{name: "invalid port", files: map[string]string{"a.yaml": good + "---\n" + badPort}, want: 1,
			errs: []string{"Service default/ports", "port 70000", "invalid objects skipped"}, ops: []string{"10.96.0.11", "10.96.0.12"}, notOps: []string{"70000", "4464"}},
		{name: "same object twice", files: map[string]string{"a.yaml": good, "b.yaml": strings.Replace(good, "10.96.0.11", "10.96.0.13", 1)}, want: 0,
			errs: []string{"object defined twice"}, ops: []string{"10.96.0.13"}, notOps: []string{"10.96.0.11"}},
		{name: "FIFO named yaml", files: map[string]string{"a.yaml": good}, fifo: "f.yaml", want: 1,
			errs: []string{"f.yaml: not a regular file"}, ops: []string{"10.96.0.11"}},
		{name: "empty file", files: map[string]string{"a.yaml": ""}, want: 1, errs: []string{"a.yaml: reads as empty"}},
		{name: "comments only", files: map[string]string{"a.yaml": "# nothing\n"}, want: 1, errs: []string{"a.yaml: reads as empty"}},
		{name: "empty directory", files: map[string]string{}, want: 1, errs: []string{"no manifest file"}},
		{name: "/dev/null", path: "/dev/null", want: 1, errs: []string{"/dev/null: not a regular file"}},
		{name: "/dev/zero", path: "/dev/zero", want: 1, errs: []string{"/dev/zero: not a regular file"}},
		{name: "missing", path: "/nonexistent/manifests", want: 1, errs: []string{"--from-file"}},
	}
	for _, bin := range binaries {
		name := filepath.Base(bin)
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				path := tt.path
				if path == "" {
					path = t.TempDir()
					for f, content := range tt.files {
						if err := os.WriteFile(filepath.Join(path, f), []byte(content), 0o644); err != nil {
							t.Fatal(err)
						}
					}
					if tt.fifo != "" {
						if err := syscall.Mkfifo(filepath.Join(path, tt.fifo), 0o644); err != nil {
							t.Fatal(err)
						}
					}
				}
				status, stdout, stderr := run(t, bin, append(append([]string{}, base...), "--from-file", path))
				if status != tt.want {
					t.Errorf("status %d, want %d; stderr:\n%s", status, tt.want, stderr)
				}
				for _, e := range tt.errs {
					if !strings.Contains(stderr, e) {
						t.Errorf("stderr lacks %q:\n%s", e, stderr)
					}
				}
				for _, o := range tt.ops {
					if !strings.Contains(stdout, o) {
						t.Errorf("stdout lacks %q:\n%s", o, stdout)
					}
				}
				for _, o := range tt.notOps {
					if strings.Contains(stdout, o) {
						t.Errorf("stdout has %q:\n%s", o, stdout)
					}
				}
			})
		}
	}
}
