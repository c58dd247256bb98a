package iptables

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/nfacct"
)

// fakeAccounting creates the objects it is asked for, except those in
// fail.
type fakeAccounting struct {
	fail    map[string]bool
	ensured []string
}

func (f *fakeAccounting) Ensure(name string) error {
	f.ensured = append(f.ensured, name)
	if f.fail[name] {
		return errors.New("nfacct: create " + name + ": operation not supported")
	}
	return nil
}

// TestAccountingRules: with kube-proxy's nfacct objects the INVALID drop
// and the localhost node-port rules count into them, as kube-proxy v1.37.2
// writes them; an object that cannot be made leaves its rules without the
// match; the INVALID drop exists only while nf_conntrack_tcp_be_liberal is
// 0.
func TestAccountingRules(t *testing.T) {
	const invalid = "-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts -j DROP"
	const plain = "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP"
	np := "-A KUBE-NODEPORTS -d 127.0.0.0/8 -p tcp -m comment --comment \"default/np\" -m tcp --dport 30080 -m nfacct --nfacct-name  localhost_nps_accepted_pkts -j " + ExternalChain("default/np", "tcp")
	svc := svcSpec{name: "np", typ: client.NodePort, clusterIPs: []string{"10.96.0.40"},
		ports: []client.Port{withNodePort(tcp("", 80, 8080), 30080)}, eps: []ep{{ip: "10.244.1.9"}}}
	for _, tc := range []struct {
		name               string
		acct               *fakeAccounting
		localhost, liberal bool
		want, wantNot      []string
	}{
		{"both objects", &fakeAccounting{}, true, false, []string{invalid, np}, []string{plain}},
		{"no localhost node ports", &fakeAccounting{}, false, false, []string{invalid}, []string{np}},
		{"objects missing", &fakeAccounting{fail: map[string]bool{AcctInvalidDropped: true, AcctLocalhostNodePorts: true}}, true, false, []string{plain}, []string{invalid, np}},
		{"tcp_be_liberal: no INVALID drop", &fakeAccounting{}, true, true, []string{np}, []string{invalid, plain}},
		{"no accounting (dry run)", nil, true, false, []string{plain}, []string{invalid, np}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, out := dryRun(t, func(c *Config) {
				c.LocalhostNodePorts, c.TCPBeLiberal = tc.localhost, tc.liberal
				if tc.acct != nil {
					c.Accounting = tc.acct
				}
			})
			if _, err := p.Snapshot(snapshot(svc)); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w+"\n") {
					t.Errorf("lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(out.String(), w+"\n") {
					t.Errorf("has %q", w)
				}
			}
		})
	}
}

// TestKernelAccounting: with the kernel's nfacct objects the rules are
// what iptables-save prints back (a resync writes nothing), and a packet
// to a localhost node port is counted in localhost_nps_accepted_pkts.
func TestKernelAccounting(t *testing.T) {
	p, ns := kernelProxier(t, xtables.NFT, func(c *Config) { c.LocalhostNodePorts, c.CompareEvery, c.IPv6 = true, 1, false })
	acct, err := nfacct.Dial(&nfacct.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer acct.Close()
	p.cfg.Accounting = acct
	if _, err := p.Snapshot(snapshot(broad()...)); err != nil {
		t.Fatal(err)
	}
	saved := saveAll(t, p)
	for _, want := range []string{"--nfacct-name  " + AcctInvalidDropped, "-d 127.0.0.0/8 -p tcp", "--nfacct-name  " + AcctLocalhostNodePorts} {
		if !strings.Contains(saved, want) {
			t.Fatalf("kernel rules lack %q (kernel without nfacct?):\n%s", want, saved)
		}
	}
	if w := pendingWrites(t, p); w != "" {
		t.Fatalf("a resync after the first sync would write:\n%s", w)
	}
	// A connection from the node to 127.0.0.1:30080 (default/np) is
	// counted when its first packet crosses nat OUTPUT, wherever the
	// endpoint is.
	ns.Do(func() error {
		c, err := net.DialTimeout("tcp4", "127.0.0.1:30080", 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return nil
	})
	if c, err := acct.Get(AcctLocalhostNodePorts); err != nil || c.Packets == 0 {
		t.Errorf("%s after a connection to 127.0.0.1:30080: %+v, %v; want packets counted", AcctLocalhostNodePorts, c, err)
	}
	if _, err := acct.Get(AcctInvalidDropped); err != nil {
		t.Errorf("object %s: %v", AcctInvalidDropped, err)
	}
}
