package client

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestServiceKeyCompare(t *testing.T) {
	tests := []struct {
		a, b ServiceKey
		want int
	}{
		{ServiceKey{"a", "z"}, ServiceKey{"b", "a"}, -1},
		{ServiceKey{"b", "a"}, ServiceKey{"a", "z"}, 1},
		{ServiceKey{"a", "a"}, ServiceKey{"a", "b"}, -1},
		{ServiceKey{"a", "b"}, ServiceKey{"a", "a"}, 1},
		{ServiceKey{"a", "b"}, ServiceKey{"a", "b"}, 0},
	}
	for _, tt := range tests {
		if got := tt.a.Compare(tt.b); got != tt.want {
			t.Errorf("%v.Compare(%v) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestIPsAdd(t *testing.T) {
	var ips IPs
	for _, s := range []string{"10.0.0.1", "fd00::1", "::ffff:10.0.0.1", "10.0.0.2", "fd00::1"} {
		ips.Add(netip.MustParseAddr(s))
	}
	want := IPs{
		V4: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")},
		V6: []netip.Addr{netip.MustParseAddr("fd00::1")},
	}
	if diff := cmp.Diff(want, ips, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("IPs (-want +got):\n%s", diff)
	}
	if got := ips.All(); len(got) != 3 || got[2] != want.V6[0] {
		t.Errorf("All() = %v", got)
	}
	if got := ips.Family(true); len(got) != 1 {
		t.Errorf("Family(true) = %v", got)
	}
}

func TestPortFor(t *testing.T) {
	e := &Endpoint{PortOverrides: []PortOverride{{Name: "dns", Protocol: TCP, Port: 5353}, {Name: "dns", Protocol: UDP, Port: 53}}}
	tests := []struct {
		p      Port
		want   int
		wantOK bool
	}{
		{Port{Name: "dns", Protocol: UDP, Port: 53}, 53, true},
		{Port{Name: "dns", Protocol: TCP, Port: 53}, 5353, true},
		{Port{Name: "dns", Protocol: SCTP, Port: 53}, 0, false},
		{Port{Name: "http", Protocol: TCP, Port: 80, TargetPort: 8080}, 0, false},
	}
	for _, tt := range tests {
		got, ok := e.PortFor(tt.p)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("PortFor(%+v) = %d, %v; want %d, %v", tt.p, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestObjectError(t *testing.T) {
	inner := errors.New(`invalid IP "10.0.0.300"`)
	e := &ObjectError{Kind: "Service", Namespace: "default", Name: "web", Field: "spec.clusterIPs[0]", Source: "svc.yaml#2", Err: inner}
	if got, want := e.Error(), `Service default/web (svc.yaml#2): spec.clusterIPs[0]: invalid IP "10.0.0.300"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", e), inner) {
		t.Error("ObjectError does not unwrap")
	}
	var oe *ObjectError
	if !errors.As(fmt.Errorf("wrapped: %w", e), &oe) || oe.Field != "spec.clusterIPs[0]" {
		t.Error("errors.As does not find the ObjectError")
	}
}

func se(ns, name string) *ServiceEndpoints {
	return &ServiceEndpoints{Service: &Service{Namespace: ns, Name: name, Type: ClusterIP}}
}

func keys(list []*ServiceEndpoints) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Service.Key().String())
	}
	return out
}

func TestTracker(t *testing.T) {
	tr := NewTracker()
	tr.Set(ServiceKey{"b", "x"}, se("b", "x"))
	tr.Set(ServiceKey{"a", "y"}, se("a", "y"))
	tr.Set(ServiceKey{"a", "x"}, se("a", "x"))
	s1 := tr.Snapshot()
	if diff := cmp.Diff([]string{"a/x", "a/y", "b/x"}, keys(s1.Services())); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
	if len(s1.Changes) != 3 {
		t.Fatalf("first snapshot lists %d changes, want 3", len(s1.Changes))
	}
	// The same content in a new pointer is no change.
	if tr.Set(ServiceKey{"a", "y"}, se("a", "y")) {
		t.Error("Set of equal content reports a change")
	}
	changed := se("a", "y")
	changed.Service.Type = NodePort
	if !tr.Set(ServiceKey{"a", "y"}, changed) {
		t.Error("Set of new content reports no change")
	}
	s2 := tr.Snapshot()
	if diff := cmp.Diff([]Change{{Key: ServiceKey{"a", "y"}, Service: changed}}, s2.Changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if s1.Services()[1].Service.Type != ClusterIP {
		t.Error("a new snapshot modified the previous one's list")
	}
	if s2.Lookup(ServiceKey{"a", "y"}) != changed || s2.Lookup(ServiceKey{"c", "c"}) != nil {
		t.Error("Lookup returns the wrong service")
	}
	tr.Set(ServiceKey{"a", "x"}, nil)
	s3 := tr.Snapshot()
	if diff := cmp.Diff([]string{"a/y", "b/x"}, keys(s3.Services())); diff != "" {
		t.Errorf("after delete (-want +got):\n%s", diff)
	}
	if len(s3.Changes) != 1 || s3.Changes[0].Service != nil {
		t.Errorf("delete change = %+v", s3.Changes)
	}
	if s4 := tr.Snapshot(); len(s4.Changes) != 0 || s4.Len() != 2 {
		t.Errorf("idle snapshot = %+v", s4)
	}
}

func TestToCallback(t *testing.T) {
	snap := NewSnapshot([]*ServiceEndpoints{se("a", "x"), se("a", "y"), se("b", "x")}, nil)
	var got []string
	ToCallback(func(ch <-chan *ServiceEndpoints) {
		for s := range ch {
			got = append(got, s.Service.Key().String())
		}
	})(snap)
	if diff := cmp.Diff([]string{"a/x", "a/y", "b/x"}, got); diff != "" {
		t.Errorf("streamed (-want +got):\n%s", diff)
	}
	// A callback that stops reading early does not block the source.
	var list []*ServiceEndpoints
	for i := range 1000 {
		list = append(list, se("ns", fmt.Sprintf("%04d", i)))
	}
	big := NewSnapshot(list, nil)
	ToCallback(func(ch <-chan *ServiceEndpoints) { <-ch })(big)
}

func TestServiceSourceRanges(t *testing.T) {
	p := netip.MustParsePrefix
	tests := []struct {
		name         string
		ranges       []netip.Prefix
		want4, want6 []netip.Prefix
	}{
		{"none: both open", nil, nil, nil},
		{"IPv4 only: IPv6 open", []netip.Prefix{p("10.0.0.0/8")}, []netip.Prefix{p("10.0.0.0/8")}, nil},
		{"zero-length opens its family only", []netip.Prefix{p("10.0.0.0/8"), p("0.0.0.0/0"), p("2001:db8::/32")}, nil, []netip.Prefix{p("2001:db8::/32")}},
		{"::/0", []netip.Prefix{p("::/0"), p("2001:db8::/32")}, nil, nil},
		{"invalid left out", []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr("10.0.0.0"), 104), p("10.0.0.0/8")}, []netip.Prefix{p("10.0.0.0/8")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Service{LoadBalancerSourceRanges: tt.ranges}
			cmpPrefix := cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })
			if diff := cmp.Diff(tt.want4, s.SourceRanges(false), cmpPrefix); diff != "" {
				t.Errorf("IPv4 (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want6, s.SourceRanges(true), cmpPrefix); diff != "" {
				t.Errorf("IPv6 (-want +got):\n%s", diff)
			}
		})
	}
}
