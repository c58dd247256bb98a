package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

// The chains the Proxier owns, with kube-proxy's names.
const (
	// KubeMarkMasqChain is the mark-for-masquerade chain (nat).
	KubeMarkMasqChain = "KUBE-MARK-MASQ"

	chainServices         = "KUBE-SERVICES"
	chainExternalServices = "KUBE-EXTERNAL-SERVICES"
	chainNodePorts        = "KUBE-NODEPORTS"
	chainPostrouting      = "KUBE-POSTROUTING"
	chainForward          = "KUBE-FORWARD"
	chainProxyFirewall    = "KUBE-PROXY-FIREWALL"
	chainCanary           = "KUBE-PROXY-CANARY"
	chainKubeletFirewall  = "KUBE-FIREWALL"
)

// The prefixes of the per-service chains. Every nat chain with one of these
// prefixes belongs to the Proxier: a full sync deletes those it did not
// render.
const (
	prefixSVC = "KUBE-SVC-"
	prefixSVL = "KUBE-SVL-"
	prefixEXT = "KUBE-EXT-"
	prefixFW  = "KUBE-FW-"
	prefixSEP = "KUBE-SEP-"
)

// isServiceChain reports whether a nat chain is a per-service chain.
func isServiceChain(name string) bool {
	for _, p := range []string{prefixSVC, prefixSVL, prefixEXT, prefixFW, prefixSEP} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// hashName returns prefix + the first 16 characters of
// base32(sha256(parts...)), kube-proxy's chain-name scheme.
func hashName(prefix string, parts ...string) string {
	h := hashOf(parts...)
	return prefix + string(h[:])
}

// hashOf returns the first 16 characters of base32(sha256(parts...)).
func hashOf(parts ...string) [16]byte {
	var in [256]byte
	b := in[:0]
	for _, p := range parts {
		b = append(b, p...)
	}
	return hash16(b)
}

// hashPort is hashOf(portName, protocol, endpoint) on the bytes render
// builds, without making strings of them.
func hashPort(portName []byte, protocol string, endpoint []byte) [16]byte {
	var in [256]byte
	return hash16(append(append(append(in[:0], portName...), protocol...), endpoint...))
}

// hash16 is base32 of the first 10 bytes of sha256(b): the first 16
// characters of the whole digest's base32.
func hash16(b []byte) [16]byte {
	sum := sha256.Sum256(b)
	var enc [16]byte
	base32.StdEncoding.Encode(enc[:], sum[:10])
	return enc
}

// PortName returns kube-proxy's name of a service port:
// "namespace/name:port", or "namespace/name" for an unnamed port.
func PortName(namespace, name, port string) string {
	if port == "" {
		return namespace + "/" + name
	}
	return namespace + "/" + name + ":" + port
}

// ServiceChain returns the KUBE-SVC- chain (cluster-policy endpoints) of a
// service port; protocol is lower case ("tcp").
func ServiceChain(portName, protocol string) string {
	return hashName(prefixSVC, portName, protocol)
}

// LocalChain returns the KUBE-SVL- chain (local-policy endpoints).
func LocalChain(portName, protocol string) string {
	return hashName(prefixSVL, portName, protocol)
}

// ExternalChain returns the KUBE-EXT- chain (external destinations).
func ExternalChain(portName, protocol string) string {
	return hashName(prefixEXT, portName, protocol)
}

// FirewallChain returns the KUBE-FW- chain (load-balancer source ranges).
func FirewallChain(portName, protocol string) string {
	return hashName(prefixFW, portName, protocol)
}

// EndpointChain returns the KUBE-SEP- chain of one endpoint of a service
// port; endpoint is "ip:port" ("[ip]:port" for IPv6).
func EndpointChain(portName, protocol, endpoint string) string {
	return hashName(prefixSEP, portName, protocol, endpoint)
}
