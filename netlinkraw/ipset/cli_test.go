package ipset_test

import (
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

var (
	addr   = netip.MustParseAddr
	prefix = netip.MustParsePrefix
)

// cliSets is the cross-check scenario: every set type proxysinks uses, both
// families, and the extensions.
var cliSets = []struct {
	set     ipset.Set
	entries []ipset.Entry
}{
	{ipset.Set{Name: "KUBE-CLUSTER-IP", Type: ipset.HashIPPort, Family: ipset.INET, HashSize: 1024, MaxElem: 65536},
		[]ipset.Entry{{IP: addr("10.96.0.10"), Proto: ipset.UDP, Port: 53}, {IP: addr("10.96.0.1"), Proto: ipset.TCP, Port: 443}, {IP: addr("10.96.5.5"), Proto: ipset.SCTP, Port: 9}}},
	{ipset.Set{Name: "KUBE-6-CLUSTER-IP", Type: ipset.HashIPPort, Family: ipset.INET6, HashSize: 1024, MaxElem: 65536},
		[]ipset.Entry{{IP: addr("fd00:96::a"), Proto: ipset.UDP, Port: 53}}},
	{ipset.Set{Name: "KUBE-LOOP-BACK", Type: ipset.HashIPPortIP, Family: ipset.INET},
		[]ipset.Entry{{IP: addr("10.244.1.5"), Proto: ipset.TCP, Port: 8080, IP2: addr("10.244.1.5")}}},
	{ipset.Set{Name: "KUBE-6-LOOP-BACK", Type: ipset.HashIPPortIP, Family: ipset.INET6},
		[]ipset.Entry{{IP: addr("fd00:244::5"), Proto: ipset.TCP, Port: 8080, IP2: addr("fd00:244::5")}}},
	{ipset.Set{Name: "KUBE-LB-SOURCE-CIDR", Type: ipset.HashIPPortNet, Family: ipset.INET},
		[]ipset.Entry{{IP: addr("203.0.113.7"), Proto: ipset.TCP, Port: 80, Net: prefix("198.51.100.0/24")}, {IP: addr("203.0.113.7"), Proto: ipset.TCP, Port: 80, Net: prefix("198.51.100.128/25"), NoMatch: true}}},
	{ipset.Set{Name: "KUBE-6-LB-SOURCE-CIDR", Type: ipset.HashIPPortNet, Family: ipset.INET6},
		[]ipset.Entry{{IP: addr("2001:db8::7"), Proto: ipset.UDP, Port: 80, Net: prefix("2001:db8:1::/48")}}},
	{ipset.Set{Name: "KUBE-IPVS-IPS", Type: ipset.HashIP, Family: ipset.INET},
		[]ipset.Entry{{IP: addr("10.96.0.10")}}},
	{ipset.Set{Name: "KUBE-6-IPVS-IPS", Type: ipset.HashIP, Family: ipset.INET6},
		[]ipset.Entry{{IP: addr("fd00:96::a")}}},
	{ipset.Set{Name: "EXCLUDE", Type: ipset.HashNet, Family: ipset.INET},
		[]ipset.Entry{{Net: prefix("10.0.0.0/8")}, {Net: prefix("10.1.0.0/16"), NoMatch: true}}},
	{ipset.Set{Name: "EXCLUDE6", Type: ipset.HashNet, Family: ipset.INET6},
		[]ipset.Entry{{Net: prefix("fd00::/8")}}},
	{ipset.Set{Name: "KUBE-NODE-PORT-TCP", Type: ipset.BitmapPort, PortFrom: 0, PortTo: 65535},
		[]ipset.Entry{{Port: 30080}, {Port: 31000}}},
	{ipset.Set{Name: "EXT", Type: ipset.HashIPPort, Family: ipset.INET, Counters: true, Comment: true, HashSize: 64, MaxElem: 100},
		[]ipset.Entry{{IP: addr("10.96.0.20"), Proto: ipset.TCP, Port: 80, Comment: "default/web:http", Packets: 3, Bytes: 180}}},
}

// cliSave is what `ipset save` must print for cliSets (hand-written from the
// ipset manual's syntax; bucketsize and the random initval are dropped
// before comparing, add lines are sorted within each set).
const cliSave = `create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
add KUBE-CLUSTER-IP 10.96.0.1,tcp:443
add KUBE-CLUSTER-IP 10.96.0.10,udp:53
add KUBE-CLUSTER-IP 10.96.5.5,sctp:9
create KUBE-6-CLUSTER-IP hash:ip,port family inet6 hashsize 1024 maxelem 65536
add KUBE-6-CLUSTER-IP fd00:96::a,udp:53
create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536
add KUBE-LOOP-BACK 10.244.1.5,tcp:8080,10.244.1.5
create KUBE-6-LOOP-BACK hash:ip,port,ip family inet6 hashsize 1024 maxelem 65536
add KUBE-6-LOOP-BACK fd00:244::5,tcp:8080,fd00:244::5
create KUBE-LB-SOURCE-CIDR hash:ip,port,net family inet hashsize 1024 maxelem 65536
add KUBE-LB-SOURCE-CIDR 203.0.113.7,tcp:80,198.51.100.0/24
add KUBE-LB-SOURCE-CIDR 203.0.113.7,tcp:80,198.51.100.128/25 nomatch
create KUBE-6-LB-SOURCE-CIDR hash:ip,port,net family inet6 hashsize 1024 maxelem 65536
add KUBE-6-LB-SOURCE-CIDR 2001:db8::7,udp:80,2001:db8:1::/48
create KUBE-IPVS-IPS hash:ip family inet hashsize 1024 maxelem 65536
add KUBE-IPVS-IPS 10.96.0.10
create KUBE-6-IPVS-IPS hash:ip family inet6 hashsize 1024 maxelem 65536
add KUBE-6-IPVS-IPS fd00:96::a
create EXCLUDE hash:net family inet hashsize 1024 maxelem 65536
add EXCLUDE 10.0.0.0/8
add EXCLUDE 10.1.0.0/16 nomatch
create EXCLUDE6 hash:net family inet6 hashsize 1024 maxelem 65536
add EXCLUDE6 fd00::/8
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
add KUBE-NODE-PORT-TCP 30080
add KUBE-NODE-PORT-TCP 31000
create EXT hash:ip,port family inet hashsize 64 maxelem 100 counters comment
add EXT 10.96.0.20,tcp:80 packets 3 bytes 180 comment "default/web:http"
`

var volatile = regexp.MustCompile(` (bucketsize \d+|initval 0x[0-9a-f]+)`)

// normalizeSave drops the volatile create options and sorts the add lines
// of each set.
func normalizeSave(s string) string {
	var out, adds []string
	flush := func() {
		slices.Sort(adds)
		out = append(out, adds...)
		adds = nil
	}
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if strings.HasPrefix(l, "add ") {
			adds = append(adds, l)
			continue
		}
		flush()
		out = append(out, volatile.ReplaceAllString(l, ""))
	}
	flush()
	return strings.Join(out, "\n") + "\n"
}

