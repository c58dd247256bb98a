package benchmatrix

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// apiListen is where a proxy in its namespace reaches the apiserver: a
// relay on the namespace's loopback (a fresh namespace cannot reach the
// host's loopback, nor the VM's NIC).
const apiListen = "127.0.0.1:6443"

// metricsAddr is where kube-proxy and the sinks serve /metrics by default.
const metricsAddr = "127.0.0.1:10249"

// restoreLogEnv names the file the restore wrappers append input sizes to.
const restoreLogEnv = "PROXYSINKS_BENCH_RESTORE_LOG"

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's CPU times.
const clockTick = 100

// node is a fresh network namespace with the node address and the relay
// to the apiserver: where a proxy runs.
type node struct {
	ns    *nstest.NetNS
	relay net.Listener
}

// newNode creates the namespace, gives it the node address on a veth link
// (the host has no dummy links) and starts the relay to target.
func newNode(target string) (*node, error) {
	ns, err := nstest.Create()
	if err != nil {
		return nil, err
	}
	n := &node{ns: ns}
	for _, args := range [][]string{
		{"link", "add", "node0", "type", "veth", "peer", "name", "node0p"},
		{"addr", "add", NodeIP + "/24", "dev", "node0"},
		{"link", "set", "node0", "up"},
		{"link", "set", "node0p", "up"},
	} {
		if _, err := ns.Run("ip", args...); err != nil {
			ns.Close()
			return nil, fmt.Errorf("benchmatrix: node namespace: %w", err)
		}
	}
	if err := ns.Do(func() error {
		var err error
		n.relay, err = net.Listen("tcp", apiListen)
		return err
	}); err != nil {
		ns.Close()
		return nil, fmt.Errorf("benchmatrix: relay to the apiserver: %w", err)
	}
	go cluster.Relay(n.relay, target)
	return n, nil
}

func (n *node) close() {
	n.relay.Close()
	n.ns.Close()
}

// proxy is one proxy process in a node namespace.
type proxy struct {
	name       string
	cmd        *exec.Cmd
	node       *node
	start      time.Time
	log        *lockedBuffer
	exited     chan struct{}
	waitErr    error
	restoreLog string
	straceOut  string // strace -c output when run under strace
	straceAll  bool   // strace counted every call, not only the socket messages
	// familyCopies: the proxy is a sink, whose per-family metrics are
	// copies of one sync (parseMetrics).
	familyCopies bool
}

// lockedBuffer is a bytes.Buffer safe for the process's two output streams.
// It also adds up the netlink bytes of the nftables sink's sync log lines
// (syncLogBytes), over every line, the ones the buffer dropped included.
type lockedBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	line    []byte // the unfinished last line
	written int64  // sum of syncLogBytes over the complete lines
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 4<<20 {
		l.b.Reset() // keep the tail of a chatty proxy
	}
	rest := p
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(l.line) < 64<<10 {
				l.line = append(l.line, rest...)
			}
			break
		}
		l.line = append(l.line, rest[:i]...)
		l.written += syncLogBytes(string(l.line))
		l.line, rest = l.line[:0], rest[i+1:]
	}
	return l.b.Write(p)
}

// syncBytes returns the netlink bytes the proxy's sync log lines counted.
func (l *lockedBuffer) syncBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.written
}

// syncLineRE matches the nftables sink's log line of a sync that wrote
// (msg=sync, or msg="sync failed"), in the text log format, and its bytes
// attribute (nftables.SyncStats.Bytes: the netlink bytes sent).
var syncLineRE = regexp.MustCompile(`(?:^| )msg=(?:sync|"sync failed")(?: .*)? bytes=(\d+)(?: |$)`)

// syncLogBytes returns the bytes of a sync log line (0 for other lines).
func syncLogBytes(line string) int64 {
	m := syncLineRE.FindStringSubmatch(line)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseInt(m[1], 10, 64)
	return v
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProxy starts bin in n's namespace with wrapDir first on its PATH
// (the restore wrappers) and, when strace is not empty, under strace -f -c.
// straceMessages is strace's filter for the socket message calls; with
// --seccomp-bpf the others run untraced, at full speed.
const straceMessages = "trace=sendmsg,recvmsg,sendto,recvfrom,sendmmsg,recvmmsg"

// startProxy starts bin in the node's namespace; under strace (its path)
// counting the socket message calls, or every call with straceAll.
func startProxy(n *node, work, wrapDir, strace string, straceAll bool, bin string, args ...string) (*proxy, error) {
	f, err := os.CreateTemp(work, "restore-*.log")
	if err != nil {
		return nil, err
	}
	f.Close()
	p := &proxy{name: filepath.Base(bin), node: n, log: &lockedBuffer{}, exited: make(chan struct{}), restoreLog: f.Name()}
	path := bin
	if strace != "" {
		p.straceOut = f.Name() + ".strace"
		filter := []string{"--seccomp-bpf", "-e", straceMessages}
		if straceAll {
			filter = nil
		}
		p.straceAll = straceAll
		args = append(append(append([]string{"-f", "-c"}, filter...), "-U", "calls,name", "-o", p.straceOut, bin), args...)
		path = strace
	}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = append(os.Environ(), "PATH="+wrapDir+":"+os.Getenv("PATH"), restoreLogEnv+"="+p.restoreLog)
	if strace != "" {
		p.cmd.Env = append(p.cmd.Env, "LD_LIBRARY_PATH="+filepath.Dir(strace))
	}
	// Its own process group: stop ends what the proxy leaves running.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.start = time.Now()
	// The child inherits the namespace of the thread that starts it.
	if err := n.ns.Do(p.cmd.Start); err != nil {
		return nil, fmt.Errorf("benchmatrix: start %s: %w", p.name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// pid returns the proxy's process id (strace's child under strace).
func (p *proxy) pid() (int, error) {
	if p.straceOut == "" {
		return p.cmd.Process.Pid, nil
	}
	return childOf(p.cmd.Process.Pid)
}

// childOf returns a child process of pid, from /proc/<pid>/task/*/children
// or, when none is listed there (kernels without CONFIG_PROC_CHILDREN), by
// scanning /proc for its parent id.
func childOf(pid int) (int, error) {
	// Each thread lists the children it forked.
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		if b, err := os.ReadFile(t); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				return strconv.Atoi(f[0])
			}
		}
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		if err != nil {
			continue
		}
		if f := statFields(string(b)); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			return c, nil
		}
	}
	return 0, errors.New("benchmatrix: strace has no child yet")
}

