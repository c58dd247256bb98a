package nftables

import (
	"bytes"
	"github.com/proxysinks/proxysinks/host/xtables"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// TestDryRun checks that a dry run prints each family's ruleset as an nft
// script when it changes, and touches no kernel (NewProxier dials
// nothing: the test runs unprivileged).
func TestDryRun(t *testing.T) {
	s, cfg := broad(t)
	var out bytes.Buffer
	p, err := NewProxier(Config{IPv4: true, Ruleset: cfg, DryRun: &out})
	if err != nil {
		t.Fatal(err)
	}
	if p.k != nil {
		t.Fatal("a dry-run Proxier has a kernel connection")
	}
	st, err := p.Snapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ruleset.RenderFamily(s, &cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rs.Script(), out.String()); diff != "" {
		t.Errorf("dry-run output (-want +got):\n%s", diff)
	}
	if st.Transactions != 1 {
		t.Errorf("first dry-run sync: %+v", st)
	}
	out.Reset()
	if st, err := p.Resync(); err != nil || st.Transactions != 0 || out.Len() != 0 {
		t.Errorf("resync of an unchanged cluster printed %q (%+v, %v)", out.String(), st, err)
	}
	if n := p.RulesTotal()["ip"]; n == 0 || n != countRules(rs) {
		t.Errorf("RulesTotal = %d, want %d", n, countRules(rs))
	}
}

// TestDryRunSetNodePorts: SetNodePorts and SetLocal change what the next
// sync renders.
func TestDryRunSetNodePorts(t *testing.T) {
	s, cfg := broad(t)
	var out bytes.Buffer
	p, err := NewProxier(Config{IPv4: true, Ruleset: cfg, DryRun: &out})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Snapshot(s); err != nil {
		t.Fatal(err)
	}
	node := netip.MustParseAddr("192.168.0.77")
	p.SetNodePorts([]netip.Prefix{netip.PrefixFrom(node, 32)}, []netip.Addr{node})
	out.Reset()
	if _, err := p.Resync(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "add element ip kube-proxy nodeport-ips { 192.168.0.77 }") {
		t.Errorf("script after SetNodePorts lacks the new node port address:\n%s", out.String())
	}
	p.SetLocal(xtables.LocalTraffic{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.128.0.0/9")}})
	out.Reset()
	if _, err := p.Resync(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "ip saddr != 10.128.0.0/9") {
		t.Errorf("script after SetLocal lacks the new pod CIDR:\n%s", out.String())
	}
}