// TestCLISave: what this package writes, `ipset save` prints exactly.
func TestCLISave(t *testing.T) {
	nstest.LookPath(t, "ipset")
	c, ns := dial(t, ipset.Config{})
	for _, s := range cliSets {
		if err := c.Create(s.set); err != nil {
			t.Fatal(err)
		}
		if err := c.Add(s.set.Name, s.entries); err != nil {
			t.Fatal(err)
		}
	}
	got := normalizeSave(ns.MustRun(t, "ipset", "save"))
	if d := cmp.Diff(cliSave, got); d != "" {
		t.Errorf("ipset save -want +got:\n%s", d)
	}
}

// TestCLIRestore: what `ipset restore` loads, this package lists exactly.
func TestCLIRestore(t *testing.T) {
	nstest.LookPath(t, "ipset")
	c, ns := dial(t, ipset.Config{})
	err := ns.Do(func() error {
		cmd := exec.Command("ipset", "restore")
		cmd.Stdin = strings.NewReader(cliSave)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("ipset restore: %s", out)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	names, err := c.ListNames()
	if err != nil {
		t.Fatal(err)
	}
	var wantNames []string
	for _, s := range cliSets {
		wantNames = append(wantNames, s.set.Name)
	}
	if d := cmp.Diff(wantNames, names); d != "" {
		t.Errorf("ListNames -want +got:\n%s", d)
	}
	for _, s := range cliSets {
		h, entries, err := c.List(s.set.Name)
		if err != nil {
			t.Fatal(err)
		}
		want := s.set
		if want.Type.IsHash() {
			if want.HashSize == 0 {
				want.HashSize = 1024
			}
			if want.MaxElem == 0 {
				want.MaxElem = 65536
			}
		}
		if d := cmp.Diff(want, h.Set); d != "" {
			t.Errorf("List(%s) header -want +got:\n%s", s.set.Name, d)
		}
		if h.Elements != uint32(len(s.entries)) {
			t.Errorf("List(%s) Elements = %d, want %d", s.set.Name, h.Elements, len(s.entries))
		}
		sortE := cmpopts.SortSlices(func(a, b ipset.Entry) bool { return a.String() < b.String() })
		if d := cmp.Diff(s.entries, entries, sortE, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
			t.Errorf("List(%s) entries -want +got:\n%s", s.set.Name, d)
		}
	}
}
