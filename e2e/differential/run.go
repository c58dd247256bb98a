package differential

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/e2e/cluster"
	"github.com/proxysinks/proxysinks/e2e/vm"
)

// Env is what a capture needs: the test, the control plane, and the work
// directory holding the kubeconfigs (which a VM sees as /job/work).
type Env struct {
	T       *testing.T
	Cluster *cluster.Cluster
	Work    string
}

// Capture is a proxy's kernel state: normalized and sorted by section,
// and (where the capture keeps them) the rules by chain in their order,
// by section and "<table> <chain>".
type Capture struct {
	State  cluster.State
	Chains map[string]map[string][]string
}

// apiServer is the apiserver's URL as the proxies see it: a relay in the
// host namespace's loopback (hostAPIAddr), or the VM NIC's forward.
func (w Where) apiServer() string {
	if w == VM {
		return "https://" + cluster.GuestAPIAddr
	}
	return "https://" + hostAPIAddr
}

// path is where a proxy reads a file of the work directory.
func (w Where) path(work, name string) string {
	if w == VM {
		return "/job/work/" + name
	}
	return filepath.Join(work, name)
}

// Run is the differential of mode m on the broad cluster: the broad
// cluster and the mode's shapes on a fresh control plane; kube-proxy
// --proxy-mode=<m.Name>, then each sink of m (a subtest each), captured by
// m.Capture; every difference not in m.Differences, and every entry there
// not seen, fails the sink's subtest, and so does, with m.Order, the same
// rules in another order within a chain.
func Run(t *testing.T, m Mode) {
	run(t, m, m.Differences, false, cluster.Options{}, func(t *testing.T, ctx context.Context, c *cluster.Cluster) {
		cluster.Broad(t, ctx, c)
		cluster.CreateShapes(t, ctx, c, m.Shapes())
	})
}

// RunHostile is the differential of mode m on the hostile cluster
// (cluster.LoadHostile: objects a strict apiserver accepts, objects only
// an apiserver with strict IP validation off accepts, objects written
// into etcd), against m.HostileDifferences. It needs no
// EndpointSlice controller: the hostile slices are written by hand. It
// compares the sinks' ERROR log lines too (section cluster.SectionErrors,
// empty for kube-proxy): a sink whose syncs fail on the hostile cluster
// fails the test unless the failure is a reviewed difference.
func RunHostile(t *testing.T, m Mode) {
	run(t, m, m.HostileDifferences, true, cluster.Options{NoControllerManager: true}, func(t *testing.T, ctx context.Context, c *cluster.Cluster) {
		cluster.LoadHostile(t, ctx, c, m.Name)
	})
}

// run is a differential of mode m: a control plane started with opt and
// filled by load, against the differences file differences; errors
// compares the proxies' ERROR log lines.
func run(t *testing.T, m Mode, differences string, errors bool, opt cluster.Options, load func(*testing.T, context.Context, *cluster.Cluster)) {
	if m.Where == VM {
		vm.Require(t)
	}
	bin := cluster.Require(t)
	root, err := vm.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	intended, err := cluster.ReadIntended(filepath.Join(root, "e2e", "cluster", "testdata", differences))
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.Start(t, opt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	load(t, ctx, c)

	e := &Env{T: t, Cluster: c, Work: t.TempDir()}
	server := m.Where.apiServer()
	if err := os.WriteFile(filepath.Join(e.Work, "kube-proxy.kubeconfig"), c.Kubeconfig(server, c.AdminToken), 0o600); err != nil {
		t.Fatal(err)
	}
	sinkKC, err := c.SinkKubeconfig(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sinkKC, filepath.Join(e.Work, "sink.kubeconfig")); err != nil {
		t.Fatal(err)
	}

	ref := m.Capture(e, filepath.Join(bin, "kube-proxy"),
		"--proxy-mode="+m.Name, "--kubeconfig="+m.Where.path(e.Work, "kube-proxy.kubeconfig"),
		"--hostname-override="+cluster.BroadNode, "--nodeport-addresses="+cluster.BroadNodeCIDR,
		"--conntrack-max-per-core=0", "--v=2")
	for _, sink := range m.Sinks {
		t.Run(sink, func(t *testing.T) {
			se := &Env{T: t, Cluster: c, Work: e.Work}
			got := m.Capture(se, vm.BuildSink(t, sink),
				"--kubeconfig="+m.Where.path(e.Work, "sink.kubeconfig"), "--node-name="+cluster.BroadNode,
				"--nodeport-addresses="+cluster.BroadNodeCIDR)
			if !errors {
				delete(ref.State, cluster.SectionErrors)
				delete(got.State, cluster.SectionErrors)
			}
			compare(t, m, sink, ref, got, intended)
		})
	}
}

// compare fails t for every unexplained or stale difference and every
// order difference between kube-proxy's capture and the sink's.
func compare(t *testing.T, m Mode, sink string, ref, got Capture, intended []cluster.Intended) {
	t.Helper()
	diffs := cluster.Diff(ref.State, got.State)
	unexplained, stale := cluster.Unexplained(sink, diffs, intended)
	for _, d := range unexplained {
		t.Errorf("unexplained difference (- kube-proxy only, + %s only): %s", sink, d)
	}
	for _, in := range stale {
		t.Errorf("intended difference no longer seen (remove it from the list): %s %s", in.Sink, in.Diff)
	}
	if m.Order != nil {
		for _, section := range []string{cluster.SectionIPTables, cluster.SectionIP6} {
			for _, key := range cluster.OrderDifferences(ref.Chains[section], got.Chains[section], m.Order.Independent, m.Order.LastFixed) {
				t.Errorf("%s %s: same rules in another order:\nkube-proxy:\n%s\n%s:\n%s", section, key,
					strings.Join(ref.Chains[section][key], "\n"), sink, strings.Join(got.Chains[section][key], "\n"))
			}
		}
	}
	n := 0
	for _, l := range ref.State {
		n += len(l)
	}
	t.Logf("%d kube-proxy lines compared, %d differences, %d of them intended", n, len(diffs), len(diffs)-len(unexplained))
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
