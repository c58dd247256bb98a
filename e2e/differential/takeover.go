package differential

import (
	"path/filepath"
	"testing"

	"github.com/proxysinks/proxysinks/e2e/cluster"
)

// takeover runs, per sink of m (a subtest "<sink>-takeover" each), the
// move from kube-proxy to the sink on one node: kube-proxy in mode m
// programs a fresh node (hostNode) until its state is stable and is
// stopped; the sink starts on the same node. The sink's state must then
// be kube-proxy's up to the reviewed differences (intended), as on a
// fresh node, and a sink with no reviewed difference must have written
// nothing at all: it adopts kube-proxy's tables as they are.
func takeover(e *Env, m Mode, s Setting, bins map[string]string, intended []cluster.Intended) {
	kube := filepath.Join(cluster.Require(e.T), "kube-proxy")
	for _, sink := range m.Sinks {
		e.T.Run(sink+"-takeover", func(t *testing.T) {
			if bins[sink] == "" {
				t.Skipf("sink %s not built: sinks/%s/main.go is not in this tree yet", sink, sink)
			}
			se := &Env{T: t, Cluster: e.Cluster, Work: e.Work}
			ns := hostNode(se, *m.takeover)
			ref := captureIn(se, *m.takeover, ns, kube, kubeProxyArgs(se, m, s)...)
			if !ref.Synced {
				t.Fatalf("kube-proxy --proxy-mode=%s programmed no service: nothing to take over", m.Name)
			}
			got := captureIn(se, *m.takeover, ns, bins[sink], sinkArgs(se, m, s)...)
			delete(ref.State, cluster.SectionErrors)
			delete(got.State, cluster.SectionErrors)
			compare(t, m, sink, ref, got, func(sink string, diffs []cluster.Difference) ([]cluster.Difference, []cluster.Intended) {
				return cluster.Unexplained(sink, diffs, intended)
			})
			// With no difference, every entry of the sink is "stale".
			_, entries := cluster.Unexplained(sink, nil, intended)
			reviewed := len(entries)
			switch {
			case got.Writes < 0:
				t.Errorf("%s: no proxysinks_kernel_operations_total on 127.0.0.1:10249", sink)
			case reviewed == 0 && got.Writes != 0:
				t.Errorf("%s took over kube-proxy's tables and wrote %v kernel objects, want none (no reviewed difference)", sink, got.Writes)
			default:
				t.Logf("%s took over kube-proxy's tables writing %v kernel objects (%d reviewed differences)", sink, got.Writes, reviewed)
			}
		})
	}
}
