package differential

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNormalizeNFT checks the nft listing's normalization: one line per
// property, rule and element, prefixed by its object; counter values,
// expiry and element order dropped; rule order kept by chain.
func TestNormalizeNFT(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     NFTListing
	}{{
		name: "chains keep rule order, properties apart",
		in: `table ip kube-proxy {
	comment "rules for kube-proxy"
	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		jump services
		counter packets 12 bytes 720 jump other
	}
	chain reject-chain {
		comment "helper"
		reject
	}
	chain empty {
	}
}
`,
		want: NFTListing{
			Lines: []string{
				"chain empty",
				"chain nat-prerouting",
				"chain nat-prerouting: counter jump other",
				"chain nat-prerouting: jump services",
				"chain nat-prerouting: type nat hook prerouting priority dstnat; policy accept;",
				"chain reject-chain",
				`chain reject-chain: comment "helper"`,
				"chain reject-chain: reject",
				`table: comment "rules for kube-proxy"`,
			},
			Chains: map[string][]string{
				"chain nat-prerouting": {"jump services", "counter jump other"},
				"chain reject-chain":   {"reject"},
			},
		},
	}, {
		name: "elements one line each, sorted, across lines, with comments and braces",
		in: `table ip6 kube-proxy {
	map no-endpoint-services {
		type ipv6_addr . inet_proto . inet_service : verdict
		comment "vmap, with a comma"
		elements = { fd00::2 . tcp . 80 comment "a/b:c, d" : goto reject-chain,
			     fd00::1 . udp . 53 : drop }
	}
	set affinity-X {
		type ipv6_addr
		flags dynamic,timeout
		timeout 3h
		elements = { fd00::9 timeout 3h expires 2h59m58s }
	}
	set one {
		type ipv6_addr
		elements = { fd00::7 counter packets 3 bytes 180 }
	}
}
`,
		want: NFTListing{
			Lines: []string{
				"map no-endpoint-services",
				`map no-endpoint-services: comment "vmap, with a comma"`,
				`map no-endpoint-services: element fd00::1 . udp . 53 : drop`,
				`map no-endpoint-services: element fd00::2 . tcp . 80 comment "a/b:c, d" : goto reject-chain`,
				"map no-endpoint-services: type ipv6_addr . inet_proto . inet_service : verdict",
				"set affinity-X",
				"set affinity-X: element fd00::9 timeout 3h",
				"set affinity-X: flags dynamic,timeout",
				"set affinity-X: timeout 3h",
				"set affinity-X: type ipv6_addr",
				"set one",
				"set one: element fd00::7 counter",
				"set one: type ipv6_addr",
			},
			Chains: map[string][]string{},
		},
	}, {
		name: "named counters lose their values",
		in: `table ip kube-proxy {
	counter localhost-nodeport-rejected-tcp {
		comment "localhost NodePorts rejected by kube-proxy"
		packets 4 bytes 240
	}
	chain nodeports {
		meta l4proto tcp counter name "localhost-nodeport-rejected-tcp" reject
	}
}
`,
		want: NFTListing{
			Lines: []string{
				"chain nodeports",
				`chain nodeports: meta l4proto tcp counter name "localhost-nodeport-rejected-tcp" reject`,
				"counter localhost-nodeport-rejected-tcp",
				`counter localhost-nodeport-rejected-tcp: comment "localhost NodePorts rejected by kube-proxy"`,
			},
			Chains: map[string][]string{
				"chain nodeports": {`meta l4proto tcp counter name "localhost-nodeport-rejected-tcp" reject`},
			},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NormalizeNFT(tc.in)); diff != "" {
				t.Errorf("NormalizeNFT (-want +got):\n%s", diff)
			}
		})
	}
}
