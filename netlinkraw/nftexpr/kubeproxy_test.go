package nftexpr

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// kubeShaped returns a table shaped like kube-proxy v1.37.2's nftables
// mode (proxier.go's setup and per-service rules, in its words) for n
// services with eps endpoints each, cycling through six kinds: ClusterIP,
// ClusterIP UDP with several endpoints, NodePort SCTP, LoadBalancer with
// source ranges and externalTrafficPolicy Local, session affinity, and no
// endpoints.
func kubeShaped(family nft.Family, n, eps int) *scriptTable {
	g := kubeGen{family: family, ip: "ip", podCIDR: "10.0.0.0/8", svcCIDR: "172.30.0.0/16", local: "127.0.0.0/8"}
	if family == nft.FamilyIPv6 {
		g.ip, g.podCIDR, g.svcCIDR, g.local = "ip6", "fd00:10::/64", "fd00:172:30::/112", "::1"
	}
	st := &scriptTable{family: family, name: "kube-proxy", comment: "rules for kube-proxy", sets: kubeSets(family)[:9]}
	g.st = st
	g.setup()
	for i := range n {
		g.service(i, eps)
	}
	return st
}

type kubeGen struct {
	st                          *scriptTable
	family                      nft.Family
	ip, podCIDR, svcCIDR, local string
}

func (g *kubeGen) rule(chain, text, comment string) {
	g.st.rules = append(g.st.rules, ruleDef{chain, text, comment})
}

func (g *kubeGen) elem(set, key, value, comment string) {
	g.st.elems = append(g.st.elems, elemDef{set, key, value, comment})
}

func (g *kubeGen) chain(name string) { g.st.chains = append(g.st.chains, chainDef{name: name}) }

// addr returns the n-th address after base in the generator's family.
func (g *kubeGen) addr(v4, v6 string, n int) string {
	base := v4
	if g.family == nft.FamilyIPv6 {
		base = v6
	}
	a := netip.MustParseAddr(base).As16()
	binary.BigEndian.PutUint32(a[12:], binary.BigEndian.Uint32(a[12:])+uint32(n))
	out := netip.AddrFrom16(a)
	if g.family == nft.FamilyIPv4 {
		out = out.Unmap()
	}
	return out.String()
}

func (g *kubeGen) setup() {
	g.st.chains = append(g.st.chains, kubeChains()[:9]...)
	for _, c := range []string{"nodeport-endpoints-check", "service-endpoints-check", "firewall-check", "services", "masquerading", "cluster-ips-check"} {
		g.chain(c)
	}
	for _, j := range []struct{ to, from, extra string }{
		{"nodeport-endpoints-check", "filter-input", "ct state new "}, {"service-endpoints-check", "filter-input", "ct state new "},
		{"service-endpoints-check", "filter-forward", "ct state new "}, {"service-endpoints-check", "filter-output", "ct state new "},
		{"firewall-check", "filter-prerouting-pre-dnat", "ct state new "}, {"firewall-check", "filter-output-pre-dnat", "ct state new "},
		{"services", "nat-output", ""}, {"services", "nat-prerouting", ""}, {"masquerading", "nat-postrouting", ""},
		{"cluster-ips-check", "filter-forward", "ct state new "}, {"cluster-ips-check", "filter-output", "ct state new "},
	} {
		g.rule(j.from, j.extra+"jump "+j.to, "")
	}
	ip := g.ip
	g.rule("masquerading", "mark and 0x00004000 != 0 mark set mark xor 0x00004000 masquerade fully-random", "")
	g.rule("masquerading", fmt.Sprintf("ct status dnat %s saddr . %s daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random", ip, ip), "")
	g.rule("cluster-ips-check", ip+" daddr @cluster-ips reject", "Reject traffic to invalid ports of ClusterIPs")
	g.rule("cluster-ips-check", fmt.Sprintf("%s daddr { %s } drop", ip, g.svcCIDR), "Drop traffic to unallocated ClusterIPs")
	g.rule("reject-chain", "reject", "")
	g.rule("service-endpoints-check", ip+" daddr . meta l4proto . th dport vmap @no-endpoint-services", "")
	g.rule("nodeport-endpoints-check", fmt.Sprintf("%s daddr != %s meta l4proto . th dport vmap @no-endpoint-nodeports", ip, g.local), "")
	g.rule("firewall-check", ip+" daddr . meta l4proto . th dport vmap @firewall-ips", "")
	g.rule("services", fmt.Sprintf("%s daddr @cluster-ips %s saddr != %s mark set mark or 0x00004000", ip, ip, g.podCIDR), "masquerade clusterIP traffic from outside cluster")
	g.rule("services", ip+" daddr . meta l4proto . th dport vmap @service-ips", "")
	g.rule("services", fmt.Sprintf("fib daddr type local %s daddr != %s meta l4proto . th dport vmap @service-nodeports", ip, g.local), "")
}

