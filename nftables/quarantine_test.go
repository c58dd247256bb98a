package nftables

import (
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
