package iptables

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
)

// cluster returns n ClusterIP services with eps endpoints each.
func cluster(n, eps int) []svcSpec {
	out := make([]svcSpec, n)
	for i := range out {
		s := svcSpec{ns: fmt.Sprintf("ns%d", i%50), name: fmt.Sprintf("svc%d", i),
			clusterIPs: []string{fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)}, ports: []client.Port{tcp("http", 80, 8080)}}
		for j := range eps {
			s.eps = append(s.eps, ep{ip: fmt.Sprintf("10.%d.%d.%d", 100+j, i/250, i%250+1), remote: j > 0})
		}
		out[i] = s
	}
	return out
}

// dryRun returns a dry-run Proxier for IPv4 and the buffer it writes to.
func dryRun(t testing.TB, mod func(*Config)) (*Proxier, *strings.Builder) {
	var out strings.Builder
	cfg := Config{IPv4: true, MasqueradeBit: 14, DryRun: &out}
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewProxier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, &out
}

// TestPartialSyncSize: one endpoint change writes the same restore input
// whatever the size of the cluster: only that service's chains.
func TestPartialSyncSize(t *testing.T) {
	var inputs []string
	for _, n := range []int{200, 2000} {
		p, out := dryRun(t, func(c *Config) { c.MaxRestoreRules = -1 })
		specs := cluster(n, 10)
		s := snapshot(specs...)
		st, err := p.Snapshot(s)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Full || st.Restores != 1 {
			t.Fatalf("%d services: first sync %+v, want one full restore", n, st)
		}
		out.Reset()
		specs[3].eps = specs[3].eps[1:]
		st, err = p.Snapshot(next(s, specs...))
		if err != nil {
			t.Fatal(err)
		}
		if st.Full || st.Restores != 1 {
			t.Fatalf("%d services: %+v, want one partial restore", n, st)
		}
		inputs = append(inputs, out.String())
	}
	if diff := cmp.Diff(inputs[0], inputs[1]); diff != "" {
		t.Errorf("restore input of one endpoint removal differs between 200 and 2,000 services (-200 +2000):\n%s", diff)
	}
	// The whole input: the service's KUBE-SVC- chain rewritten with its
	// nine remaining endpoints (large-cluster mode: no comments), the
	// removed endpoint's chain flushed and deleted; nothing else.
	pn := "ns3/svc3:http"
	svc := ServiceChain(pn, "tcp")
	gone := EndpointChain(pn, "tcp", "10.100.0.4:8080")
	want := "# iptables-nft-restore --noflush (IPv4)\n*nat\n:" + svc + " - [0:0]\n:" + gone + " - [0:0]\n"
	for j := 1; j < 10; j++ {
		sep := EndpointChain(pn, "tcp", fmt.Sprintf("10.%d.0.4:8080", 100+j))
		if j < 9 {
			want += "-A " + svc + " -m statistic --mode random --probability " + probability(10-j) + " -j " + sep + "\n"
		} else {
			want += "-A " + svc + " -j " + sep + "\n"
		}
	}
	want += "-X " + gone + "\nCOMMIT\n"
	if diff := cmp.Diff(want, inputs[0]); diff != "" {
		t.Errorf("restore input of one endpoint removal (-want +got):\n%s", diff)
	}
}

// TestUnchangedSnapshotWritesNothing: a partial snapshot without changes
// makes no restore.
func TestUnchangedSnapshotWritesNothing(t *testing.T) {
	p, _ := dryRun(t, nil)
	s := snapshot(broad()...)
	if _, err := p.Snapshot(s); err != nil {
		t.Fatal(err)
	}
	st, err := p.Snapshot(next(s, broad()...))
	if err != nil {
		t.Fatal(err)
	}
	if st.Restores != 0 || st.Bytes != 0 {
		t.Errorf("unchanged snapshot wrote %+v", st)
	}
}

// TestBadServiceKeepsItsRules: a service that can no longer be rendered
// keeps the rules it had, through partial and full syncs, and the error
// names it.
func TestBadServiceKeepsItsRules(t *testing.T) {
	p, out := dryRun(t, nil)
	good := svcSpec{name: "web", clusterIPs: []string{"10.96.0.10"}, ports: []client.Port{tcp("", 80, 80)}, eps: []ep{{ip: "10.244.1.1"}}}
	s := snapshot(good)
	if _, err := p.Snapshot(s); err != nil {
		t.Fatal(err)
	}
	bad := good
	bad.ports = []client.Port{{Protocol: "ICMP", Port: 80}}
	s = next(s, bad)
	out.Reset()
	if _, err := p.Snapshot(s); err == nil || !strings.Contains(err.Error(), "default/web") {
		t.Fatalf("partial sync of a bad service: error %v, want one naming default/web", err)
	}
	if strings.Contains(out.String(), "-X ") || strings.Contains(out.String(), "-D ") {
		t.Errorf("a bad service lost rules in a partial sync:\n%s", out)
	}
	out.Reset()
	if _, err := p.Resync(); err == nil {
		t.Fatal("full sync of a bad service: no error")
	}
	if !strings.Contains(out.String(), "default/web cluster IP") {
		t.Errorf("the full sync dropped the bad service's last good rules:\n%s", out)
	}
}

