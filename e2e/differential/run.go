package differential

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
	// Synced is set when the state shows a service of the cluster
	// programmed (a proxy whose syncs all fail leaves it unset).
	Synced bool
	// Writes are the kernel objects a sink wrote
	// (proxysinks_kernel_operations_total) by the time it was captured,
	// or -1 when unknown (kube-proxy; a capture that does not read it).
	Writes float64
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
	e, intended := start(t, m, m.Differences, cluster.Options{}, func(t *testing.T, ctx context.Context, c *cluster.Cluster) {
		cluster.Broad(t, ctx, c)
		cluster.CreateShapes(t, ctx, c, m.Shapes())
	})
	bins := buildSinks(t, m)
	explain := func(sink string, diffs []cluster.Difference) ([]cluster.Difference, []cluster.Intended) {
		return cluster.Unexplained(sink, diffs, intended)
	}
	runSetting(e, m, Setting{NodePortAddresses: cluster.BroadNodeCIDR}, false, bins, explain)
	if m.host != nil {
		takeover(e, m, Setting{NodePortAddresses: cluster.BroadNodeCIDR}, bins, intended)
	}
}

// RunSettings is the differential of mode m for each of its Settings (a
// subtest each, then one per sink), on one control plane holding the
// broad cluster, the mode's shapes and the nodes' BroadPodCIDRs. A
// difference is explained by m.Differences (whose entries a setting need
// not show: Run checks them) or by an entry of m.SettingsDifferences whose
// pattern matches "<sink>/<setting>"; an entry there not seen fails.
func RunSettings(t *testing.T, m Mode) {
	e, broad := start(t, m, m.Differences, cluster.Options{}, func(t *testing.T, ctx context.Context, c *cluster.Cluster) {
		cluster.Broad(t, ctx, c)
		for node, cidrs := range BroadPodCIDRs {
			if err := c.SetPodCIDRs(ctx, node, cidrs...); err != nil {
				t.Fatal(err)
			}
		}
		cluster.CreateShapes(t, ctx, c, m.Shapes())
	})
	intended := readIntended(t, m.SettingsDifferences)
	bins := buildSinks(t, m)
	for _, s := range m.settings() {
		t.Run(s.Name, func(t *testing.T) {
			se := &Env{T: t, Cluster: e.Cluster, Work: e.Work}
			runSetting(se, m, s, false, bins, func(sink string, diffs []cluster.Difference) ([]cluster.Difference, []cluster.Intended) {
				rest, _ := cluster.Unexplained(sink, diffs, broad)
				return cluster.Unexplained(sink+"/"+s.Name, rest, intended)
			})
		})
	}
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
	e, intended := start(t, m, m.HostileDifferences, cluster.Options{NoEndpointSliceController: true}, func(t *testing.T, ctx context.Context, c *cluster.Cluster) {
		cluster.LoadHostile(t, ctx, c, m.Name)
	})
	runSetting(e, m, Setting{NodePortAddresses: cluster.BroadNodeCIDR}, true, buildSinks(t, m), func(sink string, diffs []cluster.Difference) ([]cluster.Difference, []cluster.Intended) {
		return cluster.Unexplained(sink, diffs, intended)
	})
}

// buildSinks builds m's sinks (BuildSink), once for every setting: by
// sink, the binary's path, or "" for a sink whose main package is not in
// this tree yet (a sink being added: its subtests skip, saying so).
func buildSinks(t *testing.T, m Mode) map[string]string {
	root, err := vm.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	bins := map[string]string{}
	for _, sink := range m.Sinks {
		if _, err := os.Stat(filepath.Join(root, "sinks", sink, "main.go")); errors.Is(err, fs.ErrNotExist) {
			t.Logf("sinks/%s/main.go is not in this tree: the %s subtests skip", sink, sink)
			bins[sink] = ""
			continue
		}
		bins[sink] = vm.BuildSink(t, sink)
	}
	return bins
}

