package nftables

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// newKernelProxier returns an IPv4 Proxier programming ns.
func newKernelProxier(t testing.TB, ns *nstest.NetNS, cfg ruleset.Config) *Proxier {
	t.Helper()
	p, err := NewProxier(Config{IPv4: true, Ruleset: cfg, NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// nftFile loads an nft script into ns with `nft -f`.
func nftFile(t testing.TB, ns *nstest.NetNS, script string) {
	t.Helper()
	nstest.LookPath(t, "nft")
	path := filepath.Join(t.TempDir(), "script.nft")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	ns.MustRun(t, "nft", "-f", path)
}

// listing is `nft list table` of a family's kube-proxy table.
func listing(t testing.TB, ns *nstest.NetNS, fam string) string {
	t.Helper()
	nstest.LookPath(t, "nft")
	return ns.MustRun(t, "nft", "list", "table", fam, TableName)
}

// reference is the listing of the table `nft -f` writes from rs's script
// into a namespace of its own: what the Proxier must have written.
func reference(t testing.TB, rs *ruleset.Ruleset) string {
	t.Helper()
	ns := nstest.New(t)
	nftFile(t, ns, rs.Script())
	return listing(t, ns, rs.Family)
}

func render4(t testing.TB, s *client.Snapshot, cfg ruleset.Config) *ruleset.Ruleset {
	t.Helper()
	rs, err := ruleset.RenderFamily(s, &cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func syncOK(t testing.TB, p *Proxier, s *client.Snapshot) SyncStats {
	t.Helper()
	st, err := p.Snapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestKernelSync: the first sync writes in one transaction the table nft
// writes from the same ruleset's script; a resync writes and reads
// nothing; one endpoint changed writes only its service's chain; a
// restarted Proxier reads the table and writes nothing.
func TestKernelSync(t *testing.T) {
	ns := nstest.New(t)
	s, cfg := broad(t)
	p := newKernelProxier(t, ns, cfg)
	st := syncOK(t, p, s)
	if st.Transactions != 1 || st.Reads != 1 || st.Rules == 0 {
		t.Errorf("first sync: %+v", st)
	}
	if diff := cmp.Diff(reference(t, render4(t, s, cfg)), listing(t, ns, "ip")); diff != "" {
		t.Fatalf("table after the first sync (-nft -f +ours):\n%s", diff)
	}
	if st, err := p.Resync(); err != nil || st.Transactions != 0 || st.Reads != 0 {
		t.Errorf("resync of an unchanged kernel: %+v, %v", st, err)
	}

	// One endpoint changed, in a generated cluster.
	ns2 := nstest.New(t)
	gcfg := generatedConfig()
	p2 := newKernelProxier(t, ns2, gcfg)
	syncOK(t, p2, generated(50, 3, netip.Addr{}))
	s2 := generated(50, 3, netip.MustParseAddr("10.99.0.1"))
	st = syncOK(t, p2, s2)
	if st.Transactions != 1 || st.FlushedChains != 1 || st.Chains != 0 || st.Rules > 4 || st.Messages > 12 || st.Reads != 0 {
		t.Errorf("one endpoint changed: %+v", st)
	}
	if diff := cmp.Diff(reference(t, render4(t, s2, gcfg)), listing(t, ns2, "ip")); diff != "" {
		t.Errorf("table after one endpoint changed (-nft -f +ours):\n%s", diff)
	}

	// A restart.
	p3 := newKernelProxier(t, ns2, gcfg)
	if st := syncOK(t, p3, s2); st.Transactions != 0 || st.Reads != 1 || st.ForeignChanges != 0 {
		t.Errorf("restart with an unchanged cluster: %+v", st)
	}
	// A restart after an endpoint changed: only the numgen map's content
	// differs (read from the anonymous set's name), and only that chain
	// is written.
	s3 := generated(50, 3, netip.Addr{})
	p4 := newKernelProxier(t, ns2, gcfg)
	if st := syncOK(t, p4, s3); st.Transactions != 1 || st.Reads != 1 || st.FlushedChains != 1 || st.Chains != 0 {
		t.Errorf("restart after an endpoint changed: %+v", st)
	}
	if diff := cmp.Diff(reference(t, render4(t, s3, gcfg)), listing(t, ns2, "ip")); diff != "" {
		t.Errorf("table after a restart with a changed endpoint (-nft -f +ours):\n%s", diff)
	}
}

// TestKernelAdoption: a table kube-proxy's nftables mode left (nft -f of
// the same ruleset) is adopted: nothing written.
func TestKernelAdoption(t *testing.T) {
	ns := nstest.New(t)
	s, cfg := broad(t)
	rs := render4(t, s, cfg)
	nftFile(t, ns, rs.Script())
	before := listing(t, ns, "ip")
	p := newKernelProxier(t, ns, cfg)
	st := syncOK(t, p, s)
	if st.Transactions != 0 || st.Reads != 1 {
		t.Errorf("adoption of an nft -f table: %+v", st)
	}
	if diff := cmp.Diff(before, listing(t, ns, "ip")); diff != "" {
		t.Errorf("table after adoption (-before +after):\n%s", diff)
	}
}

// TestKernelForeignChange: another writer's changes to the table are
// found by the next resync (the generation moved), counted and repaired.
func TestKernelForeignChange(t *testing.T) {
	ns := nstest.New(t)
	s, cfg := broad(t)
	p := newKernelProxier(t, ns, cfg)
	syncOK(t, p, s)
	want := listing(t, ns, "ip")
	ns.MustRun(t, "nft", "add", "element", "ip", TableName, "cluster-ips", "{ 172.30.9.9 }")
	ns.MustRun(t, "nft", "add", "chain", "ip", TableName, "intruder")
	ns.MustRun(t, "nft", "insert", "rule", "ip", TableName, "services", "drop")
	st, err := p.Resync()
	if err != nil || st.Reads != 1 || st.ForeignChanges != 1 || st.Transactions != 1 {
		t.Errorf("resync after another writer: %+v, %v", st, err)
	}
	if diff := cmp.Diff([]nft.Family{nft.FamilyIPv4}, st.ForeignFamilies); diff != "" {
		t.Errorf("families changed by another writer (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, listing(t, ns, "ip")); diff != "" {
		t.Errorf("table after the repair (-want +got):\n%s", diff)
	}
}

// TestKernelRefused: a transaction the kernel refuses outside any service
// (the last chain, services) is reported naming the object, and nothing
// of it is applied; the next sync tries again.
func TestKernelRefused(t *testing.T) {
	ns := nstest.New(t)
	gcfg := generatedConfig()
	p := newKernelProxier(t, ns, gcfg)
	syncOK(t, p, generated(5, 2, netip.Addr{}))
	before := listing(t, ns, "ip")
	bad := true
	p.delta = nil // render through p.render
	p.render = func(s *client.Snapshot, v6 bool) (*ruleset.Ruleset, error) {
		rs, err := ruleset.RenderFamily(s, &gcfg, v6)
		if bad {
			// A jump to a chain that does not exist: compiled, refused.
			c := &rs.Chains[len(rs.Chains)-1]
			c.Rules = append(c.Rules, ruleset.Rule{Text: "jump no-such-chain"})
		}
		return rs, err
	}
	st, err := p.Snapshot(generated(5, 2, netip.MustParseAddr("10.99.0.1")))
	if diff := cmp.Diff([]nft.Family{nft.FamilyIPv4}, st.FailedFamilies); diff != "" || st.Failures != 1 {
		t.Errorf("failures %d in families (-want +got):\n%s", st.Failures, diff)
	}
	var ce *nft.CommitError
	if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), "(jump no-such-chain)") {
		t.Fatalf("refused transaction: error %v, want one naming the rule", err)
	}
	// The rule is services' (no one service's): the sync fails whole.
	if !strings.Contains(err.Error(), "chain services (") || len(p.Quarantined()) != 0 {
		t.Errorf("refusal outside any service: error %v, quarantined %+v; want the sync failed and nothing quarantined", err, p.Quarantined())
	}
	if diff := cmp.Diff(before, listing(t, ns, "ip")); diff != "" {
		t.Errorf("table after a refused transaction (-before +after):\n%s", diff)
	}
	bad = false
	if st, err := p.Resync(); err != nil || st.Transactions != 1 || st.Reads != 0 {
		t.Errorf("retry: %+v, %v", st, err)
	}
}

// TestKernelCleanup: CleanupLeftovers removes the kube-proxy tables of
// ip and ip6, and leaves other tables, and inet kube-proxy, alone.
func TestKernelCleanup(t *testing.T) {
	ns := nstest.New(t)
	nftFile(t, ns, `add table ip kube-proxy
add chain ip kube-proxy c
add table ip6 kube-proxy
add set ip6 kube-proxy s { type ipv6_addr ; }
add table inet kube-proxy
add table ip filter
add chain ip filter input { type filter hook input priority 0 ; }
`)
	removed, err := CleanupLeftovers(ns.FD())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"table ip kube-proxy", "table ip6 kube-proxy"}, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	got := regexp.MustCompile(`(?m)^table .*$`).FindAllString(ns.MustRun(t, "nft", "list", "tables"), -1)
	if diff := cmp.Diff([]string{"table inet kube-proxy", "table ip filter"}, got); diff != "" {
		t.Errorf("tables left (-want +got):\n%s", diff)
	}
	if removed, err := CleanupLeftovers(ns.FD()); err != nil || len(removed) != 0 {
		t.Errorf("second cleanup: %q, %v", removed, err)
	}
}

// TestKernelIPv6: the ip6 table, written and adopted like the ip one.
func TestKernelIPv6(t *testing.T) {
	ns := nstest.New(t)
	s, cfg := broad6(t)
	p, err := NewProxier(Config{IPv6: true, Ruleset: cfg, NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if st := syncOK(t, p, s); st.Transactions != 1 {
		t.Errorf("first sync: %+v", st)
	}
	rs, err := ruleset.RenderFamily(s, &cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(reference(t, rs), listing(t, ns, "ip6")); diff != "" {
		t.Fatalf("ip6 table after the first sync (-nft -f +ours):\n%s", diff)
	}
	ns2 := nstest.New(t)
	nftFile(t, ns2, rs.Script())
	p2, err := NewProxier(Config{IPv6: true, Ruleset: cfg, NetNS: ns2.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if st := syncOK(t, p2, s); st.Transactions != 0 || st.Reads != 1 {
		t.Errorf("adoption of an nft -f ip6 table: %+v", st)
	}
}

// TestKernelTraffic: a connection to a ClusterIP from the node reaches the
// service's endpoint (nat output DNAT through the numgen map), in a
// namespace whose only other interfaces are a veth pair, one end holding
// the endpoint's address.
func TestKernelTraffic(t *testing.T) {
	ns := nstest.New(t)
	nstest.LookPath(t, "ip")
	ns.MustRun(t, "ip", "link", "add", "veth0", "type", "veth", "peer", "name", "veth1")
	ns.MustRun(t, "ip", "link", "set", "veth0", "up")
	ns.MustRun(t, "ip", "link", "set", "veth1", "up")
	ns.MustRun(t, "ip", "addr", "add", "10.244.0.5/32", "dev", "veth0")
	ns.MustRun(t, "ip", "route", "add", "default", "dev", "veth0")
	var ln net.Listener
	if err := ns.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", "10.244.0.5:8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("endpoint\n"))
			c.Close()
		}
	}()
	dial := func(timeout time.Duration) (string, error) {
		var got string
		err := ns.Do(func() error {
			c, err := net.DialTimeout("tcp4", "10.96.0.0:80", timeout)
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(2 * time.Second))
			b, err := io.ReadAll(c)
			got = string(b)
			return err
		})
		return got, err
	}
	if _, err := dial(200 * time.Millisecond); err == nil {
		t.Fatal("the ClusterIP answers before the Proxier programmed it")
	}
	p := newKernelProxier(t, ns, generatedConfig())
	syncOK(t, p, generated(1, 1, netip.MustParseAddr("10.244.0.5")))
	if got, err := dial(2 * time.Second); err != nil || got != "endpoint\n" {
		t.Errorf("connection to the ClusterIP: %q, %v", got, err)
	}
}

// TestKernelProbe: NewProxier's kernel probe writes nothing (the
// generation does not move, no table appears), and a rule the kernel
// refuses makes NewProxier fail naming it.
func TestKernelProbe(t *testing.T) {
	ns := nstest.New(t)
	g0, err := nft.ReadGeneration(ns.FD())
	if err != nil {
		t.Fatal(err)
	}
	newKernelProxier(t, ns, generatedConfig())
	if g1, err := nft.ReadGeneration(ns.FD()); err != nil || g1 != g0 {
		t.Errorf("generation %d before NewProxier, %d after (%v)", g0, g1, err)
	}
	if out := ns.MustRun(t, "nft", "list", "ruleset"); out != "" {
		t.Errorf("ruleset after NewProxier: %q", out)
	}
	defer func(l []string) { probeExtra = l }(probeExtra)
	probeExtra = append(probeExtra, "jump no-such-chain")
	_, err = NewProxier(Config{IPv4: true, Ruleset: generatedConfig(), NetNS: ns.FD()})
	if err == nil || !strings.Contains(err.Error(), "(jump no-such-chain)") || strings.Contains(err.Error(), probeEnd) {
		t.Errorf("NewProxier on a kernel refusing a rule: %v", err)
	}
}

// TestKernelAdoptionReplaces: a table whose set definitions differ from
// the ruleset's (another version's kube-proxy) is replaced in one
// transaction: deleted and written whole.
func TestKernelAdoptionReplaces(t *testing.T) {
	ns := nstest.New(t)
	s, cfg := broad(t)
	rs := render4(t, s, cfg)
	old := strings.Replace(rs.Script(), `comment "ClusterIP, ExternalIP and LoadBalancer IP traffic"`, `comment "an older comment"`, 1)
	if old == rs.Script() {
		t.Fatal("the script has no service-ips comment to change")
	}
	nftFile(t, ns, old)
	p := newKernelProxier(t, ns, cfg)
	if st := syncOK(t, p, s); st.Transactions != 1 || st.Sets == 0 || st.Chains == 0 {
		t.Errorf("adoption of a table with another set definition: %+v", st)
	}
	if diff := cmp.Diff(reference(t, rs), listing(t, ns, "ip")); diff != "" {
		t.Errorf("table after the replacement (-nft -f +ours):\n%s", diff)
	}
}

// TestKernelDualStack: one Proxier writes both families' tables, one
// transaction each (the second made against the generation the first
// left), and a restarted one writes neither.
func TestKernelDualStack(t *testing.T) {
	ns := nstest.New(t)
	cfg := generatedConfig()
	s := generated(20, 2, netip.Addr{})
	p, err := NewProxier(Config{IPv4: true, IPv6: true, Ruleset: cfg, NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if st := syncOK(t, p, s); st.Transactions != 2 || st.Reads != 2 {
		t.Errorf("first dual-stack sync: %+v", st)
	}
	for _, fam := range []string{"ip", "ip6"} {
		rs, err := ruleset.RenderFamily(s, &cfg, fam == "ip6")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(reference(t, rs), listing(t, ns, fam)); diff != "" {
			t.Errorf("%s table (-nft -f +ours):\n%s", fam, diff)
		}
	}
	if st, err := p.Resync(); err != nil || st.Reads != 0 || st.Transactions != 0 {
		t.Errorf("resync: %+v, %v", st, err)
	}
	p2, err := NewProxier(Config{IPv4: true, IPv6: true, Ruleset: cfg, NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if st := syncOK(t, p2, s); st.Transactions != 0 || st.Reads != 2 {
		t.Errorf("dual-stack restart: %+v", st)
	}
}

// TestKernelDeltaSyncs: syncs that write Deltas (endpoints, affinity
// sets and services coming and going) leave the kernel's table what nft
// writes from the whole ruleset, without reading the kernel.
func TestKernelDeltaSyncs(t *testing.T) {
	ns := nstest.New(t)
	cfg := generatedConfig()
	p := newKernelProxier(t, ns, cfg)
	const n = 12
	pools := deltaPools(n)
	cur := slices.Clone(pools[0])
	syncOK(t, p, client.NewSnapshot(cur, nil))
	for step, k := range []int{1, 4, 2, 3, 0, 4, 1} {
		cur[step] = pools[k][step]
		cur[(step+5)%n] = pools[(k+1)%len(pools)][(step+5)%n]
		s := client.NewSnapshot(cur, nil)
		st := syncOK(t, p, s)
		if st.Reads != 0 || st.Transactions != 1 {
			t.Errorf("step %d: %+v, want one transaction and no read", step, st)
		}
		if !p.fams[0].synced {
			t.Errorf("step %d: the state is not the render's", step)
		}
		if diff := cmp.Diff(canonListing(reference(t, render4(t, s, cfg))), canonListing(listing(t, ns, "ip"))); diff != "" {
			t.Fatalf("step %d: table (-nft -f +Proxier):\n%s", step, diff)
		}
	}
}

// canonListing returns the objects of an `nft list table` listing sorted
// (nft lists them in the order they were created), each with its set
// elements sorted and whitespace collapsed; the table's own lines first.
func canonListing(l string) []string {
	var out []string
	var head, cur []string
	for _, line := range strings.Split(l, "\n") {
		switch {
		case cur != nil:
			cur = append(cur, line)
			if line == "\t}" {
				out = append(out, canonObject(cur))
				cur = nil
			}
		case strings.HasPrefix(line, "\tset ") || strings.HasPrefix(line, "\tmap ") || strings.HasPrefix(line, "\tchain "):
			cur = []string{line}
		default:
			head = append(head, line)
		}
	}
	slices.Sort(out)
	return append([]string{canonObject(head)}, out...)
}

func canonObject(lines []string) string {
	b := strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
	if head, rest, ok := strings.Cut(b, "elements = { "); ok {
		els, tail, _ := strings.Cut(rest, " }")
		l := strings.Split(els, ", ")
		slices.Sort(l)
		b = head + "elements = { " + strings.Join(l, ", ") + " }" + tail
	}
	return b
}

// TestKernelCleanupForOtherMode: what the iptables and IPVS sinks run at
// start removes the nftables mode's tables of the caller's namespace,
// says so in the log, and leaves the other tables alone.
func TestKernelCleanupForOtherMode(t *testing.T) {
	ns := nstest.New(t)
	nftFile(t, ns, `add table ip kube-proxy
add table ip6 kube-proxy
add table ip filter
`)
	var logs strings.Builder
	if err := ns.Do(func() error {
		CleanupForOtherMode(slog.New(slog.NewTextHandler(&logs, nil)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`object="table ip kube-proxy"`, `object="table ip6 kube-proxy"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, logs.String())
		}
	}
	got := regexp.MustCompile(`(?m)^table .*$`).FindAllString(ns.MustRun(t, "nft", "list", "tables"), -1)
	if diff := cmp.Diff([]string{"table ip filter"}, got); diff != "" {
		t.Errorf("tables left (-want +got):\n%s", diff)
	}
}
