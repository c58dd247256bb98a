package cluster

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// svcObj is a hostile Service object.
func svcObj(via Via, class string, s *corev1.Service) HostileObject {
	return HostileObject{Via: via, Class: class, Service: s}
}

// hostileAPI are the hostile objects a strict apiserver accepts.
func hostileAPI() []HostileObject {
	annotated := hsvc("h-lb-beta", 4, lb(31004))
	annotated.Annotations = map[string]string{corev1.AnnotationLoadBalancerSourceRangesKey: "203.0.113.0/24"}
	terminating := discoveryv1.EndpointConditions{Ready: &no, Terminating: &yes}
	terminatingNotServing := discoveryv1.EndpointConditions{Ready: &no, Serving: &no, Terminating: &yes}
	otherPort := "other"
	portMismatch := hslice("h-slice-ports-a", "h-slice-ports", discoveryv1.AddressTypeIPv4, hep("10.244.5.14", nodeB, readyEP))
	portMismatch.Ports[0].Name = &otherPort
	portNil := hslice("h-slice-ports-b", "h-slice-ports", discoveryv1.AddressTypeIPv4, hep("10.244.5.15", nodeB, readyEP))
	portNil.Ports[0].Port = nil
	fqdn := hslice("h-fqdn-fqdn", "h-fqdn", discoveryv1.AddressTypeFQDN, hep("backend.example.com", nodeB, readyEP))
	// kube-proxy ignores a slice labelled service.kubernetes.io/headless
	// (upstream's e2e "should implement service.kubernetes.io/headless").
	headless := hslice("h-fqdn-headless", "h-fqdn", discoveryv1.AddressTypeIPv4, hep("10.244.5.98", nodeB, readyEP))
	headless.Labels["service.kubernetes.io/headless"] = ""
	return []HostileObject{
		svcObj(ViaAPI, "zero-length source range 0.0.0.0/0 (item 1)", ingress(hsvc("h-lb-any4", 1, lb(31001, "0.0.0.0/0")), "", "192.0.2.101")),
		v4("h-lb-any4", "10.244.5.1"),
		svcObj(ViaAPI, "dual-stack LB: ::/0 beside an IPv4 range (items 1, 4)",
			ingress(hsvc("h-lb-dual", 2, both(lb(31002, "::/0", "203.0.113.0/24"), dualStack("fd00:96::1302"))), "", "192.0.2.102", "2001:db8::102")),
		v4("h-lb-dual", "10.244.5.2"),
		{Via: ViaAPI, Class: "endpoints", Slice: hslice("h-lb-dual-v6", "h-lb-dual", discoveryv1.AddressTypeIPv6, hep("fd00:244:5::2", nodeB, readyEP))},
		svcObj(ViaAPI, "dual-stack LB with IPv4-only source ranges (item 4)",
			ingress(hsvc("h-lb-dual-v4ranges", 3, both(lb(31003, "203.0.113.0/24"), dualStack("fd00:96::1303"))), "", "192.0.2.103", "2001:db8::103")),
		v4("h-lb-dual-v4ranges", "10.244.5.3"),
		{Via: ViaAPI, Class: "endpoints", Slice: hslice("h-lb-dual-v4ranges-v6", "h-lb-dual-v4ranges", discoveryv1.AddressTypeIPv6, hep("fd00:244:5::3", nodeB, readyEP))},
		svcObj(ViaAPI, "beta source-range annotation, no spec ranges (item 5)", ingress(annotated, "", "192.0.2.104")),
		v4("h-lb-beta", "10.244.5.4"),
		svcObj(ViaAPI, "IPv6 external IP on an IPv4-only service (item 5)", hsvc("h-ext-v6", 5, func(s *corev1.ServiceSpec) {
			s.ExternalIPs = []string{"192.0.2.105", "2001:db8::105"}
		})),
		v4("h-ext-v6", "10.244.5.5"),
		svcObj(ViaAPI, "only other-family source ranges on an IPv4-only LB (fail open)", ingress(hsvc("h-lb-v6ranges", 6, lb(31006, "2001:db8::/32")), "", "192.0.2.106")),
		v4("h-lb-v6ranges", "10.244.5.6"),
		svcObj(ViaAPI, "duplicates: source ranges, external IPs, ingress IPs, endpoints in two slices",
			ingress(hsvc("h-dups", 7, both(lb(31007, "203.0.113.0/24", "203.0.113.0/24"), func(s *corev1.ServiceSpec) {
				s.ExternalIPs = []string{"192.0.2.107", "192.0.2.107"}
			})), "", "192.0.2.108", "192.0.2.108")),
		v4("h-dups", "10.244.5.7"),
		{Via: ViaAPI, Class: "duplicate endpoint", Slice: hslice("h-dups-again", "h-dups", discoveryv1.AddressTypeIPv4, hep("10.244.5.7", nodeB, readyEP))},
		svcObj(ViaAPI, "serving absent, ready false, terminating (item 5)", hsvc("h-serving-absent", 8, nil)),
		{Via: ViaAPI, Class: "serving absent", Slice: hslice("h-serving-absent-v4", "h-serving-absent", discoveryv1.AddressTypeIPv4,
			hep("10.244.0.8", nodeA, terminating), hep("10.244.5.8", nodeB, terminatingNotServing))},
		svcObj(ViaAPI, "every endpoint condition absent (ready)", hsvc("h-conds-absent", 9, nil)),
		{Via: ViaAPI, Class: "conditions absent", Slice: hslice("h-conds-absent-v4", "h-conds-absent", discoveryv1.AddressTypeIPv4, hep("10.244.5.9", nodeB, noneEP))},
		{Via: ViaAPI, Class: "slice without the service-name label", Slice: hslice("h-conds-absent-unlabelled", "", discoveryv1.AddressTypeIPv4, hep("10.244.5.99", nodeB, readyEP))},
		svcObj(ViaAPI, "ipMode Proxy (not served by kube-proxy)", ingress(hsvc("h-ipmode-proxy", 10, lb(31010)), string(corev1.LoadBalancerIPModeProxy), "192.0.2.110")),
		v4("h-ipmode-proxy", "10.244.5.10"),
		svcObj(ViaAPI, "space-padded source range (the API allows it)", ingress(hsvc("h-lb-padded", 11, lb(31011, " 198.51.100.0/24 ")), "", "192.0.2.111")),
		v4("h-lb-padded", "10.244.5.11"),
		svcObj(ViaAPI, "the node's own address as external IP", hsvc("h-ext-node", 12, func(s *corev1.ServiceSpec) { s.ExternalIPs = []string{BroadNodeIP} })),
		v4("h-ext-node", "10.244.5.12"),
		svcObj(ViaAPI, "FQDN slice beside an IPv4 one", hsvc("h-fqdn", 13, nil)),
		{Via: ViaAPI, Class: "FQDN slice", Slice: fqdn},
		v4("h-fqdn", "10.244.5.13"),
		{Via: ViaAPI, Class: "slice labelled service.kubernetes.io/headless (ignored)", Slice: headless},
		svcObj(ViaAPI, "slice ports: another name, no port number", hsvc("h-slice-ports", 14, nil)),
		{Via: ViaAPI, Class: "slice port of another name", Slice: portMismatch},
		{Via: ViaAPI, Class: "slice port without a number", Slice: portNil},
	}
}

