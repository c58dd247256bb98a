package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client/logbuf"
	"github.com/proxysinks/proxysinks/e2e/netexec"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// roleEnv makes a test binary using this harness act as a pod server, so
// the VM needs no other binary than the test's and the sink's.
const roleEnv = "PROXYSINKS_E2E_ROLE"

// Main is the TestMain of every test package using this harness: in a
// pod's process (started by the harness from the test binary) it serves
// and exits; otherwise it runs the tests.
func Main(m *testing.M) {
	if os.Getenv(roleEnv) == "pod" {
		servePod()
	}
	os.Exit(m.Run())
}

// servePod runs a pod server on POD_PORT and POD_EXTRA_PORTS until killed.
func servePod() {
	port, _ := strconv.Atoi(os.Getenv("POD_PORT"))
	ports := []int{port}
	for _, p := range strings.Fields(os.Getenv("POD_EXTRA_PORTS")) {
		n, _ := strconv.Atoi(p)
		ports = append(ports, n)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	for _, p := range ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := netexec.Serve(ctx, os.Getenv("POD_NAME"), p); err != nil {
				fmt.Fprintln(os.Stderr, "pod:", err)
				os.Exit(1)
			}
		}()
	}
	wg.Wait()
	os.Exit(0)
}

// Options is the sink under test and where its cluster state comes from.
type Options struct {
	// Sink names the sink (a key of Sinks); "fullstate" and
	// "incremental" name the IPVS sinks too.
	Sink string
	// Bin is the sink's binary; empty: Sink looked up on $PATH (the VM
	// runners put it in the guest's /job/bin).
	Bin string
	// SinkArgs are added to every sink a case starts (before the case's
	// own), e.g. "--ipvs-vip-binding=routes".
	SinkArgs []string
	// Kubeconfig, when set, is the admin kubeconfig of a control plane
	// (e2e/cluster): the cases write through its API instead of manifest
	// files, and the sink reads SinkKubeconfig (its server
	// https://<nodeAPIAddr>, a relay in the node's namespace).
	Kubeconfig, SinkKubeconfig string
}

// options are the Options of the running test binary (Use).
var options = Options{Sink: "ipvs-fullstate"}

// Use sets the sink under test and the source of every cluster built
// afterwards.
func Use(o Options) {
	switch o.Sink {
	case "", "fullstate":
		o.Sink = "ipvs-fullstate"
	case "incremental":
		o.Sink = "ipvs-incremental"
	}
	options = o
}

// Addresses of the test node.
var (
	nodeAddr = netip.MustParseAddr("192.168.1.10")
	extAddr  = netip.MustParseAddr("192.168.1.100")
)

// cluster is one node with its pods and an external client, each in its own
// network namespace, and the sink running in the node's namespace.
type cluster struct {
	t        *testing.T
	node     *nstest.NetNS
	ext      *nstest.NetNS // an external client on 192.168.1.0/24
	ext2     *nstest.NetNS // another external client, 192.168.2.0/24
	dir      string        // manifests
	pods     map[string]*pod
	sink     *exec.Cmd
	sinkLog  *logbuf.Buffer
	nextPod  int
	sinkArgs []string
	// followAddrs starts the sink without --node-address: it follows the
	// node's own addresses.
	followAddrs bool
	api         *apiWriter // the real-API mode (-kubeconfig), or nil
}

type pod struct {
	name string
	ns   *nstest.NetNS
	ip   netip.Addr
	ip6  netip.Addr // with addIPv6
	cmd  *exec.Cmd
}

// Pod network: every pod is a veth port of the node's bridge cbr0, as with
// the bridge CNI plugin; cbr0 holds the pods' gateway addresses.
const (
	podBridge = "cbr0"
	podGW4    = "10.244.0.1"
	podGW6    = "fd00:244::1"
)

