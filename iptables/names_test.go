package iptables

import (
	"slices"
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

// TestServiceChains: the four chains of a service port from one hash are
// those of the functions that hash each.
func TestServiceChains(t *testing.T) {
	for _, pn := range []string{"default/web:http", "kube-system/kube-dns:dns-tcp", "ns/name"} {
		svc, svl, ext, fw := serviceChains(pn, "udp")
		got := []string{svc, svl, ext, fw}
		want := []string{ServiceChain(pn, "udp"), LocalChain(pn, "udp"), ExternalChain(pn, "udp"), FirewallChain(pn, "udp")}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", pn, got, want)
		}
	}
	if probability(2) != "0.50000000000" || probability(3) != "0.33333333349" {
		t.Errorf("probability(2), (3) = %s, %s", probability(2), probability(3))
	}
}