// done reports whether the process has exited, with its log tail.
func (p *proxy) done() error {
	select {
	case <-p.exited:
		return fmt.Errorf("benchmatrix: %s exited (%v); log tail:\n%s", p.name, p.waitErr, tail(p.log.String(), 40))
	default:
		return nil
	}
}

// usage is what /proc says about a running process.
type usage struct {
	CPU   time.Duration // user+system of the process and its waited children
	HWMKB int64         // peak resident set (VmHWM) of the process itself
}

// usage reads the proxy's CPU and peak RSS.
func (p *proxy) usage() (usage, error) {
	pid, err := p.pid()
	if err != nil {
		return usage{}, err
	}
	return readUsage(pid)
}

func readUsage(pid int) (usage, error) {
	var u usage
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("benchmatrix: read stat of %d: %w", pid, err)
	}
	if u.CPU, err = parseStatCPU(string(b)); err != nil {
		return u, err
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("benchmatrix: read status of %d: %w", pid, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			u.HWMKB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return u, nil
}

// statFields returns the fields of a /proc/<pid>/stat line after the
// command's name (which may hold spaces and parentheses): f[0] is the
// state, f[1] the parent's id. It returns nil for a line without one.
func statFields(stat string) []string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(stat[i+1:])
}

// parseStatCPU returns utime+stime+cutime+cstime of a /proc/<pid>/stat line.
func parseStatCPU(stat string) (time.Duration, error) {
	f := statFields(stat)
	// f[0] is field 3 (state); utime..cstime are fields 14..17.
	if len(f) < 15 {
		return 0, fmt.Errorf("benchmatrix: short stat line %q", stat)
	}
	var ticks int64
	for _, s := range f[11:15] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("benchmatrix: stat field %q: %w", s, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTick, nil
}

// restoreBytes returns the bytes the proxy has piped to iptables-restore
// and ip6tables-restore so far, and to nft -f (the wrappers' log), plus the
// netlink bytes its sync log lines counted (the nftables sink).
func (p *proxy) restoreBytes() (restore, nft int64) {
	nft = p.log.syncBytes()
	b, err := os.ReadFile(p.restoreLog)
	if err != nil {
		return 0, nft
	}
	r, n := parseRestoreLog(string(b))
	return r, nft + n
}

// parseRestoreLog adds up the wrappers' log lines ("<bytes> <tool>"): the
// restore tools' and nft's apart.
func parseRestoreLog(log string) (restore, nft int64) {
	for _, l := range strings.Split(log, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		v, _ := strconv.ParseInt(f[0], 10, 64)
		if len(f) > 1 && f[1] == "nft" {
			nft += v
		} else {
			restore += v
		}
	}
	return restore, nft
}

// metrics scrapes the proxy's /metrics and returns the sum over label sets
// of each sample name.
func (p *proxy) metrics(ctx context.Context) (map[string]float64, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := p.node.ns.Do(func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("benchmatrix: %s /metrics: %s", p.name, resp.Status)
	}
	return parseMetrics(resp.Body, p.familyCopies)
}

// parseMetrics sums the Prometheus text format's samples by name. With
// familyCopies (a sink: its one sync covers every IP family and is
// reported under each family's ip_family label) the samples that differ
// only in ip_family are copies of one value, counted once (the largest);
// without it (kube-proxy: one proxier per family, each its own syncs) they
// are summed like any other label.
// isInstant reports whether a metric is a point in time (seconds since
// the epoch), whose label sets parseMetrics does not add up.
func isInstant(name string) bool {
	return strings.HasSuffix(name, "_timestamp_seconds") || name == "process_start_time_seconds"
}

func parseMetrics(r io.Reader, familyCopies bool) (map[string]float64, error) {
	series := map[string]float64{} // name and labels, ip_family dropped with familyCopies
	names := map[string]string{}   // series key -> name
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		l := s.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(l, " ")
		key := name
		if i := strings.IndexByte(l, '{'); i >= 0 && i < len(name) {
			name = l[:i]
			j := strings.LastIndexByte(l, '}')
			rest = strings.TrimSpace(l[j+1:])
			key = l[:j+1]
			if familyCopies {
				key = name + "{" + ipFamilyLabel.ReplaceAllString(l[i+1:j], "") + "}"
			}
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		if old, seen := series[key]; !seen || v > old {
			series[key] = v
		}
		names[key] = name
	}
	out := map[string]float64{}
	for key, v := range series {
		if n := names[key]; isInstant(n) {
			out[n] = max(out[n], v) // an instant: the latest, not a sum
		} else {
			out[n] += v
		}
	}
	return out, s.Err()
}

// ipFamilyLabel matches the ip_family label in a sample's label list, with
// the comma that joins it to the others.
var ipFamilyLabel = regexp.MustCompile(`,?\bip_family="[^"]*"`)

// stop ends the proxy (SIGTERM, SIGKILL after 20 s, 2 minutes under
// strace, which slows the exit too) and whatever it left running in its
// process group, and, under strace, returns the syscalls strace counted.
func (p *proxy) stop() (syscalls straceCounts, err error) {
	grace := 20 * time.Second
	if p.straceOut != "" {
		grace = 2 * time.Minute
	}
	if pid, err := p.pid(); err == nil {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	select {
	case <-p.exited:
	case <-time.After(grace):
		// The proxy first: strace then writes its summary and exits.
		if pid, err := p.pid(); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
		}
	}
	// A proxy killed while it waited for a child leaves the child running
	// (kube-proxy's iptables-restore at 10,000 x 10 ran on for minutes,
	// using most of a core during the next proxy's cells).
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if p.straceOut == "" {
		return straceCounts{}, nil
	}
	b, err := os.ReadFile(p.straceOut)
	if err != nil {
		return straceCounts{}, fmt.Errorf("benchmatrix: strace output: %w", err)
	}
	c, err := parseStrace(string(b))
	if !p.straceAll {
		c.total = 0 // only the socket message calls were traced
	}
	return c, err
}

// straceCounts is what strace -c counted.
type straceCounts struct {
	// total is every system call (0 when only the socket message calls
	// were traced); messages the socket message calls
	// (sendmsg, recvmsg, sendto, recvfrom, sendmmsg, recvmmsg): netlink
	// for every proxy here (Go's TCP to the apiserver uses read and
	// write).
	total, messages int64
}

var messageCalls = map[string]bool{"sendmsg": true, "recvmsg": true, "sendto": true, "recvfrom": true, "sendmmsg": true, "recvmmsg": true}

// parseStrace reads strace -c -U calls,name's table.
func parseStrace(out string) (straceCounts, error) {
	var c straceCounts
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		if f[1] == "total" {
			c.total = n
			return c, nil
		}
		if messageCalls[f[1]] {
			c.messages += n
		}
	}
	return straceCounts{}, fmt.Errorf("benchmatrix: no total in strace output %q", tail(out, 5))
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// writeWrappers writes into dir a wrapper per restore tool found on PATH
// (iptables-restore, ip6tables-restore, their -nft- and -legacy- variants,
// and nft for its -f transactions)
// that appends its input's size
// to $PROXYSINKS_BENCH_RESTORE_LOG and runs the real tool on it.
func writeWrappers(dir string) error {
	for _, tool := range []string{"iptables-restore", "ip6tables-restore", "iptables-nft-restore", "ip6tables-nft-restore",
		"iptables-legacy-restore", "ip6tables-legacy-restore"} {
		real, err := exec.LookPath(tool)
		if err != nil {
			continue
		}
		script := fmt.Sprintf(`#!/bin/sh
f=$(mktemp) || exit 1
cat > "$f"
echo "$(wc -c < "$f") %[1]s" >> "$%[2]s"
%[3]s "$@" < "$f"
rc=$?
rm -f "$f"
exit $rc
`, tool, restoreLogEnv, real)
		if err := os.WriteFile(filepath.Join(dir, tool), []byte(script), 0o755); err != nil {
			return err
		}
	}
	real, err := exec.LookPath("nft")
	if err != nil {
		return nil
	}
	// nft: only a transaction read from stdin (knftables' "nft -f -"),
	// not its --check of the same text, counted.
	script := fmt.Sprintf(`#!/bin/sh
count=
for a in "$@"; do
	case "$a" in
	-c|--check) exec %[1]s "$@" ;;
	-f) count=1 ;;
	esac
done
[ -n "$count" ] || exec %[1]s "$@"
f=$(mktemp) || exit 1
cat > "$f"
echo "$(wc -c < "$f") nft" >> "$%[2]s"
%[1]s "$@" < "$f"
rc=$?
rm -f "$f"
exit $rc
`, real, restoreLogEnv)
	return os.WriteFile(filepath.Join(dir, "nft"), []byte(script), 0o755)
}