// newCluster builds the node as a node with a bridge CNI looks: the node
// address on a bridge (br0) that the external client's link is a port of; a
// second external network (192.168.2.0/24) routed over its own link; and
// the pods' bridge cbr0 with br_netfilter calling iptables for bridged
// frames, which is what lets IPVS see a backend's reply to a client pod on
// the same bridge (kube-proxy's IPVS mode needs it too). The sink is not
// started yet.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	kernel, ok := Sinks[options.Sink]
	if !ok {
		t.Fatalf("unknown sink %q: not in node.Sinks", options.Sink)
	}
	if kernel.NeedsVM() && !nstest.InVM() {
		nstest.Missing(t, "the test VM (IPVS and dummy links): make test-vm runs this")
	}
	nstest.LookPath(t, "ip")
	c := &cluster{t: t, node: nstest.New(t), ext: nstest.New(t), ext2: nstest.New(t), dir: t.TempDir(), pods: map[string]*pod{}}
	// br_netfilter is loaded once for the VM; its sysctls are per namespace.
	if _, err := os.Stat("/proc/sys/net/bridge"); err != nil {
		c.node.MustRun(t, "modprobe", "br_netfilter")
	}
	c.node.MustRun(t, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1", "net.bridge.bridge-nf-call-ip6tables=1")
	c.bridge("br0", nodeAddr.String()+"/24")
	c.port("br0", "ext0", c.ext, "192.168.1.100/24", nodeAddr.String())
	c.bridge(podBridge, podGW4+"/24", podGW6+"/64")
	c.link("ext1", c.ext2, "192.168.2.10/24", "192.168.2.100/24", "192.168.2.10")
	c.node.MustRun(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	// Routes for external IPs and load-balancer IPs go through the node.
	c.ext.MustRun(t, "ip", "route", "add", "203.0.113.0/24", "via", nodeAddr.String())
	c.ext2.MustRun(t, "ip", "route", "add", "203.0.113.0/24", "via", "192.168.2.10")
	t.Cleanup(c.stopAll)
	if apiMode() {
		c.startAPI()
	}
	return c
}

// defaultRoute gives the node a default route via the external client,
// as a real node has one: a service address that no rule or VIP catches
// is then routed away rather than unreachable.
func (c *cluster) defaultRoute() {
	c.node.MustRun(c.t, "ip", "route", "add", "default", "via", extAddr.String())
}

// bridge creates a bridge in the node's namespace holding addrs.
func (c *cluster) bridge(name string, addrs ...string) {
	t := c.t
	c.node.MustRun(t, "ip", "link", "add", name, "type", "bridge")
	for _, a := range addrs {
		args := []string{"addr", "add", a, "dev", name}
		if strings.Contains(a, ":") {
			args = append(args, "nodad")
		}
		c.node.MustRun(t, "ip", args...)
	}
	c.node.MustRun(t, "ip", "link", "set", name, "up")
}

// port connects peer to the node's bridge br with a veth pair: the node's
// end (name) a port of br, the peer's end eth0 with address peerSide and
// its default route via gw.
func (c *cluster) port(br, name string, peer *nstest.NetNS, peerSide, gw string) {
	t := c.t
	c.node.MustRun(t, "ip", "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", peer.Path())
	c.node.MustRun(t, "ip", "link", "set", name, "master", br)
	c.node.MustRun(t, "ip", "link", "set", name, "up")
	c.peerUp(peer, peerSide, gw)
}

// link connects the node to another namespace with a routed veth pair:
// nodeSide and peerSide addresses, the peer's default route via gw.
func (c *cluster) link(name string, peer *nstest.NetNS, nodeSide, peerSide, gw string) {
	t := c.t
	c.node.MustRun(t, "ip", "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", peer.Path())
	c.node.MustRun(t, "ip", "addr", "add", nodeSide, "dev", name)
	c.node.MustRun(t, "ip", "link", "set", name, "up")
	c.peerUp(peer, peerSide, gw)
}

func (c *cluster) peerUp(peer *nstest.NetNS, addr, gw string) {
	t := c.t
	peer.MustRun(t, "ip", "addr", "add", addr, "dev", "eth0")
	peer.MustRun(t, "ip", "link", "set", "eth0", "up")
	peer.MustRun(t, "ip", "route", "add", "default", "via", gw)
}

// addPod creates a pod namespace on the node's pod bridge, 10.244.0.N/24,
// and starts a pod server answering with its name on the given ports.
func (c *cluster) addPod(name string, ports ...int) *pod {
	t := c.t
	c.nextPod++
	n := c.nextPod
	p := &pod{name: name, ns: nstest.New(t), ip: netip.MustParseAddr(fmt.Sprintf("10.244.0.%d", n+1))}
	veth := fmt.Sprintf("veth%d", n)
	c.port(podBridge, veth, p.ns, p.ip.String()+"/24", podGW4)
	// Hairpin mode, as the bridge plugin's hairpinMode and kubelet's
	// hairpin-veth set it: a pod reaching itself through a service gets the
	// replies back over the port they came in on.
	c.node.MustRun(t, "ip", "link", "set", veth, "type", "bridge_slave", "hairpin", "on")
	if len(ports) > 0 {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		extra := make([]string, 0, len(ports)-1)
		for _, x := range ports[1:] {
			extra = append(extra, strconv.Itoa(x))
		}
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), roleEnv+"=pod", "POD_NAME="+name, "POD_PORT="+strconv.Itoa(ports[0]), "POD_EXTRA_PORTS="+strings.Join(extra, " "))
		cmd.Stderr = os.Stderr
		if err := p.ns.Do(cmd.Start); err != nil {
			t.Fatalf("start pod %s: %v", name, err)
		}
		p.cmd = cmd
		// Wait until it answers locally.
		c.eventually(10*time.Second, func() error {
			_, err := c.get(p.ns, "tcp", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(ports[0])))
			return err
		})
	}
	c.pods[name] = p
	return p
}

