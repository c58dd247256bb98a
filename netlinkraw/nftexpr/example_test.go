package nftexpr_test

import (
	"fmt"
	"os"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/netlinkraw/nftexpr"
)

// Compile a service-dispatch map, one of its elements and a rule that
// looks it up, and print the rule as `nft --debug=netlink` does.
func Example() {
	tab, err := nftexpr.NewTable(nft.FamilyIPv4)
	if err != nil {
		panic(err)
	}
	// ID 0: rules refer to the map by name.
	if _, err := tab.AddSet(nftexpr.SetDef{Name: "service-ips", Type: "ipv4_addr . inet_proto . inet_service : verdict"}, 0); err != nil {
		panic(err)
	}
	e, err := tab.Elem("service-ips", "172.30.0.41 . tcp . 80", "goto service-ns1/svc1", "")
	if err != nil {
		panic(err)
	}
	fmt.Printf("key %x, verdict %d %s\n", e.Key, e.Verdict.Code, e.Verdict.Chain)

	ids := uint32(0)
	newID := func() uint32 { ids++; return ids } // a transaction's set IDs (nft.Tx.NewSetID)
	r, err := tab.Rule("services", "ip daddr . meta l4proto . th dport vmap @service-ips", "", newID)
	if err != nil {
		panic(err)
	}
	_ = nftexpr.FormatRule(os.Stdout, nft.FamilyIPv4, "kube-proxy", r.Rule)

	r, err = tab.Rule("service-ns1/svc1", "meta l4proto tcp dnat ip addr . port to numgen random mod 2 map { 0 : 10.0.1.1 . 80 , 1 : 10.0.1.2 . 80 }", "", newID)
	if err != nil {
		panic(err)
	}
	for _, s := range r.Sets {
		_ = nftexpr.FormatSet(os.Stdout, "kube-proxy", s.Set)
		_ = nftexpr.FormatElems(os.Stdout, "kube-proxy", s.Set.Name, s.Elems)
	}
	_ = nftexpr.FormatRule(os.Stdout, nft.FamilyIPv4, "kube-proxy", r.Rule)
	// Output:
	// key ac1e00290600000000500000, verdict -4 service-ns1/svc1
	// ip kube-proxy services
	//   [ payload load 4b @ network header + 16 => reg 1 ]
	//   [ meta load l4proto => reg 9 ]
	//   [ payload load 2b @ transport header + 2 => reg 10 ]
	//   [ lookup reg 1 set service-ips dreg 0 ]
	//
	// __map%d kube-proxy b size 2
	// __map%d kube-proxy 0
	// 	element 00000000  : 0101000a 00005000 0 [end]	element 00000001  : 0201000a 00005000 0 [end]
	// ip kube-proxy service-ns1/svc1
	//   [ meta load l4proto => reg 1 ]
	//   [ cmp eq reg 1 0x00000006 ]
	//   [ numgen reg 1 = random mod 2 ]
	//   [ lookup reg 1 set __map%d dreg 1 ]
	//   [ nat dnat ip addr_min reg 1 proto_min reg 9 ]
}
