package dataplane_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/kernel"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// repairNode is a node in a fresh network namespace: the real ipsets and
// iptables, the sysctls under a temporary root (the vs/* ones need ip_vs,
// which the host lacks), an in-memory dummy link.
func repairNode(t *testing.T) (*dataplane.Node, *nstest.NetNS, kernel.Sysctl) {
	t.Helper()
	nstest.LookPath(t, "iptables-save")
	nstest.LookPath(t, "ip6tables-save")
	ns := nstest.New(t)
	c, err := ipset.Dial(&ipset.Config{NetNS: ns.FD()})
	if err != nil {
		nstest.Missing(t, "ipset in the kernel: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	v, err := kernel.Running()
	if err != nil {
		t.Fatal(err)
	}
	sys := kernel.Sysctl{Root: t.TempDir()}
	for _, s := range dataplane.IPVSSysctls(v, true) {
		p := filepath.Join(sys.Root, filepath.FromSlash(s.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(name string, args []string, stdin []byte) ([]byte, error) {
		var out []byte
		err := ns.Do(func() error {
			var err error
			out, err = xtables.Exec(name, args, stdin)
			return err
		})
		return out, err
	}
	n := &dataplane.Node{
		Cfg: dataplane.NodeConfig{Families: []xtables.Family{xtables.IPv4, xtables.IPv6}, StrictARP: true,
			Rules: rules.Config{MasqueradeBit: 14, RandomFully: true}},
		Kernel:      &dataplane.Kernel{IPSet: c, Link: dataplanetest.NewLinks()},
		Sysctl:      sys,
		RulesRunner: run,
	}
	return n, ns, sys
}

// TestRepair: every piece Setup prepares that drifts is written back by
// Repair, and only that piece; a Repair with nothing drifted writes
// nothing.
func TestRepair(t *testing.T) {
	n, ns, sys := repairNode(t)
	first, err := n.Repair()
	if err != nil {
		t.Fatal(err)
	}
	if len(first) == 0 {
		t.Fatal("the first Repair wrote nothing")
	}
	if again, err := n.Repair(); err != nil || len(again) != 0 {
		t.Fatalf("Repair with nothing drifted wrote %q (err %v), want nothing", again, err)
	}
	tests := []struct {
		name  string
		drift func()
		want  []string
	}{
		{"KUBE-SERVICES flushed", func() { ns.MustRun(t, "iptables", "-t", "nat", "-F", "KUBE-SERVICES") },
			[]string{"iptables rules (IPv4, legacy)"}},
		{"POSTROUTING jump deleted", func() {
			ns.MustRun(t, "ip6tables", "-t", "nat", "-D", "POSTROUTING", "-m", "comment", "--comment", "kubernetes postrouting rules", "-j", "KUBE-POSTROUTING")
		},
			[]string{"iptables rules (IPv6, legacy)"}},
		{"sysctl reset", func() {
			if err := sys.Set("net/ipv4/vs/conntrack", 0); err != nil {
				t.Fatal(err)
			}
		}, []string{"sysctl net/ipv4/vs/conntrack"}},
		{"ipset destroyed", func() {
			ns.MustRun(t, "iptables", "-t", "nat", "-F")
			ns.MustRun(t, "iptables", "-t", "filter", "-F")
			ns.MustRun(t, "ipset", "destroy", "KUBE-CLUSTER-IP")
		}, []string{"ipset KUBE-CLUSTER-IP", "iptables rules (IPv4, legacy)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.drift()
			got, err := n.Repair()
			if err != nil {
				t.Fatal(err)
			}
			// The backend depends on the host's iptables; compare without it.
			norm := func(l []string) []string {
				out := slices.Clone(l)
				for i, s := range out {
					if strings.HasPrefix(s, "iptables rules (") {
						out[i] = s[:strings.Index(s, ",")] + ")"
					}
				}
				return out
			}
			if d := cmp.Diff(norm(tt.want), norm(got)); d != "" {
				t.Errorf("Repair wrote -want +got:\n%s", d)
			}
			if again, err := n.Repair(); err != nil || len(again) != 0 {
				t.Errorf("second Repair wrote %q (err %v), want nothing", again, err)
			}
		})
	}
}
