package iptables

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
)

// canonicalCluster has what the canonical form shortens, in both
// families: services of 2, 3, 7, 10 and 33 endpoints (statistic
// probabilities), host addresses in -s and -d (cluster, external and
// load-balancer IPs, endpoints, host source ranges, the load-balancer IPs
// admitted as sources).
func canonicalCluster() []svcSpec {
	var out []svcSpec
	for i, n := range []int{2, 3, 7, 10, 33} {
		s := svcSpec{name: fmt.Sprintf("n%d", n), clusterIPs: []string{fmt.Sprintf("10.96.5.%d", i+1), fmt.Sprintf("fd00:96::5:%d", i+1)},
			ports: []client.Port{tcp("http", 80, 8080)}}
		for j := range n {
			s.eps = append(s.eps, ep{ip: fmt.Sprintf("10.244.%d.%d", 10+i, j+1), remote: j%2 == 1},
				ep{ip: fmt.Sprintf("fd00:244:%d::%d", 10+i, j+1), remote: j%2 == 1})
		}
		out = append(out, s)
	}
	return append(out, svcSpec{name: "lb", typ: client.LoadBalancer,
		clusterIPs: []string{"10.96.5.100", "fd00:96::5:100"}, externalIPs: []string{"198.51.100.20", "2001:db8:1::20"},
		lbIPs:  []string{"192.0.2.20", "2001:db8::20"},
		ranges: []string{"192.168.50.2/32", "203.0.113.7/32", "fd00:50::2/128", "2001:db8:2::/48"},
		ports:  []client.Port{withNodePort(tcp("https", 443, 8443), 30443)},
		eps: []ep{{ip: "10.244.20.1"}, {ip: "10.244.20.2", remote: true}, {ip: "10.244.20.3", remote: true},
			{ip: "fd00:244:20::1"}, {ip: "fd00:244:20::2", remote: true}, {ip: "fd00:244:20::3", remote: true}}})
}

// tamper rewrites a chain in the kernel as someone else would: its rules
// as iptables-save prints them, edit applied to each. It fails when edit
// changes nothing.
func tamper(t *testing.T, p *Proxier, f *family, table, chain string, edit func(string) string) {
	t.Helper()
	out, err := p.run(f.backend.Command(f.fc.fam, "save"), []string{"-t", table}, nil)
	if err != nil {
		t.Fatal(err)
	}
	input := "*" + table + "\n:" + chain + " - [0:0]\n"
	changed := false
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "-A "+chain+" ") {
			e := edit(l)
			changed = changed || e != l
			input += e + "\n"
		}
	}
	if !changed {
		t.Fatalf("nothing to tamper with in %s %s %s:\n%s", f.fc.fam, table, chain, out)
	}
	if _, err := p.run(f.backend.Command(f.fc.fam, "restore"), f.backend.RestoreArgs(), []byte(input+"COMMIT\n")); err != nil {
		t.Fatal(err)
	}
}

