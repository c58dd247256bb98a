package nftablessink

import (
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
	"github.com/proxysinks/proxysinks/nftables"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
	"github.com/proxysinks/proxysinks/sinks/runtime"
	"github.com/proxysinks/proxysinks/sinks/sinktest"
)

// kernelController returns a Controller over a Proxier programming IPv4
// in a fresh network namespace, with metrics, and the syncs it reported.
func kernelController(t *testing.T) (*Controller, *nstest.NetNS, *[]runtime.SyncStats) {
	t.Helper()
	nstest.LookPath(t, "nft")
	ns := nstest.New(t)
	v4 := netip.MustParseAddr("192.168.1.10")
	cfg := ProxierConfig(runtime.Env{Config: runtime.Config{MasqueradeBit: 14},
		NodePorts: runtime.NodePorts{CIDRs: []netip.Prefix{netip.PrefixFrom(v4, 32)}, Addrs: []netip.Addr{v4}}})
	cfg.NetNS, cfg.Log = ns.FD(), discard()
	p, err := nftables.NewProxier(cfg)
	if err != nil {
		nstest.Missing(t, "an nf_tables kernel: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var synced []runtime.SyncStats
	c := &Controller{P: p, Metrics: m, Log: discard(), families: families(cfg),
		OnSync: func(st runtime.SyncStats) { synced = append(synced, st) }}
	return c, ns, &synced
}

// TestKernelSync: against the kernel, in a fresh namespace, the controller
// reports what it wrote: the first sync writes the table, a resync with
// nothing changed writes nothing, another writer's change is repaired by
// the next resync and counted under the family
// (proxysinks_nftables_foreign_changes_total; the table read back only
// then, proxysinks_nftables_table_reads_total), and new NodePort addresses
// are written by the next snapshot.
func TestKernelSync(t *testing.T) {
	c, ns, synced := kernelController(t)
	a, b := service("a", "10.96.0.1", "10.244.0.1"), service("b", "10.96.0.2", "10.244.0.2", "10.244.0.3")
	s := client.NewSnapshot([]*client.ServiceEndpoints{a, b}, nil)
	c.Snapshot(s)
	table := ns.MustRun(t, "nft", "list", "table", "ip", "kube-proxy")
	if !strings.Contains(table, "10.96.0.2 . tcp . 80 : goto service-") || !strings.Contains(table, "elements = { 192.168.1.10 }") {
		t.Fatalf("after the first sync, the table lacks service b or the node port address:\n%s", table)
	}
	reads := testutil.ToFloat64(c.Metrics.TableReads)
	c.Resync()
	if got := testutil.ToFloat64(c.Metrics.TableReads); got != reads {
		t.Errorf("a resync with the generation unchanged read %v tables, want none", got-reads)
	}
	ns.MustRun(t, "nft", "delete", "element", "ip", "kube-proxy", "service-ips", "{ 10.96.0.2 . tcp . 80 }")
	c.Resync()
	if got := testutil.ToFloat64(c.Metrics.TableReads); got != reads+1 {
		t.Errorf("a resync after another writer's commit read %v tables, want 1", got-reads)
	}
	if table := ns.MustRun(t, "nft", "list", "table", "ip", "kube-proxy"); !strings.Contains(table, "10.96.0.2 . tcp . 80 : goto service-") {
		t.Errorf("the element another writer deleted is not back:\n%s", table)
	}
	if got := testutil.ToFloat64(c.Metrics.ForeignChanges.WithLabelValues("IPv4")); got != 1 {
		t.Errorf("proxysinks_nftables_foreign_changes_total{ip_family=IPv4} = %v, want 1", got)
	}
	v4 := netip.MustParseAddr("192.168.1.11")
	c.SetNodePorts(runtime.NodePorts{CIDRs: []netip.Prefix{netip.PrefixFrom(v4, 32)}, Addrs: []netip.Addr{v4}})
	c.Snapshot(s)
	if table := ns.MustRun(t, "nft", "list", "table", "ip", "kube-proxy"); !strings.Contains(table, "elements = { 192.168.1.11 }") {
		t.Errorf("the new NodePort address is not in the table:\n%s", table)
	}
	var writes []int
	for _, st := range *synced {
		if st.Err != nil {
			t.Errorf("sync failed: %v", st.Err)
		}
		writes = append(writes, st.Writes)
	}
	if len(writes) != 4 || writes[0] == 0 || writes[1] != 0 || writes[2] == 0 || writes[3] == 0 {
		t.Errorf("writes per sync %v: want some, none (nothing changed), some (the repair), some (the address)", writes)
	}
	if got := testutil.CollectAndCount(c.Metrics.FullDuration); got != 1 {
		t.Errorf("kubeproxy_sync_full_proxy_rules_duration_seconds: %d series, want 1 (IPv4)", got)
	}
}

// TestCleanup: --cleanup removes table ip kube-proxy, which the sink
// wrote, and leaves another table alone.
func TestCleanup(t *testing.T) {
	c, ns, _ := kernelController(t)
	c.Snapshot(client.NewSnapshot([]*client.ServiceEndpoints{service("a", "10.96.0.1", "10.244.0.1")}, nil))
	ns.MustRun(t, "nft", "add", "table", "ip", "other")
	sink := Sink("nftables", "")
	if err := ns.Do(func() error { return sink.Cleanup(runtime.Config{}, discard()) }); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if got := ns.MustRun(t, "nft", "list", "tables"); strings.TrimSpace(got) != "table ip other" {
		t.Errorf("tables after the cleanup: %q, want only table ip other", got)
	}
}

// TestBuild: the sink's real (not dry-run) build, in a fresh namespace:
// it removes the chains kube-proxy's iptables mode left (and leaves
// another program's), its controller programs the kernel, its metrics are
// registered, its conntrack is there for stale UDP flows.
func TestBuild(t *testing.T) {
	nstest.LookPath(t, "nft")
	ns := nstest.New(t)
	reg := prometheus.NewRegistry()
	built := &sinktest.Describing{Registerer: reg}
	v4 := netip.MustParseAddr("192.168.1.10")
	env := runtime.Env{Config: runtime.Config{MasqueradeBit: 14}, Log: discard(), Registry: built,
		NodePorts: runtime.NodePorts{CIDRs: []netip.Prefix{netip.PrefixFrom(v4, 32)}, Addrs: []netip.Addr{v4}}}
	var synced []runtime.SyncStats
	env.OnSync = func(st runtime.SyncStats) { synced = append(synced, st) }
	// What kube-proxy's iptables mode left, and another program's chain.
	nstest.LookPath(t, "iptables-nft-restore")
	ns.MustRun(t, "sh", "-c", "printf '*nat\\n:KUBE-SERVICES - [0:0]\\n:FOREIGN - [0:0]\\n-A PREROUTING -j KUBE-SERVICES\\n-A OUTPUT -j FOREIGN\\nCOMMIT\\n' | iptables-nft-restore --noflush")
	var b runtime.Built
	if err := ns.Do(func() (err error) { b, err = build(env); return err }); err != nil {
		nstest.Missing(t, "an nf_tables kernel: %v", err)
	}
	defer b.Close()
	b.Controller.Snapshot(client.NewSnapshot([]*client.ServiceEndpoints{service("a", "10.96.0.1", "10.244.0.1")}, nil))
	if len(synced) != 1 || synced[0].Err != nil || synced[0].Writes == 0 {
		t.Fatalf("syncs reported %+v: want one that wrote", synced)
	}
	if table := ns.MustRun(t, "nft", "list", "table", "ip", "kube-proxy"); !strings.Contains(table, "10.96.0.1 . tcp . 80 : goto service-") {
		t.Errorf("the service is not in the namespace's table:\n%s", table)
	}
	if nat := ns.MustRun(t, "iptables-nft-save", "-t", "nat"); strings.Contains(nat, "KUBE-") || !strings.Contains(nat, "-A OUTPUT -j FOREIGN") {
		t.Errorf("the iptables mode's chains are left, or another program's chain is gone:\n%s", nat)
	}
	if b.Conntrack == nil {
		t.Error("no conntrack: stale UDP flows would not be deleted")
	}
	if b.Syscalls == nil || b.Syscalls() == 0 {
		t.Error("no netlink system calls counted")
	}
	if n, err := testutil.GatherAndCount(reg, "kubeproxy_sync_full_proxy_rules_duration_seconds", "proxysinks_nftables_table_reads_total"); err != nil || n == 0 {
		t.Errorf("registered metrics: %d series (%v), want the full sync's and the reads", n, err)
	}
	// The reference (Sink.Metrics) lists what build registers.
	listed := sinktest.NewDescribing()
	if err := Sink("nftables", "").Metrics(listed, func(httpserve.TextSource) { t.Error("Metrics adds text; build does not") }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(built.Descs(), listed.Descs()); diff != "" {
		t.Errorf("metrics build registers (-) and Sink.Metrics lists (+):\n%s", diff)
	}
}

// TestCleanOtherModes: each other mode's clean-up runs; a failure (no
// IPVS on this kernel) is logged and the start goes on.
func TestCleanOtherModes(t *testing.T) {
	var ran []string
	var logs strings.Builder
	p := platform{
		IPTables: func() error { ran = append(ran, "iptables"); return nil },
		IPVS: func(runtime.Config, *slog.Logger) error {
			ran = append(ran, "ipvs")
			return errors.New("no IPVS")
		},
	}
	cleanOtherModes(p, runtime.Config{}, slog.New(slog.NewTextHandler(&logs, nil)))
	if diff := cmp.Diff([]string{"iptables", "ipvs"}, ran); diff != "" {
		t.Errorf("clean-ups run (-want +got):\n%s", diff)
	}
	if !strings.Contains(logs.String(), "nothing of the IPVS mode removed") || !strings.Contains(logs.String(), "no IPVS") {
		t.Errorf("the IPVS failure is not logged: %s", logs.String())
	}
}
