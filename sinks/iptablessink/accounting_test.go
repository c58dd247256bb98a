package iptablessink

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/proxysinks/proxysinks/iptables"
	"github.com/proxysinks/proxysinks/netlinkraw/nfacct"
)

// fakeCounters answers Get from a map; a missing name is an error.
type fakeCounters map[string]uint64

func (f fakeCounters) Get(name string) (nfacct.Counter, error) {
	p, ok := f[name]
	if !ok {
		return nfacct.Counter{}, errors.New("no such object")
	}
	return nfacct.Counter{Name: name, Packets: p}, nil
}

// TestAcctCollector: kube-proxy's two nfacct metrics carry the objects'
// packets; an object that cannot be read is left out.
func TestAcctCollector(t *testing.T) {
	c := NewAcctCollector(fakeCounters{iptables.AcctInvalidDropped: 5, iptables.AcctLocalhostNodePorts: 2}, discard)
	want := `
# HELP kubeproxy_iptables_ct_state_invalid_dropped_packets_total packets dropped by iptables to work around conntrack problems
# TYPE kubeproxy_iptables_ct_state_invalid_dropped_packets_total counter
kubeproxy_iptables_ct_state_invalid_dropped_packets_total 5
# HELP kubeproxy_iptables_localhost_nodeports_accepted_packets_total Number of packets accepted on nodeports of loopback interface
# TYPE kubeproxy_iptables_localhost_nodeports_accepted_packets_total counter
kubeproxy_iptables_localhost_nodeports_accepted_packets_total 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(NewAcctCollector(fakeCounters{iptables.AcctInvalidDropped: 1}, discard)); n != 1 {
		t.Errorf("with one object missing: %d series, want 1", n)
	}
}

// TestTrafficAccounting: the sink's Proxier keeps kube-proxy's nfacct
// objects in its namespace, and the metric counts a request from the node
// to 127.0.0.1:<node port>.
func TestTrafficAccounting(t *testing.T) {
	n := newTestNet(t)
	if err := n.node.Do(func() error { return ensureRouteLocalnet(kernelSysctl) }); err != nil {
		t.Fatal(err)
	}
	var acct, read *nfacct.Conn
	var err error
	for _, c := range []**nfacct.Conn{&acct, &read} {
		if *c, err = nfacct.Dial(&nfacct.Config{NetNS: n.node.FD()}); err != nil {
			t.Fatal(err)
		}
		defer (*c).Close()
	}
	if _, err := read.Get(iptables.AcctLocalhostNodePorts); err == nil {
		t.Fatal("the object exists before the sink ran")
	}
	n.programWith(t, func(c *iptables.Config) { c.Accounting = acct })
	if _, err := source(n.node, "127.0.0.1:30080"); err != nil {
		t.Fatalf("from the node to 127.0.0.1:30080: %v", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewAcctCollector(read, discard))
	got, err := testutil.GatherAndCount(reg, "kubeproxy_iptables_localhost_nodeports_accepted_packets_total", "kubeproxy_iptables_ct_state_invalid_dropped_packets_total")
	if err != nil || got != 2 {
		t.Fatalf("series: %d, %v; want both metrics", got, err)
	}
	ctr, err := read.Get(iptables.AcctLocalhostNodePorts)
	if err != nil || ctr.Packets == 0 {
		t.Errorf("%s after one request: %+v, %v; want packets", iptables.AcctLocalhostNodePorts, ctr, err)
	}
}