// TestKernelCanonicalForm: the rules are written in canonical form (host
// addresses without a prefix length, probabilities in their shortest
// decimals), which iptables-save prints otherwise ("/32", "/128", eleven
// decimals); after a first sync a restarted sink and a resync write
// nothing, and changes the canonical form must not hide (a probability one
// step of 2^-31 off, a host become a /31 or /127) are repaired.
func TestKernelCanonicalForm(t *testing.T) {
	mod := func(c *Config) {
		c.CompareEvery = 1 // every resync reads the kernel back
		c.NodeIPs = []netip.Addr{netip.MustParseAddr("192.168.50.2"), netip.MustParseAddr("fd00:50::2")}
		c.NodePortCIDRs = []netip.Prefix{netip.MustParsePrefix("192.168.50.0/24"), netip.MustParsePrefix("fd00:50::/64")}
		c.NodePortIPs = c.NodeIPs
	}
	saved := []*regexp.Regexp{ // what iptables-save prints and we do not write
		regexp.MustCompile(` -d 10\.96\.5\.2/32 `),
		regexp.MustCompile(` -s 10\.244\.11\.1/32 `),
		regexp.MustCompile(` -s fd00:244:11::1/128 `),
		regexp.MustCompile(` -s 203\.0\.113\.7/32 `),
		regexp.MustCompile(` -s 2001:db8::20/128 `),
		regexp.MustCompile(` -d fd00:50::2/128 `),
		regexp.MustCompile(` --probability 0\.\d{11} `),
	}
	for _, b := range []xtables.Backend{xtables.NFT, xtables.Legacy} {
		t.Run(string(b), func(t *testing.T) {
			var written strings.Builder
			p, ns := kernelProxier(t, b, mod)
			run := p.run
			p.run = func(name string, args []string, stdin []byte) ([]byte, error) {
				if strings.HasSuffix(name, "-restore") {
					written.Write(stdin)
				}
				return run(name, args, stdin)
			}
			specs := canonicalCluster()
			if st, err := p.Snapshot(snapshot(specs...)); err != nil || st.Restores == 0 {
				t.Fatalf("first sync: %+v, %v; want a sync that writes", st, err)
			}
			kernel := saveAll(t, p)
			for _, re := range saved {
				if !re.MatchString(kernel) {
					t.Errorf("iptables-save prints no %q; kernel:\n%s", re, kernel)
				}
				if re.MatchString(written.String()) {
					t.Errorf("the restore input has %q:\n%s", re, written.String())
				}
			}

			// A restart with an unchanged cluster, then a resync: nothing
			// to write.
			p = proxierIn(t, ns, b, mod)
			if st, err := p.Snapshot(snapshot(specs...)); err != nil || st.Restores != 0 {
				t.Fatalf("first sync after a restart: %+v, %v; want nothing written; would write:\n%s", st, err, pendingWrites(t, p))
			}
			if st, err := p.Resync(); err != nil || st.Restores != 0 {
				t.Fatalf("resync: %+v, %v; want nothing written", st, err)
			}

			n3 := PortName("default", "n3", "http")
			for _, tc := range []struct {
				name         string
				v6           bool
				table, chain string
				edit         func(string) string
			}{
				{"probability one step of 2^-31 lower", false, "nat", ServiceChain(n3, "tcp"), func(l string) string {
					at := strings.Index(l, "--probability ")
					if at < 0 {
						return l
					}
					at += len("--probability ")
					end := at + strings.IndexByte(l[at:], ' ')
					x, err := strconv.ParseFloat(l[at:end], 64)
					if err != nil {
						t.Fatal(err)
					}
					v := math.Round(x * 0x80000000)
					return l[:at] + strconv.FormatFloat((v-1)/0x80000000, 'f', 11, 64) + l[end:]
				}},
				{"IPv4 cluster IP a /31", false, "nat", chainServices, func(l string) string {
					return strings.Replace(l, " -d 10.96.5.2/32 ", " -d 10.96.5.2/31 ", 1)
				}},
				{"IPv6 endpoint a /127", true, "nat", EndpointChain(n3, "tcp", "[fd00:244:11::2]:8080"), func(l string) string {
					return strings.Replace(l, " -s fd00:244:11::2/128 ", " -s fd00:244:11::2/127 ", 1)
				}},
				{"IPv6 source range a /127", true, "nat", FirewallChain(PortName("default", "lb", "https"), "tcp"), func(l string) string {
					return strings.Replace(l, " -s fd00:50::2/128 ", " -s fd00:50::2/127 ", 1)
				}},
			} {
				f := p.fams[0]
				if tc.v6 {
					f = p.fams[1]
				}
				tamper(t, p, f, tc.table, tc.chain, tc.edit)
				if w := pendingWrites(t, p); w == "" {
					t.Fatalf("%s: a resync would write nothing; kernel:\n%s", tc.name, saveAll(t, p))
				}
				if st, err := p.Resync(); err != nil || st.Restores == 0 {
					t.Fatalf("%s: resync %+v, %v; want a repair", tc.name, st, err)
				}
				if w := pendingWrites(t, p); w != "" {
					t.Fatalf("%s: after the repair a resync would still write:\n%s", tc.name, w)
				}
			}
		})
	}
}