// addIPv6 gives the pod its IPv6 address on the pod bridge,
// fd00:244::N/64 for 10.244.0.N, and returns it.
func (c *cluster) addIPv6(p *pod) netip.Addr {
	ip := netip.MustParseAddr(fmt.Sprintf("fd00:244::%d", p.ip.As4()[3]))
	p.ns.MustRun(c.t, "ip", "-6", "addr", "add", ip.String()+"/64", "dev", "eth0", "nodad")
	p.ns.MustRun(c.t, "ip", "-6", "route", "add", "default", "via", podGW6)
	p.ip6 = ip
	return ip
}

// syncPeriod is the sinks' --sync-period in these tests: the longest
// drift may last.
const syncPeriod = 3 * time.Second

// startSink runs the sink's binary in the node's namespace on the manifest
// directory, or with its kubeconfig in the real-API mode.
func (c *cluster) startSink(extra ...string) {
	t := c.t
	bin := options.Bin
	if bin == "" {
		var err error
		if bin, err = exec.LookPath(options.Sink); err != nil {
			t.Fatalf("the sink under test: %v", err)
		}
	}
	source := []string{"--from-file", c.dir}
	if c.api != nil {
		source = []string{"--kubeconfig", options.SinkKubeconfig}
	}
	nodeAddrs := []string{"--node-address", nodeAddr.String() + ",192.168.2.10"}
	if c.followAddrs {
		nodeAddrs = nil
	}
	args := append(append(source, "--node-name", "node-1"), nodeAddrs...)
	args = append(append(append(args,
		"--min-sync-period", "50ms", "--sync-period", syncPeriod.String(), "--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address="),
		options.SinkArgs...), extra...)
	c.sinkArgs = args
	cmd := exec.Command(bin, args...)
	if c.sinkLog == nil {
		c.sinkLog = &logbuf.Buffer{}
	}
	cmd.Stdout = c.sinkLog
	cmd.Stderr = c.sinkLog
	if err := c.node.Do(cmd.Start); err != nil {
		t.Fatalf("start sink: %v", err)
	}
	c.sink = cmd
}

// stopSink stops the sink with SIGTERM and waits for it.
func (c *cluster) stopSink() {
	if c.sink == nil {
		return
	}
	c.sink.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { c.sink.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.sink.Process.Kill()
		<-done
	}
	c.sink = nil
}

