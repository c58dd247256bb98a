package differential

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client/logbuf"
	"github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// hostAPIAddr is where the proxies in their namespaces reach the
// apiserver: a relay (apiRelay) listening in the namespace's loopback.
const hostAPIAddr = "127.0.0.1:6443"

// hostKernel is what a capture on this host reads: the tools it needs,
// a snapshot of the namespace's kernel state (the State, and by section
// each chain's rules in their order), and whether a state shows a synced
// cluster (a service of the broad cluster programmed).
type hostKernel struct {
	tools  []string
	read   func(t *testing.T, ns *nstest.NetNS) (cluster.State, map[string]map[string][]string)
	synced func(cluster.State) bool
}

// iptablesKernel reads iptables-save and ip6tables-save (sections
// cluster.SectionIPTables and cluster.SectionIP6, comments kept).
var iptablesKernel = hostKernel{
	tools: []string{"iptables-save", "ip6tables-save"},
	read: func(t *testing.T, ns *nstest.NetNS) (cluster.State, map[string]map[string][]string) {
		st, chains := cluster.State{}, map[string]map[string][]string{}
		for section, tool := range map[string]string{cluster.SectionIPTables: "iptables-save", cluster.SectionIP6: "ip6tables-save"} {
			raw := ns.MustRun(t, tool)
			st[section] = cluster.Normalize(section, raw, true)
			chains[section] = cluster.Chains(section, raw, true)
		}
		return st, chains
	},
	synced: hasServiceChains,
}

// captureHost runs a proxy of the iptables mode on a fresh node of this
// host (captureOn) and returns its iptables and ip6tables rules.
func captureHost(e *Env, bin string, args ...string) Capture {
	e.T.Helper()
	return captureOn(e, iptablesKernel, bin, args...)
}

// captureOn runs a proxy on a fresh node (hostNode) and returns its
// state (captureIn).
func captureOn(e *Env, k hostKernel, bin string, args ...string) Capture {
	e.T.Helper()
	return captureIn(e, k, hostNode(e, k), bin, args...)
}

// hostNode returns a fresh network namespace whose node address is
// cluster.BroadNodeIP and whose loopback reaches the apiserver at
// hostAPIAddr, once the tools k reads the kernel with are found.
func hostNode(e *Env, k hostKernel) *nstest.NetNS {
	t := e.T
	t.Helper()
	for _, tool := range append([]string{"ip"}, k.tools...) {
		nstest.LookPath(t, tool)
	}
	ns := nstest.New(t)
	for _, args := range [][]string{
		{"link", "add", "node0", "type", "veth", "peer", "name", "node0p"},
		{"addr", "add", cluster.BroadNodeIP + "/24", "dev", "node0"},
		{"link", "set", "node0", "up"},
		{"link", "set", "node0p", "up"},
	} {
		ns.MustRun(t, "ip", args...)
	}
	apiRelay(t, ns, fmt.Sprintf("127.0.0.1:%d", e.Cluster.APIPort))
	return ns
}

// captureIn runs a proxy in ns, waits until its kernel state (as k reads
// it) has stopped changing for 3 s, and returns it, with the proxy's
// ERROR log lines (section cluster.SectionErrors) and its kernel writes;
// then stops it.
func captureIn(e *Env, k hostKernel, ns *nstest.NetNS, bin string, args ...string) Capture {
	t := e.T
	t.Helper()
	name := filepath.Base(bin)
	p := startIn(t, ns, bin, args...)
	defer p.stop()

	var prev cluster.State
	var chains map[string]map[string][]string
	start := time.Now()
	for stable := 0; stable < 3; {
		if time.Since(start) > 90*time.Second {
			p.quit()
			t.Fatalf("%s: rules not stable after 90 s; log:\n%s", name, tail(p.log.String(), 300))
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited: %v; log:\n%s", name, p.err, tail(p.log.String(), 60))
		case <-time.After(time.Second):
		}
		var cur cluster.State
		cur, chains = k.read(t, ns)
		// A proxy that programs no service at all (its syncs all fail) is
		// captured once its rules have been stable for a while.
		if equalState(cur, prev) && (k.synced(cur) || time.Since(start) > 30*time.Second) {
			stable++
		} else {
			stable = 0
		}
		prev = cur
	}
	t.Logf("%s: rules stable after %s", name, time.Since(start).Round(time.Second))
	if t.Failed() || testing.Verbose() {
		t.Logf("%s log (tail):\n%s", name, tail(p.log.String(), 30))
	}
	if errs := errorLines(p.log.String(), 20); errs != "" {
		t.Logf("%s logged errors (the first 20):\n%s", name, errs)
	}
	prev[cluster.SectionErrors] = cluster.Normalize(cluster.SectionErrors, p.log.String(), false)
	dump(t, name, prev)
	return Capture{State: prev, Chains: chains, Synced: k.synced(prev), Writes: kernelWrites(ns)}
}