// hostileEtcd are the hostile objects every apiserver refuses.
func hostileEtcd() []HostileObject {
	mapped := hslice("h-mapped-ep-v6", "h-mapped-ep", discoveryv1.AddressTypeIPv6,
		hep("::ffff:10.244.5.26", nodeB, readyEP), hep("fd00:244:5::25", nodeB, readyEP))
	return []HostileObject{
		svcObj(ViaEtcd, "bad external IPs among a good one (item 3)", hsvc("h-ext-bad", 20, func(s *corev1.ServiceSpec) {
			s.ExternalIPs = []string{"192.0.2.50", "not-an-ip", ""}
		})),
		v4("h-ext-bad", "10.244.5.20"),
		svcObj(ViaEtcd, "only a malformed source range (item 3, fail open)", ingress(hsvc("h-lb-garbage", 21, lb(31021, "garbage")), "", "192.0.2.121")),
		v4("h-lb-garbage", "10.244.5.21"),
		svcObj(ViaEtcd, "a malformed source range beside a good one (item 3)",
			ingress(hsvc("h-lb-garbage-mixed", 22, lb(31022, "garbage", "203.0.113.0/24")), "", "192.0.2.122")),
		v4("h-lb-garbage-mixed", "10.244.5.22"),
		svcObj(ViaEtcd, "unknown ipMode (item 5)", ingress(hsvc("h-ipmode-bogus", 23, lb(31023)), "Bogus", "192.0.2.123")),
		v4("h-ipmode-bogus", "10.244.5.23"),
		svcObj(ViaEtcd, "unknown traffic policies", hsvc("h-policy-bogus", 24, func(s *corev1.ServiceSpec) {
			weird := corev1.ServiceInternalTrafficPolicy("Weird")
			s.Type, s.ExternalTrafficPolicy, s.InternalTrafficPolicy = corev1.ServiceTypeNodePort, "Weird", &weird
			s.Ports = []corev1.ServicePort{hostilePort(31024)}
		})),
		v4("h-policy-bogus", "10.244.5.24"),
		svcObj(ViaAPI, "IPv4-mapped endpoint address in an IPv6 slice (item 5)", hsvc("h-mapped-ep", 25, dualStack("fd00:96::1325"))),
		v4("h-mapped-ep", "10.244.5.25"),
		// kube-proxy's iptables mode writes the mapped address as the IPv4
		// address into ip6tables rules: ip6tables-restore fails ("host/network
		// `10.244.5.26' not found") and so does every IPv6 sync. Its IPVS
		// mode adds 10.244.5.26 to the IPv6 virtual server, which the kernel
		// keeps as af4:51a::; the next sync fails to add it again ("file
		// exists") and deletes af4:51a::, the one after adds it: its state
		// flips at every sync and cannot be compared. Its nftables mode
		// writes the IPv4 address into the IPv6 dnat map: nft refuses the
		// IPv6 transaction ("Address family for hostname not supported").
		{Via: ViaEtcd, Class: "IPv4-mapped endpoint address in an IPv6 slice (item 5)", Slice: mapped, KubeProxyFails: []string{"iptables", "ipvs", "nftables"}},
		// kube-proxy's iptables mode writes "-m bogus -p bogus": every IPv4
		// restore fails; its nftables mode writes "bogus" as the protocol
		// of a no-endpoint-services element: nft refuses the IPv4
		// transaction ("Could not resolve protocol name").
		{Via: ViaEtcd, Class: "unknown protocol beside a TCP port", Service: hsvc("h-proto-bogus", 28, func(s *corev1.ServiceSpec) {
			bogus := hostilePort(0)
			bogus.Name, bogus.Protocol, bogus.Port = "bogus", "BOGUS", 81
			s.Ports = append(s.Ports, bogus)
		}), KubeProxyFails: []string{"iptables", "nftables"}},
		v4("h-proto-bogus", "10.244.5.28"),
		svcObj(ViaEtcd, "loopback external IP", hsvc("h-ext-loopback", 26, func(s *corev1.ServiceSpec) { s.ExternalIPs = []string{"127.0.0.1"} })),
		v4("h-ext-loopback", "10.244.5.27"),
	}
}