// readIntended reads a differences file of e2e/cluster/testdata.
func readIntended(t *testing.T, name string) []cluster.Intended {
	t.Helper()
	root, err := vm.WorkspaceRoot()
	if err != nil {
		t.Fatal(err)
	}
	intended, err := cluster.ReadIntended(filepath.Join(root, "e2e", "cluster", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return intended
}

// start starts a control plane for mode m with opt, fills it with load,
// writes the proxies' kubeconfigs into a work directory and returns the
// environment and the differences file differences.
func start(t *testing.T, m Mode, differences string, opt cluster.Options, load func(*testing.T, context.Context, *cluster.Cluster)) (*Env, []cluster.Intended) {
	if m.Where == VM {
		vm.Require(t)
	}
	cluster.Require(t)
	intended := readIntended(t, differences)
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
	return e, intended
}

// runSetting captures kube-proxy --proxy-mode=<m.Name> and then each sink
// of m (a subtest each, its binary in bins) with setting s, and compares
// them; explain returns a sink's unexplained differences and stale
// entries; errors compares the proxies' ERROR log lines.
func runSetting(e *Env, m Mode, s Setting, errors bool, bins map[string]string, explain func(sink string, diffs []cluster.Difference) ([]cluster.Difference, []cluster.Intended)) {
	t := e.T
	bin := cluster.Require(t)
	ref := m.Capture(e, filepath.Join(bin, "kube-proxy"), kubeProxyArgs(e, m, s)...)
	if !ref.Synced {
		t.Fatalf("kube-proxy --proxy-mode=%s programmed no service: nothing to compare with", m.Name)
	}
	if want := s.shows(m.Name); want != "" && !shows(ref.State, want) {
		t.Errorf("kube-proxy's capture has no line with %q: the setting did not take effect", want)
	}
	for _, sink := range m.Sinks {
		t.Run(sink, func(t *testing.T) {
			if bins[sink] == "" {
				t.Skipf("sink %s not built: sinks/%s/main.go is not in this tree yet; only kube-proxy's capture ran", sink, sink)
			}
			se := &Env{T: t, Cluster: e.Cluster, Work: e.Work}
			got := m.Capture(se, bins[sink], sinkArgs(e, m, s)...)
			if got.Writes == 0 {
				t.Errorf("%s reports no kernel write on a fresh node (proxysinks_kernel_operations_total 0)", sink)
			}
			if !errors {
				delete(ref.State, cluster.SectionErrors)
				delete(got.State, cluster.SectionErrors)
			}
			compare(t, m, sink, ref, got, explain)
		})
	}
}

// kubeProxyArgs are kube-proxy's flags in mode m with setting s.
func kubeProxyArgs(e *Env, m Mode, s Setting) []string {
	return append([]string{
		"--proxy-mode=" + m.Name, "--kubeconfig=" + m.Where.path(e.Work, "kube-proxy.kubeconfig"),
		"--hostname-override=" + cluster.BroadNode, "--conntrack-max-per-core=0", "--v=2"}, s.flags()...)
}

// sinkArgs are a sink's flags in mode m with setting s.
func sinkArgs(e *Env, m Mode, s Setting) []string {
	return append([]string{
		"--kubeconfig=" + m.Where.path(e.Work, "sink.kubeconfig"), "--node-name=" + cluster.BroadNode}, s.flags()...)
}

// shows reports whether a line of st holds text.
func shows(st cluster.State, text string) bool {
	for _, lines := range st {
		for _, l := range lines {
			if strings.Contains(l, text) {
				return true
			}
		}
	}
	return false
}

// compare fails t for every difference explain leaves unexplained, every
// stale entry it returns, and every order difference between kube-proxy's capture and the sink's.
func compare(t *testing.T, m Mode, sink string, ref, got Capture, explain func(sink string, diffs []cluster.Difference) ([]cluster.Difference, []cluster.Intended)) {
	t.Helper()
	diffs := cluster.Diff(ref.State, got.State)
	unexplained, stale := explain(sink, diffs)
	for _, d := range unexplained {
		t.Errorf("unexplained difference (- kube-proxy only, + %s only): %s", sink, d)
	}
	for _, in := range stale {
		t.Errorf("intended difference no longer seen (remove it from the list): %s %s", in.Sink, in.Diff)
	}
	if m.Order != nil {
		for _, section := range slices.Sorted(maps.Keys(ref.Chains)) {
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