// process is a proxy started in a namespace.
type process struct {
	cmd *exec.Cmd
	log *logbuf.Buffer
	// exited is closed once the process has been waited for (err then
	// holds its status), so any number of readers see it.
	exited chan struct{}
	err    error
}

// startIn starts bin in ns; the child inherits the namespace of the
// thread that starts it (no Pdeathsig: that thread exits right after).
func startIn(t *testing.T, ns *nstest.NetNS, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), log: &logbuf.Buffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := ns.Do(p.cmd.Start); err != nil {
		t.Fatalf("start %s: %v", filepath.Base(bin), err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	return p
}

// quit asks for a goroutine dump (SIGQUIT shows where a stalled proxy
// waits) and gives it 5 s to exit.
func (p *process) quit() {
	p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
}

// stop ends the process with SIGTERM, or SIGKILL after 20 s.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// equalState reports whether two captures are the same.
func equalState(a, b cluster.State) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// hasServiceChains reports whether a capture has a service chain in
// either family (a proxy that has synced its cluster).
func hasServiceChains(st cluster.State) bool {
	for _, section := range []string{cluster.SectionIPTables, cluster.SectionIP6} {
		for _, l := range st[section] {
			if strings.HasPrefix(l, "nat -A KUBE-SVC-") {
				return true
			}
		}
	}
	return false
}

// errorLine matches a log line reporting an error: klog's "E" lines, and
// any line saying error or failed.
var errorLine = regexp.MustCompile(`^E\d{4} |(?i)\berror\b|\bfailed\b`)

// errorLines returns the first n lines of log that report errors (what
// a hostile cluster made the proxy refuse or fail), one per line.
func errorLines(log string, n int) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if errorLine.MatchString(l) {
			out = append(out, l)
			if len(out) == n {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// apiRelay listens on hostAPIAddr inside ns and relays each connection
// to target (cluster.Relay), which the test process dials from the host's
// namespace (a fresh namespace cannot reach the host's loopback).
func apiRelay(t *testing.T, ns *nstest.NetNS, target string) {
	t.Helper()
	var l net.Listener
	if err := ns.Do(func() error {
		var err error
		l, err = net.Listen("tcp", hostAPIAddr)
		return err
	}); err != nil {
		t.Fatalf("relay to the apiserver: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	go cluster.Relay(l, target)
}

// DumpEnv names a directory into which each capture's normalized state is
// written (<test>-<proxy>.txt, sections in name order), for reviewing
// differences.
const DumpEnv = "PROXYSINKS_DIFF_DUMP"

// dump writes st into $PROXYSINKS_DIFF_DUMP, when set.
func dump(t *testing.T, proxy string, st cluster.State) {
	dir := os.Getenv(DumpEnv)
	if dir == "" {
		return
	}
	var b strings.Builder
	for _, section := range slices.Sorted(maps.Keys(st)) {
		fmt.Fprintf(&b, "=== %s\n", section)
		for _, l := range st[section] {
			b.WriteString(l + "\n")
		}
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "-" + proxy + ".txt"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		t.Errorf("dump the capture: %v", err)
	}
}

// writesMetric is the sinks' count of kernel objects written.
var writesMetric = regexp.MustCompile(`(?m)^proxysinks_kernel_operations_total(?:\{[^}]*\})? (\S+)$`)

// kernelWrites returns the kernel objects the proxy running in ns has
// written (proxysinks_kernel_operations_total summed over its series,
// from the metrics address 127.0.0.1:10249 there), or -1 when it does not
// say (kube-proxy has no such metric).
func kernelWrites(ns *nstest.NetNS) float64 {
	// The transport dials on goroutines of its own: each dial enters ns.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: dial}}
	var body []byte
	resp, err := c.Get("http://127.0.0.1:10249/metrics")
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	m := writesMetric.FindAllSubmatch(body, -1)
	if err != nil || len(m) == 0 {
		return -1
	}
	sum := 0.0
	for _, v := range m {
		f, err := strconv.ParseFloat(string(v[1]), 64)
		if err != nil {
			return -1
		}
		sum += f
	}
	return sum
}