// TestLargeClusterFlip: crossing kube-proxy's large-cluster threshold in a
// partial sync rewrites everything (without per-endpoint comments).
func TestLargeClusterFlip(t *testing.T) {
	p, out := dryRun(t, nil)
	p.largeAt = 3
	specs := cluster(2, 1)
	s := snapshot(specs...)
	if _, err := p.Snapshot(s); err != nil {
		t.Fatal(err)
	}
	specs[0].eps = append(specs[0].eps, ep{ip: "10.200.0.1", remote: true}, ep{ip: "10.200.0.2", remote: true})
	out.Reset()
	st, err := p.Snapshot(next(s, specs...))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Full || !p.fams[0].large {
		t.Fatalf("crossing the threshold: %+v, large=%v; want a full sync in large-cluster mode", st, p.fams[0].large)
	}
	if strings.Contains(out.String(), "-> 10.") {
		t.Errorf("large-cluster mode kept per-endpoint comments:\n%s", out)
	}
}

// restoreRules counts the "-A" lines of restore input per table.
func restoreRules(input string) map[string]int {
	out := map[string]int{"filter": 0, "nat": 0}
	table := ""
	for _, l := range strings.Split(input, "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, "-A "):
			out[table]++
		}
	}
	return out
}

// TestRulesTotal: the rule counts per table (kube-proxy's
// kubeproxy_sync_proxy_rules_iptables_total) are the rules a first sync
// writes, and after a partial sync those a fresh Proxier's first sync of
// the same state writes.
func TestRulesTotal(t *testing.T) {
	dual := func(c *Config) { c.IPv6 = true; c.MaxRestoreRules = -1 }
	p, out := dryRun(t, dual)
	if got := p.RulesTotal(); got["filter"]+got["nat"] != 0 {
		t.Errorf("before any sync: %v, want zero", got)
	}
	specs := broad()
	s := snapshot(specs...)
	if _, err := p.Snapshot(s); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(restoreRules(out.String()), p.RulesTotal()); diff != "" {
		t.Errorf("after the first sync (-written +RulesTotal):\n%s", diff)
	}
	specs = specs[1:]
	if _, err := p.Snapshot(next(s, specs...)); err != nil {
		t.Fatal(err)
	}
	fresh, freshOut := dryRun(t, dual)
	if _, err := fresh.Snapshot(snapshot(specs...)); err != nil {
		t.Fatal(err)
	}
	want := restoreRules(freshOut.String())
	if diff := cmp.Diff(want, p.RulesTotal()); diff != "" {
		t.Errorf("after a partial sync removing a service (-fresh first sync +RulesTotal):\n%s", diff)
	}
	if want["nat"] == 0 || want["filter"] == 0 {
		t.Errorf("counts %v: the fixture should have rules in both tables", want)
	}
}

