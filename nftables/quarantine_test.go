package nftables

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// TestRefusedObjectService: the objects named after a service port map
// to its service; those of no one service (base chains, shared sets, an
// element with neither a service's verdict nor a comment) to none.
func TestRefusedObjectService(t *testing.T) {
	svc := client.ServiceKey{Namespace: "ns1", Name: "svc1"}
	se := &client.ServiceEndpoints{Service: &client.Service{Namespace: "ns1", Name: "svc1",
		ClusterIPs: client.IPs{V4: []netip.Addr{netip.MustParseAddr("10.96.0.10")}}}}
	s := client.NewSnapshot([]*client.ServiceEndpoints{se}, nil)
	none := client.ServiceKey{}
	tests := []struct {
		name string
		got  func() (client.ServiceKey, bool)
		want client.ServiceKey
	}{
		{"service chain", func() (client.ServiceKey, bool) { return chainService("service-ULMVA6XW-ns1/svc1/tcp/p80") }, svc},
		{"external chain", func() (client.ServiceKey, bool) { return chainService("external-ULMVA6XW-ns1/svc1/tcp/p80") }, svc},
		{"endpoint chain", func() (client.ServiceKey, bool) {
			return chainService("endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80")
		}, svc},
		{"base chain services", func() (client.ServiceKey, bool) { return chainService("services") }, none},
		{"service-endpoints-check", func() (client.ServiceKey, bool) { return chainService("service-endpoints-check") }, none},
		{"truncated name", func() (client.ServiceKey, bool) { return chainService("service-ULMVA6XW-ns1/svc...") }, none},
		{"affinity set", func() (client.ServiceKey, bool) {
			return setService("affinity-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80")
		}, svc},
		{"shared set", func() (client.ServiceKey, bool) { return setService("cluster-ips") }, none},
		{"element's verdict", func() (client.ServiceKey, bool) {
			return elementService("service-ips", ruleset.Element{Key: "10.96.0.10 . tcp . 80", Value: "goto service-ULMVA6XW-ns1/svc1/tcp/p80"}, s)
		}, svc},
		{"element's comment", func() (client.ServiceKey, bool) {
			return elementService("no-endpoint-services", ruleset.Element{Key: "10.96.0.10 . tcp . 80", Value: "goto reject-chain", Comment: "ns1/svc1:p80"}, s)
		}, svc},
		{"cluster IP", func() (client.ServiceKey, bool) {
			return elementService("cluster-ips", ruleset.Element{Key: "10.96.0.10"}, s)
		}, svc},
		{"unknown cluster IP", func() (client.ServiceKey, bool) {
			return elementService("cluster-ips", ruleset.Element{Key: "10.96.0.11"}, s)
		}, none},
		{"node port address", func() (client.ServiceKey, bool) {
			return elementService("nodeport-ips", ruleset.Element{Key: "192.168.0.2"}, s)
		}, none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.got()
			if ok != (tt.want != none) {
				t.Errorf("mapped %v, want %v", ok, tt.want != none)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("service (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOpAt: the transaction's operations map back to the plan's, a rule
// with its anonymous sets and their elements counting as one.
func TestOpAt(t *testing.T) {
	ops := []op{{kind: opAddTable, label: "t"}, {kind: opAddRule, label: "r", rule: &compiledRule{anon: []anonSet{{elems: make([]nft.Elem, 1)}, {}}}},
		{kind: opAddElems, label: "e"}}
	var got []string
	for i := range 6 {
		if o := opAt(ops, i); o != nil {
			got = append(got, o.label)
		} else {
			got = append(got, "-")
		}
	}
	// t; r's anonymous set, its elements, the second set, the rule; e.
	if diff := cmp.Diff([]string{"t", "r", "r", "r", "r", "e"}, got); diff != "" {
		t.Errorf("ops (-want +got):\n%s", diff)
	}
	if opAt(ops, 6) != nil {
		t.Errorf("an operation past the end")
	}
}

// TestSyncQuarantine: on the fake kernel, a refused rule of one service's
// chain quarantines the service and the rest is written, the table then
// what a fresh write of the held snapshot gives; once the refusal ends a
// Resync writes it and empties the quarantine.
func TestSyncQuarantine(t *testing.T) {
	k := newFakeKernel()
	cfg := generatedConfig()
	var faulty *client.ServiceEndpoints
	render := func(s *client.Snapshot, v6 bool) (*ruleset.Ruleset, error) {
		rs, err := ruleset.RenderFamily(s, &cfg, v6)
		if se := s.Lookup(badKey); se != nil && se == faulty {
			injectRule(rs, badKey)
		}
		return rs, err
	}
	newProxier := func(k *fakeKernel) *Proxier {
		return &Proxier{cfg: Config{IPv4: true}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), k: k,
			comp: &fakeCompiler{}, fams: []*family{{name: "ip", fam: nft.FamilyIPv4}}, render: render}
	}
	// fresh is the table a fresh Proxier writes for s.
	fresh := func(s *client.Snapshot) map[string]string {
		fk := newFakeKernel()
		if _, err := newProxier(fk).Snapshot(s); err != nil {
			t.Fatal(err)
		}
		return canonTable(t, fk.tables[nft.FamilyIPv4])
	}
	k.refuseIf = func(o *op) bool { return o.kind == opAddRule && fakeText(o.rule.rule.Exprs) == "jump no-such-chain" }
	p := newProxier(k)
	s0 := generated(5, 2, netip.Addr{})
	if _, err := p.Snapshot(s0); err != nil {
		t.Fatal(err)
	}
	faulty = variant(2, 3)
	s1 := replaced(s0, variant(0, 3), faulty)
	st, err := p.Snapshot(s1)
	if err != nil || st.Failures != 1 || st.Transactions != 1 {
		t.Fatalf("sync with one service refused: %+v, %v; want one refusal, one transaction, no error", st, err)
	}
	if e := p.Quarantined(); len(e) != 1 || e[0].Name != "bench/svc-000002" || e[0].Service != "svc-000002" {
		t.Fatalf("quarantined %+v, want bench/svc-000002", e)
	}
	if diff := cmp.Diff(fresh(replaced(s1, s0.Lookup(badKey))), canonTable(t, k.tables[nft.FamilyIPv4])); diff != "" {
		t.Fatalf("table (-held snapshot written fresh +got):\n%s", diff)
	}
	faulty = nil
	if st, err := p.Resync(); err != nil || st.Transactions != 1 || len(p.Quarantined()) != 0 {
		t.Fatalf("resync once the refusal ended: %+v, %v, quarantined %+v", st, err, p.Quarantined())
	}
	if diff := cmp.Diff(fresh(s1), canonTable(t, k.tables[nft.FamilyIPv4])); diff != "" {
		t.Fatalf("table after the resync (-fresh +got):\n%s", diff)
	}
}