// hostileLax are the hostile objects only an apiserver without strict IP
// and CIDR validation accepts.
func hostileLax() []HostileObject {
	return []HostileObject{
		svcObj(ViaLax, "legacy leading-zero external IP (item 3)", hsvc("h-ext-legacy", 30, func(s *corev1.ServiceSpec) { s.ExternalIPs = []string{"192.0.2.052"} })),
		v4("h-ext-legacy", "10.244.5.30"),
		svcObj(ViaLax, "IPv4-mapped IPv6 source range (item 2)", ingress(hsvc("h-lb-mapped", 31, lb(31031, "::ffff:10.0.0.0/104")), "", "192.0.2.131")),
		v4("h-lb-mapped", "10.244.5.31"),
		svcObj(ViaLax, "source range with host bits set", ingress(hsvc("h-lb-hostbits", 32, lb(31032, "10.0.0.1/8")), "", "192.0.2.132")),
		v4("h-lb-hostbits", "10.244.5.32"),
		svcObj(ViaAPI, "legacy leading-zero endpoint address", hsvc("h-ep-legacy", 33, nil)),
		{Via: ViaLax, Class: "legacy leading-zero endpoint address", Slice: hslice("h-ep-legacy-v4", "h-ep-legacy", discoveryv1.AddressTypeIPv4, hep("10.244.5.033", nodeB, readyEP))},
		svcObj(ViaLax, "IPv4-mapped external IP on an IPv4 service", hsvc("h-ext-mapped", 34, func(s *corev1.ServiceSpec) { s.ExternalIPs = []string{"::ffff:192.0.2.134"} })),
		v4("h-ext-mapped", "10.244.5.34"),
	}
}
