package ruleset

import (
	"crypto/sha256"
	"encoding/base32"
	"net/netip"
	"strconv"
	"strings"
)

// The fixed names of kube-proxy v1.37.2's nftables mode.
const (
	// TableName is the table of both families.
	TableName = "kube-proxy"
	// TableComment is the table's comment.
	TableComment = "rules for kube-proxy"

	chainFilterPreroutingPreDNAT = "filter-prerouting-pre-dnat"
	chainFilterOutputPreDNAT     = "filter-output-pre-dnat"
	chainFilterInput             = "filter-input"
	chainFilterForward           = "filter-forward"
	chainFilterOutput            = "filter-output"
	chainNATPrerouting           = "nat-prerouting"
	chainNATOutput               = "nat-output"
	chainNATPostrouting          = "nat-postrouting"

	chainServices         = "services"
	chainServiceEPCheck   = "service-endpoints-check"
	chainNodePortEPCheck  = "nodeport-endpoints-check"
	chainReject           = "reject-chain"
	chainClusterIPsCheck  = "cluster-ips-check"
	chainFirewallCheck    = "firewall-check"
	chainMasquerading     = "masquerading"
	setClusterIPs         = "cluster-ips"
	setNodePortIPs        = "nodeport-ips"
	setHairpin            = "hairpin-connections"
	mapServiceIPs         = "service-ips"
	mapServiceNodePorts   = "service-nodeports"
	mapNoEndpointServices = "no-endpoint-services"
	mapNoEndpointNodePort = "no-endpoint-nodeports"
	mapFirewallIPs        = "firewall-ips"
)

// The prefixes of the per-service-port and per-endpoint names.
const (
	prefixService  = "service-"
	prefixLocal    = "local-"
	prefixExternal = "external-"
	prefixEndpoint = "endpoint-"
	prefixAffinity = "affinity-"
	prefixFirewall = "firewall-"
)

// Name and comment limits (knftables'): a name base leaves room for the
// longest prefix; comments are cut to CommentLengthMax bytes.
const (
	nameLengthMax     = 256
	prefixLengthMax   = 16
	nameBaseLengthMax = nameLengthMax - prefixLengthMax
	commentLengthMax  = 128
)

// portNameBase is the base of a service port's chain names,
// "HASH-namespace/name/proto/port", as kube-proxy names them.
func portNameBase(ns, name, proto, port string) string {
	return hashAndTruncate(ns + "/" + name + "/" + proto + "/" + port)
}

// endpointNameBase is the base of an endpoint's chain and affinity set
// names, "HASH-namespace/name/proto/port__ip/port" (an IPv6 address with
// its colons as dots).
func endpointNameBase(ns, name, proto, port string, ep netip.AddrPort) string {
	ip := ep.Addr().String()
	if ep.Addr().Is6() {
		ip = strings.ReplaceAll(ip, ":", ".")
	}
	return hashAndTruncate(ns + "/" + name + "/" + proto + "/" + port + "__" + ip + "/" + strconv.Itoa(int(ep.Port())))
}

// hashAndTruncate puts the first 8 base32 characters of the name's
// SHA-256 and a dash before it, and cuts the result to nameBaseLengthMax
// (its end replaced by "...").
func hashAndTruncate(name string) string {
	sum := sha256.Sum256([]byte(name))
	var h [8]byte
	base32.StdEncoding.Encode(h[:], sum[:5]) // 5 bytes make exactly 8 characters
	out := string(h[:]) + "-" + name
	if len(out) > nameBaseLengthMax {
		out = out[:nameBaseLengthMax-3] + "..."
	}
	return out
}

// truncateComment cuts s to commentLengthMax bytes, as kube-proxy does.
func truncateComment(s string) string {
	if len(s) > commentLengthMax {
		return s[:commentLengthMax]
	}
	return s
}