// service writes service i's chains, rules and elements.
func (g *kubeGen) service(i, eps int) {
	kind := i % 6
	proto := [...]string{"tcp", "udp", "sctp", "tcp", "tcp", "tcp"}[kind]
	name := fmt.Sprintf("ns%d/svc%d/%s/p80", i/100, i, proto)
	hash := fmt.Sprintf("%08X", uint32(i)*2654435761)
	svcChain, extChain, fwChain := "service-"+hash+"-"+name, "external-"+hash+"-"+name, "firewall-"+hash+"-"+name
	clusterIP := g.addr("172.30.0.0", "fd00:172:30::", i+1)
	lbIP := g.addr("198.18.0.0", "2001:db8:18::", i+1)
	nodePort := fmt.Sprint(30000 + i%2700)
	var endpoints []string
	for e := range eps {
		endpoints = append(endpoints, g.addr("10.180.0.0", "fd00:10:180::", i*eps+e+1))
	}
	g.elem("cluster-ips", clusterIP, "", "")
	if kind == 5 {
		comment := fmt.Sprintf("ns%d/svc%d:p80", i/100, i)
		g.elem("no-endpoint-services", clusterIP+" . "+proto+" . 80", "goto reject-chain", comment)
		g.elem("no-endpoint-nodeports", proto+" . "+nodePort, "drop", comment)
		return
	}
	g.chain(svcChain)
	g.elem("service-ips", clusterIP+" . "+proto+" . 80", "goto "+svcChain, "")
	for _, ep := range endpoints {
		g.elem("hairpin-connections", ep+" . "+ep+" . "+proto+" . 8080", "", "")
	}
	switch kind {
	case 2, 3:
		g.chain(extChain)
		g.elem("service-nodeports", proto+" . "+nodePort, "goto "+extChain, "")
		if kind == 2 {
			g.rule(extChain, "mark set mark or 0x00004000", "masquerade")
		} else {
			g.rule(extChain, g.ip+" saddr "+g.podCIDR+" goto "+svcChain, "short-circuit pod traffic")
			g.rule(extChain, "fib saddr type local mark set mark or 0x00004000", "masquerade local traffic")
			g.rule(extChain, "fib saddr type local goto "+svcChain, "short-circuit local traffic")
			g.chain(fwChain)
			ranges := "203.0.113.0/25 , 192.168.0.0/16"
			if g.family == nft.FamilyIPv6 {
				ranges = "2001:db8:203::/64 , 2001:db8:1::/48"
			}
			g.rule(fwChain, fmt.Sprintf("%s saddr != { %s , %s } drop", g.ip, ranges, lbIP), "")
			g.elem("service-ips", lbIP+" . "+proto+" . 80", "goto "+extChain, "")
			g.elem("firewall-ips", lbIP+" . "+proto+" . 80", "goto "+fwChain, "")
		}
		g.rule(extChain, "goto "+svcChain, "")
	case 4:
		g.affinity(hash, name, svcChain, proto, endpoints)
		return
	}
	g.dnat(svcChain, proto, endpoints)
}

func (g *kubeGen) hostPort(ep string) string {
	if g.family == nft.FamilyIPv6 {
		return "[" + ep + "]:8080"
	}
	return ep + ":8080"
}

func (g *kubeGen) dnat(chain, proto string, endpoints []string) {
	if len(endpoints) == 1 {
		g.rule(chain, "meta l4proto "+proto+" dnat to "+g.hostPort(endpoints[0]), "")
		return
	}
	var m []string
	for i, ep := range endpoints {
		m = append(m, fmt.Sprintf("%d : %s . 8080", i, ep))
	}
	g.rule(chain, fmt.Sprintf("meta l4proto %s dnat %s addr . port to numgen random mod %d map { %s }", proto, g.ip, len(endpoints), strings.Join(m, " , ")), "")
}

func (g *kubeGen) affinity(hash, name, svcChain, proto string, endpoints []string) {
	addrType := "ipv4_addr"
	if g.family == nft.FamilyIPv6 {
		addrType = "ipv6_addr"
	}
	var vmap []string
	for i, ep := range endpoints {
		suffix := "-" + name + "__" + strings.ReplaceAll(ep, ":", ".") + "/8080"
		set, chain := "affinity-"+hash+suffix, "endpoint-"+hash+suffix
		g.st.sets = append(g.st.sets, SetDef{Name: set, Type: addrType, Flags: []string{"dynamic", "timeout"}, Timeout: 10800 * time.Second})
		g.chain(chain)
		g.rule(svcChain, fmt.Sprintf("%s saddr @%s goto %s", g.ip, set, chain), "")
		g.rule(chain, fmt.Sprintf("update @%s { %s saddr }", set, g.ip), "")
		g.rule(chain, "meta l4proto "+proto+" dnat to "+g.hostPort(ep), "")
		vmap = append(vmap, fmt.Sprintf("%d : goto %s", i, chain))
	}
	g.rule(svcChain, fmt.Sprintf("numgen random mod %d vmap { %s }", len(endpoints), strings.Join(vmap, " , ")), "")
}
