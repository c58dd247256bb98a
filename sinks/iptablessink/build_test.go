package iptablessink

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
	"github.com/proxysinks/proxysinks/sinks/runtime"
	"github.com/proxysinks/proxysinks/sinks/sinktest"
)

// TestBuildMetrics: the sink's real build, in a fresh namespace, registers
// exactly the metrics its Sink.Metrics lists for the reference
// (docs/reference/metrics.md).
func TestBuildMetrics(t *testing.T) {
	nstest.LookPath(t, "iptables-nft-restore")
	ns := nstest.New(t)
	built := sinktest.NewDescribing()
	v4 := netip.MustParseAddr("192.168.1.10")
	env := runtime.Env{Config: runtime.Config{MasqueradeBit: 14}, Log: discard, Registry: built,
		NodePorts: runtime.NodePorts{Addrs: []netip.Addr{v4}}, OnSync: func(runtime.SyncStats) {}}
	var b runtime.Built
	if err := ns.Do(func() (err error) { b, err = build(env); return err }); err != nil {
		nstest.Missing(t, "the iptables proxier: %v", err)
	}
	defer b.Close()
	listed := sinktest.NewDescribing()
	if err := Sink("iptables", "").Metrics(listed, func(httpserve.TextSource) { t.Error("Metrics adds text; build does not") }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(built.Descs(), listed.Descs()); diff != "" {
		t.Errorf("metrics build registers (-) and Sink.Metrics lists (+):\n%s", diff)
	}
}
