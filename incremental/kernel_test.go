package incremental

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/link"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// kernelNode is a fresh network namespace of the running kernel, with the
// sink's connections into it, kube-ipvs0, the ipsets and the iptables
// rules, as dataplane.Node.Setup leaves a node.
type kernelNode struct {
	ns    *nstest.NetNS
	conn  *ipvs.Conn
	sets  *ipset.Conn
	links *link.Conn
	fail  failing
}

var probeIPVS struct {
	once sync.Once
	err  error
}

// requireKernel stops the test unless IPVS, dummy links and the tools are
// there (the VM); elsewhere it skips.
func requireKernel(t testing.TB) {
	probeIPVS.once.Do(func() {
		ns := nstest.New(t)
		c, err := ipvs.Dial(&ipvs.Options{NetNS: ns.FD()})
		if errors.Is(err, ipvs.ErrNotSupported) {
			_ = exec.Command("modprobe", "ip_vs").Run()
			c, err = ipvs.Dial(&ipvs.Options{NetNS: ns.FD()})
		}
		if err == nil {
			c.Close()
			for _, m := range []string{"ip_vs_rr", "ip_vs_wrr", "ip_vs_lc", "ip_vs_sctp"} {
				_ = exec.Command("modprobe", m).Run()
			}
		}
		probeIPVS.err = err
	})
	if probeIPVS.err != nil {
		nstest.Missing(t, "IPVS: %v", probeIPVS.err)
	}
	for _, tool := range []string{"ipvsadm", "ipset", "ip", "iptables-save"} {
		nstest.LookPath(t, tool)
	}
}

func newKernelNode(t *testing.T) testNode { return newKernelNodeTB(t) }

func newKernelNodeTB(t testing.TB) *kernelNode {
	ns := nstest.New(t)
	n := &kernelNode{ns: ns}
	var err error
	if n.sets, err = ipset.Dial(&ipset.Config{NetNS: ns.FD()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.sets.Close() })
	if err := dataplane.CreateSets(n.sets, []xtables.Family{xtables.IPv4, xtables.IPv6}, 1024, 65536); err != nil {
		t.Fatal(err)
	}
	if n.links, err = link.Dial(&link.Config{NetNS: ns.FD()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.links.Close() })
	if _, err := n.links.EnsureDummy(link.DefaultDummy); err != nil {
		nstest.Missing(t, "dummy links: %v", err)
	}
	// The iptables rules, in the namespace, as Setup installs them.
	run := func(name string, args []string, stdin []byte) ([]byte, error) {
		var out []byte
		err := ns.Do(func() error {
			var err error
			out, err = xtables.Exec(name, args, stdin)
			return err
		})
		return out, err
	}
	for _, f := range []xtables.Family{xtables.IPv4, xtables.IPv6} {
		b, err := xtables.Detect(f, run)
		if err != nil {
			t.Fatal(err)
		}
		in := &rules.Installer{Backend: b, Run: run}
		if _, err := in.Ensure(rules.Build(rules.Config{MasqueradeBit: 14, RandomFully: true}, f)); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (n *kernelNode) parts(t testing.TB) (*dataplane.Applier, *dataplane.Node) {
	conn, err := ipvs.Dial(&ipvs.Options{NetNS: n.ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	n.conn = conn
	k := &dataplane.Kernel{IPVSConn: conn, IPSet: n.sets, Link: n.links, Dummy: link.DefaultDummy}
	nd := &dataplane.Node{Kernel: k, Cfg: dataplane.NodeConfig{Families: []xtables.Family{xtables.IPv4, xtables.IPv6}, NodeAddresses: nodeIPs}}
	n.fail.w = k
	return dataplane.NewApplier(&n.fail), nd
}

func (n *kernelNode) failer() *failing { return &n.fail }

func (n *kernelNode) drift(t *testing.T) { driftOn(t, n.links, n.conn) }

// tools returns `ipvsadm -Sn`, `ipset save`, the addresses of kube-ipvs0
// and `iptables-save`/`ip6tables-save`, each sorted by line (their order
// depends on insertion, not on state), without counters or hash seeds.
func (n *kernelNode) tools(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, cmd := range [][]string{
		{"ipvsadm", "-Sn"},
		{"ipset", "save"},
		{"ip", "-o", "addr", "show", "dev", "kube-ipvs0"},
		{"iptables-save"},
		{"ip6tables-save"},
	} {
		out := n.ns.MustRun(t, cmd[0], cmd[1:]...)
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			switch {
			case l == "", strings.HasPrefix(l, "#"):
				continue
			case cmd[0] == "ip":
				// "3: kube-ipvs0    inet 10.96.0.1/32 scope global ...":
				// the address is what matters.
				if f := strings.Fields(l); len(f) >= 4 {
					l = f[2] + " " + f[3]
				}
			case cmd[0] == "ipset" && strings.Contains(l, " initval "):
				// The hash seed is random per set.
				l = l[:strings.Index(l, " initval ")]
			case strings.HasPrefix(l, ":"):
				// Chain with counters: the name and policy only.
				if f := strings.Fields(l); len(f) >= 2 {
					l = f[0] + " " + f[1]
				}
			}
			lines = append(lines, l)
		}
		slices.Sort(lines)
		b.WriteString("$ " + strings.Join(cmd, " ") + "\n" + strings.Join(lines, "\n") + "\n")
	}
	return b.String()
}

// TestEquivalenceKernel is TestEquivalence on the running kernel (the VM:
// IPVS and dummy links), each sink in its own fresh network namespace,
// with the kernel's own tools compared too.
func TestEquivalenceKernel(t *testing.T) {
	requireKernel(t)
	// About a minute per seed in the emulated VM.
	seeds, steps := 2, 30
	if testing.Short() {
		seeds = 1
	}
	runEquivalence(t, seeds, steps, newKernelNode)
}
