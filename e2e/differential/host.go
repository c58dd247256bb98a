package differential

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// captureHost runs a proxy in a fresh network namespace whose node
// address is cluster.BroadNodeIP and whose loopback reaches the apiserver
// at hostAPIAddr, waits until its rules have stopped changing for 3 s,
// and returns them (sections cluster.SectionIPTables and
// cluster.SectionIP6, comments kept, and by chain in their order).
func captureHost(e *Env, bin string, args ...string) Capture {
	t := e.T
	t.Helper()
	for _, tool := range []string{"ip", "iptables-save", "ip6tables-save"} {
		nstest.LookPath(t, tool)
	}
	name := filepath.Base(bin)
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
	p := startIn(t, ns, bin, args...)
	defer p.stop()

	var raw map[string]string
	snapshot := func() cluster.State {
		st := cluster.State{}
		raw = map[string]string{}
		for section, tool := range map[string]string{cluster.SectionIPTables: "iptables-save", cluster.SectionIP6: "ip6tables-save"} {
			raw[section] = ns.MustRun(t, tool)
			st[section] = cluster.Normalize(section, raw[section], true)
		}
		return st
	}
	start := time.Now()
	var prev cluster.State
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
		cur := snapshot()
		// A proxy that programs no service at all (its syncs all fail) is
		// captured once its rules have been stable for a while.
		if equalState(cur, prev) && (hasServiceChains(cur) || time.Since(start) > 30*time.Second) {
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
	chains := map[string]map[string][]string{}
	for section, out := range raw {
		chains[section] = cluster.Chains(section, out, true)
	}
	return Capture{State: prev, Chains: chains}
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
