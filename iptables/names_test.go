package iptables

import (
	"strings"
	"testing"
)

// The names below were read from a real kube-proxy v1.37.2 run
// (see REFERENCE.md).
func TestChainNames(t *testing.T) {
	pn := PortName("default", "web", "http")
	if got, want := ServiceChain(pn, "tcp"), "KUBE-SVC-CDGGSHYLG3RE2FKL"; got != want {
		t.Errorf("ServiceChain(%q) = %s, want %s", pn, got, want)
	}
	if got, want := EndpointChain(pn, "tcp", "10.244.1.5:8080"), "KUBE-SEP-AFGSLHOD2HFNCBX4"; got != want {
		t.Errorf("EndpointChain(%q, 10.244.1.5:8080) = %s, want %s", pn, got, want)
	}
	if got, want := PortName("default", "web", ""), "default/web"; got != want {
		t.Errorf("PortName unnamed = %q, want %q", got, want)
	}
	for _, name := range []string{ServiceChain(pn, "tcp"), LocalChain(pn, "tcp"), ExternalChain(pn, "tcp"), FirewallChain(pn, "tcp"), EndpointChain(pn, "tcp", "x")} {
		if !isServiceChain(name) || len(name) > 28 {
			t.Errorf("%s: not recognized as a service chain or longer than 28", name)
		}
	}
	if isServiceChain("KUBE-SERVICES") || isServiceChain("KUBE-SVCX") {
		t.Error("top-level chain taken for a service chain")
	}
}

// TestHashPort: render's hash of a port name and endpoint bytes is the
// exported functions' (kube-proxy's) hash of the strings, long names
// included.
func TestHashPort(t *testing.T) {
	long := strings.Repeat("n", 63) + "/" + strings.Repeat("s", 63) + ":" + strings.Repeat("p", 15)
	for _, pn := range []string{"default/web:http", "kube-system/kube-dns:dns-tcp", "ns/name", long} {
		h := hashPort([]byte(pn), "udp", nil)
		if got, want := prefixSVC+string(h[:]), ServiceChain(pn, "udp"); got != want {
			t.Errorf("%s: %s, want %s", pn, got, want)
		}
		for _, ep := range []string{"10.244.1.5:8080", "[fd00:244::5]:8080", strings.Repeat("f", 250)} {
			h := hashPort([]byte(pn), "udp", []byte(ep))
			if got, want := prefixSEP+string(h[:]), EndpointChain(pn, "udp", ep); got != want {
				t.Errorf("%s %s: %s, want %s", pn, ep, got, want)
			}
		}
	}
}