// TestResyncReusesRender: a resync of the snapshot the last full sync
// wrote compares the kernel with that sync's rendering instead of
// rendering again, and writes what a render would (here, in a dry run
// with an empty kernel, the first sync's input again); after a partial
// sync the next resync renders.
func TestResyncReusesRender(t *testing.T) {
	p, out := dryRun(t, func(c *Config) { c.MaxRestoreRules = -1 })
	s := snapshot(broad()...)
	if _, err := p.Snapshot(s); err != nil {
		t.Fatal(err)
	}
	first := out.String()
	out.Reset()
	if _, err := p.Resync(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, out.String()); diff != "" {
		t.Errorf("resync input differs from the first sync's (-first +resync):\n%s", diff)
	}
	if r := p.fams[0].renders; r != 1 {
		t.Errorf("%d full renders after a sync and a resync, want 1", r)
	}
	specs := broad()[1:]
	s2 := next(s, specs...)
	if st, err := p.Snapshot(s2); err != nil || st.Full {
		t.Fatalf("partial sync: %+v, %v", st, err)
	}
	out.Reset()
	if _, err := p.Resync(); err != nil {
		t.Fatal(err)
	}
	if r := p.fams[0].renders; r != 2 {
		t.Errorf("%d full renders after a partial sync and a resync, want 2", r)
	}
	fresh, freshOut := dryRun(t, func(c *Config) { c.MaxRestoreRules = -1 })
	if _, err := fresh.Snapshot(snapshot(specs...)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(freshOut.String(), out.String()); diff != "" {
		t.Errorf("resync after the partial sync differs from a fresh first sync (-fresh +resync):\n%s", diff)
	}
}

// TestFirstSyncFillsTopChainsProgressively: with bounded transactions, a
// first sync declares nat KUBE-SERVICES once, in the first transaction,
// adds each service's rule there in the transaction that creates the
// service's chains, and the node-port rule last; the chain ends up with
// the same rules, in the same order, as one transaction writes.
func TestFirstSyncFillsTopChainsProgressively(t *testing.T) {
	specs := cluster(40, 3)
	np := svcSpec{name: "np", typ: client.NodePort, clusterIPs: []string{"10.96.200.1"},
		ports: []client.Port{withNodePort(tcp("", 80, 8080), 30080)}, eps: []ep{{ip: "10.244.9.1"}}}
	specs = append(specs, np)
	one, oneOut := dryRun(t, func(c *Config) { c.MaxRestoreRules = -1 })
	if _, err := one.Snapshot(snapshot(specs...)); err != nil {
		t.Fatal(err)
	}
	p, out := dryRun(t, func(c *Config) { c.MaxRestoreRules = 30 })
	st, err := p.Snapshot(snapshot(specs...))
	if err != nil {
		t.Fatal(err)
	}
	if st.Restores < 5 {
		t.Fatalf("%d restores, want several", st.Restores)
	}
	const svcLine = "-A KUBE-SERVICES "
	topLines := func(s string) []string {
		var l []string
		for _, line := range strings.Split(s, "\n") {
			if strings.HasPrefix(line, svcLine) {
				l = append(l, line)
			}
		}
		return l
	}
	txns := strings.Split(out.String(), "# iptables-nft-restore")[1:]
	if len(txns) != st.Restores {
		t.Fatalf("%d transactions in the dry-run output, want %d", len(txns), st.Restores)
	}
	for i, txn := range txns {
		nat := txn[strings.Index(txn, "*nat\n"):]
		if declared := strings.Contains(nat, "\n:KUBE-SERVICES "); declared != (i == 0) {
			t.Errorf("transaction %d declares nat KUBE-SERVICES: %v, want %v", i, declared, i == 0)
		}
		for _, l := range topLines(nat) {
			if strings.Contains(l, "nodeports") {
				if i != len(txns)-1 {
					t.Errorf("node-port rule in transaction %d of %d", i, len(txns))
				}
				continue
			}
			target := l[strings.LastIndex(l, " ")+1:]
			if !strings.Contains(nat, "\n:"+target+" ") {
				t.Errorf("transaction %d: %q jumps to a chain it does not create", i, l)
			}
		}
	}
	if diff := cmp.Diff(topLines(oneOut.String()), topLines(out.String())); diff != "" {
		t.Errorf("KUBE-SERVICES differs from one transaction's (-one +bounded):\n%s", diff)
	}
}

// TestFullSyncReusesUnchangedRenders: a full sync of a new snapshot (new
// objects, equal content) keeps the renderings of the services that did
// not change and re-renders the changed one; what it writes is what a
// fresh Proxier writes for that snapshot.
func TestFullSyncReusesUnchangedRenders(t *testing.T) {
	dual := func(c *Config) { c.IPv6 = true; c.MaxRestoreRules = -1 }
	p, out := dryRun(t, dual)
	if _, err := p.Snapshot(snapshot(broad()...)); err != nil {
		t.Fatal(err)
	}
	before := map[client.ServiceKey]*byte{}
	for k, r := range p.fams[0].svcs {
		if len(r.buf) > 0 {
			before[k] = &r.buf[0]
		}
	}
	specs := broad()
	specs[0].eps = specs[0].eps[1:] // default/web loses an endpoint
	s := snapshot(specs...)
	s.Full = true
	out.Reset()
	if st, err := p.Snapshot(s); err != nil || !st.Full {
		t.Fatalf("full sync: %+v, %v", st, err)
	}
	web := client.ServiceKey{Namespace: "default", Name: "web"}
	for k, first := range before {
		r := p.fams[0].svcs[k]
		if reused := &r.buf[0] == first; reused != (k != web) {
			t.Errorf("%v: rendering reused %v, want %v", k, reused, k != web)
		}
	}
	fresh, freshOut := dryRun(t, dual)
	if _, err := fresh.Snapshot(snapshot(specs...)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(freshOut.String(), out.String()); diff != "" {
		t.Errorf("full sync with reused renderings differs from a fresh Proxier's (-fresh +reused):\n%s", diff)
	}
}