func (c *cluster) stopAll() {
	if c.t.Failed() && c.sink != nil {
		// The sink's goroutines into its log, for the failure.
		c.sink.Process.Signal(syscall.SIGQUIT)
		done := make(chan struct{})
		go func() { c.sink.Wait(); close(done) }()
		select {
		case <-done:
			c.sink = nil
		case <-time.After(5 * time.Second):
		}
	}
	c.stopSink()
	for _, p := range c.pods {
		if p.cmd != nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	}
	if c.t.Failed() && c.sinkLog != nil {
		c.t.Logf("sink log:\n%s", c.sinkLog.String())
		for _, cmd := range [][]string{{"ipvsadm", "-Ln"}, {"ip", "addr", "show", "dev", "kube-ipvs0"}, {"ip", "route", "show", "table", "local", "proto", "156"}, {"ipset", "save"}, {"iptables-save"}, {"nft", "list", "ruleset"}} {
			if out, err := c.node.Run(cmd[0], cmd[1:]...); err == nil {
				c.t.Logf("%s:\n%s", strings.Join(cmd, " "), out)
			}
		}
	}
}

// write replaces the manifests with docs (YAML documents); in the
// real-API mode it makes the control plane hold them (apiWriter.apply).
func (c *cluster) write(docs ...string) {
	c.t.Helper()
	if c.api != nil {
		c.applyAPI(docs...)
		return
	}
	data := strings.Join(docs, "\n---\n")
	tmp := filepath.Join(c.dir, ".cluster.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "cluster.yaml")); err != nil {
		c.t.Fatal(err)
	}
}

// target is a client namespace and where it sends requests.
type target struct {
	ns *nstest.NetNS
	to netip.AddrPort
}

// keepRequesting sends TCP requests from each target's namespace to its
// address, one round every 20 ms, until the returned stop is called; stop
// returns how many were answered and how many failed.
func (c *cluster) keepRequesting(targets ...target) (stop func() (ok, failed int64)) {
	var okN, failedN atomic.Int64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			default:
			}
			for _, r := range targets {
				if _, err := c.get(r.ns, "tcp", r.to); err != nil {
					failedN.Add(1)
				} else {
					okN.Add(1)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() (int64, int64) {
		close(quit)
		<-done
		return okN.Load(), failedN.Load()
	}
}

// get sends one request from inside ns.
func (c *cluster) get(ns *nstest.NetNS, proto string, to netip.AddrPort) (netexec.Reply, error) {
	var r netexec.Reply
	err := ns.Do(func() error {
		var err error
		r, err = netexec.Get(proto, to, 2*time.Second)
		return err
	})
	return r, err
}

// eventually retries f until it succeeds or the timeout passes.
func (c *cluster) eventually(timeout time.Duration, f func() error) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not within %s: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// expectFrom waits until requests from ns to `to` are answered by one of
// the pods named.
func (c *cluster) expectFrom(ns *nstest.NetNS, proto string, to netip.AddrPort, names ...string) netexec.Reply {
	c.t.Helper()
	var got netexec.Reply
	c.eventually(20*time.Second, func() error {
		r, err := c.get(ns, proto, to)
		if err != nil {
			return fmt.Errorf("%s %s: %w", proto, to, err)
		}
		for _, n := range names {
			if r.Name == n {
				got = r
				return nil
			}
		}
		return fmt.Errorf("%s %s answered by %s, want one of %v", proto, to, r.Name, names)
	})
	return got
}

// expectNoAnswer waits until requests from ns to `to` fail.
func (c *cluster) expectNoAnswer(ns *nstest.NetNS, proto string, to netip.AddrPort) {
	c.t.Helper()
	c.eventually(20*time.Second, func() error {
		if r, err := c.get(ns, proto, to); err == nil {
			return fmt.Errorf("%s %s still answered by %s", proto, to, r.Name)
		}
		return nil
	})
}

// metric reads one value from the sink's /metrics: the series name
// (with its labels, or the first series of that name when it has none).
func (c *cluster) metric(name string) (float64, error) {
	var out string
	err := c.node.Do(func() error {
		resp, err := httpGet("127.0.0.1:10249", "/metrics")
		out = resp
		return err
	})
	if err != nil {
		return 0, err
	}
	// A name without labels matches its first series: the per-family
	// ones (ip_family) hold the same values.
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 && (f[0] == name || !strings.Contains(name, "{") && strings.HasPrefix(f[0], name+"{")) {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	return 0, fmt.Errorf("metric %s not found", name)
}
