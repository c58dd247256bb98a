package file

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/client"
)

// nodeYAML is node-1 with an InternalIP, a Hostname and an ExternalIP, and
// the given pod CIDRs.
func nodeYAML(internal string, podCIDRs ...string) string {
	s := `apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels:
    topology.kubernetes.io/zone: zone-a
spec:
  podCIDRs:
`
	for _, c := range podCIDRs {
		s += "  - " + c + "\n"
	}
	return s + `status:
  addresses:
  - type: InternalIP
    address: ` + internal + `
  - type: Hostname
    address: node-1
  - type: ExternalIP
    address: 2001:db8::1
`
}

func serviceCIDRYAML(name string, cidrs ...string) string {
	s := "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata:\n  name: " + name + "\nspec:\n  cidrs:\n"
	for _, c := range cidrs {
		s += "  - " + c + "\n"
	}
	return s
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

var prefixEqual = cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })

func TestNeeds(t *testing.T) {
	manifest := join(svcYAML("web", "10.96.0.1", "TCP"), nodeYAML("192.0.2.10", "10.244.1.0/24", "fd00:10:244:1::/64"),
		serviceCIDRYAML("kubernetes", "10.96.0.0/16", "fd00:10:96::/112"),
		// A duplicate prefix.
		serviceCIDRYAML("extra", "10.100.0.0/16", "10.96.0.0/16"),
		// Read only when asked for: then invalid (a wrong field type).
		"apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata:\n  name: broken\nspec:\n  cidrs: 7\n")
	node := &client.Node{
		Name: "node-1",
		Addresses: []client.NodeAddress{
			{Type: client.NodeInternalIP, Addr: netip.MustParseAddr("192.0.2.10")},
			{Type: client.NodeExternalIP, Addr: netip.MustParseAddr("2001:db8::1")},
		},
		PodCIDRs: prefixes("10.244.1.0/24", "fd00:10:244:1::/64"),
	}
	for _, tc := range []struct {
		name      string
		needs     client.Needs
		wantNode  *client.Node
		wantCIDRs []netip.Prefix
		invalid   int
	}{
		{name: "not asked"},
		{name: "node", needs: client.Needs{Node: true}, wantNode: node},
		{name: "service CIDRs", needs: client.Needs{ServiceCIDRs: true},
			wantCIDRs: prefixes("10.96.0.0/16", "10.100.0.0/16", "fd00:10:96::/112"), invalid: 1},
		{name: "both", needs: client.Needs{Node: true, ServiceCIDRs: true}, wantNode: node,
			wantCIDRs: prefixes("10.96.0.0/16", "10.100.0.0/16", "fd00:10:96::/112"), invalid: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.yaml")
			write(t, path, manifest)
			src := New(Config{Path: path, NodeName: "node-1", Needs: tc.needs})
			s, err := src.Load()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantNode, s.Node); diff != "" {
				t.Errorf("Node (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCIDRs, s.ServiceCIDRs, prefixEqual); diff != "" {
				t.Errorf("ServiceCIDRs (-want +got):\n%s", diff)
			}
			if got := src.Stats().Invalid; got != tc.invalid {
				t.Errorf("Invalid = %d, want %d (errors %v)", got, tc.invalid, src.Errors())
			}
		})
	}
}

// TestNeedsChangesDelivered: a change of the Node's addresses or of the
// ServiceCIDRs alone delivers a snapshot that lists no service change; a
// change of neither delivers nothing.
func TestNeedsChangesDelivered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.yaml")
	svc := svcYAML("web", "10.96.0.1", "TCP")
	write(t, path, join(svc, nodeYAML("192.0.2.10", "10.244.1.0/24"), serviceCIDRYAML("kubernetes", "10.96.0.0/16")))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snaps, done := runSource(t, ctx, New(Config{Path: path, NodeName: "node-1", MinInterval: 20 * time.Millisecond,
		Needs: client.Needs{Node: true, ServiceCIDRs: true}}))
	next := func(what string) *client.Snapshot { t.Helper(); return nextSnapshot(t, snaps, what) }
	quiet := func(what string) {
		t.Helper()
		select {
		case s := <-snaps:
			t.Errorf("%s: unexpected snapshot (node %v, CIDRs %v)", what, s.Node, s.ServiceCIDRs)
		case <-time.After(300 * time.Millisecond):
		}
	}
	s := next("start")
	if got := s.Node.IPs(client.NodeInternalIP); len(got) != 1 || got[0] != netip.MustParseAddr("192.0.2.10") {
		t.Fatalf("first snapshot: internal IPs %v", got)
	}

	write(t, path, join(svc, nodeYAML("192.0.2.11", "10.244.1.0/24"), serviceCIDRYAML("kubernetes", "10.96.0.0/16")))
	s = next("node address")
	if got := s.Node.IPs(client.NodeInternalIP); len(got) != 1 || got[0] != netip.MustParseAddr("192.0.2.11") {
		t.Errorf("after the address change: internal IPs %v", got)
	}
	if len(s.Changes) != 0 {
		t.Errorf("after the address change: changes %v", changes(s))
	}

	write(t, path, join(svc, nodeYAML("192.0.2.11", "10.244.2.0/24"), serviceCIDRYAML("kubernetes", "10.96.0.0/16")))
	s = next("pod CIDR")
	if want := prefixes("10.244.2.0/24"); !cmp.Equal(want, s.Node.PodCIDRs, prefixEqual) {
		t.Errorf("after the pod CIDR change: %v, want %v", s.Node.PodCIDRs, want)
	}

	write(t, path, join(svc, nodeYAML("192.0.2.11", "10.244.2.0/24"), serviceCIDRYAML("kubernetes", "10.96.0.0/16"),
		serviceCIDRYAML("extra", "10.100.0.0/16")))
	s = next("service CIDR added")
	if want := prefixes("10.96.0.0/16", "10.100.0.0/16"); !cmp.Equal(want, s.ServiceCIDRs, prefixEqual) {
		t.Errorf("after a ServiceCIDR was added: %v, want %v", s.ServiceCIDRs, want)
	}

	// The node's Hostname address and another ServiceCIDR with a prefix
	// already known: nothing a sink sees changes.
	write(t, path, join(svc, nodeYAML("192.0.2.11", "10.244.2.0/24"), serviceCIDRYAML("kubernetes", "10.96.0.0/16"),
		serviceCIDRYAML("extra", "10.100.0.0/16"), serviceCIDRYAML("again", "10.96.0.0/16")))
	quiet("a duplicate prefix")

	write(t, path, svc)
	s = next("node and CIDRs removed")
	if s.Node != nil || s.ServiceCIDRs != nil {
		t.Errorf("after removal: node %v, CIDRs %v", s.Node, s.ServiceCIDRs)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
