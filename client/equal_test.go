package client

import (
	"net/netip"
	"reflect"
	"testing"
)

// mutate sets field f of the struct v points to to a non-zero value
// different from its current one, whatever the field's type.
func mutate(t *testing.T, f reflect.Value) {
	t.Helper()
	switch f.Kind() {
	case reflect.String:
		f.SetString(f.String() + "x")
	case reflect.Bool:
		f.SetBool(!f.Bool())
	case reflect.Int:
		f.SetInt(f.Int() + 1)
	case reflect.Pointer:
		n := reflect.New(f.Type().Elem())
		if !f.IsNil() {
			n.Elem().Set(f.Elem())
			mutate(t, n.Elem().Field(0))
		}
		f.Set(n)
	case reflect.Map:
		m := reflect.MakeMap(f.Type())
		m.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf("v"))
		f.Set(m)
	case reflect.Slice:
		s := reflect.MakeSlice(f.Type(), 1, 1)
		switch e := s.Index(0).Addr().Interface().(type) {
		case *netip.Prefix:
			*e = netip.MustParsePrefix("192.0.2.0/24")
		case *Port:
			e.Port = 1
		case *PortOverride:
			e.Port = 1
		default:
			t.Fatalf("no mutation for slice of %s", f.Type().Elem())
		}
		f.Set(s)
	case reflect.Struct:
		if ips, ok := f.Addr().Interface().(*IPs); ok {
			ips.Add(netip.MustParseAddr("192.0.2.1"))
			return
		}
		t.Fatalf("no mutation for %s", f.Type())
	default:
		t.Fatalf("no mutation for %s", f.Type())
	}
}

// TestEqualSeesEveryField changes each field of Service and Endpoint in turn
// and checks that Equal notices: a field forgotten in Equal would make the
// adapters drop updates.
func TestEqualSeesEveryField(t *testing.T) {
	base := func() *Service {
		s := &Service{Namespace: "default", Name: "web", Type: ClusterIP,
			Ports:           []Port{{Name: "http", Protocol: TCP, Port: 80, TargetPort: 8080}},
			SessionAffinity: &SessionAffinity{TimeoutSeconds: 10}}
		s.ClusterIPs.Add(netip.MustParseAddr("10.96.0.1"))
		return s
	}
	typ := reflect.TypeFor[Service]()
	for i := range typ.NumField() {
		a, b := base(), base()
		if !a.Equal(b) {
			t.Fatal("equal services compare unequal")
		}
		mutate(t, reflect.ValueOf(b).Elem().Field(i))
		if a.Equal(b) || b.Equal(a) {
			t.Errorf("Service.Equal ignores field %s", typ.Field(i).Name)
		}
	}
	baseEp := func() *Endpoint {
		e := &Endpoint{Key: "Pod/default/a", Ready: true}
		e.IPs.Add(netip.MustParseAddr("10.244.0.1"))
		return e
	}
	typ = reflect.TypeFor[Endpoint]()
	for i := range typ.NumField() {
		a, b := baseEp(), baseEp()
		if !a.Equal(b) {
			t.Fatal("equal endpoints compare unequal")
		}
		mutate(t, reflect.ValueOf(b).Elem().Field(i))
		if a.Equal(b) || b.Equal(a) {
			t.Errorf("Endpoint.Equal ignores field %s", typ.Field(i).Name)
		}
		sa := &ServiceEndpoints{Service: base(), Endpoints: []*Endpoint{a}}
		sb := &ServiceEndpoints{Service: base(), Endpoints: []*Endpoint{b}}
		if sa.Equal(sb) {
			t.Errorf("ServiceEndpoints.Equal ignores endpoint field %s", typ.Field(i).Name)
		}
	}
	var nilSE *ServiceEndpoints
	if nilSE.Equal(&ServiceEndpoints{Service: base()}) || !nilSE.Equal(nil) {
		t.Error("nil ServiceEndpoints compares wrongly")
	}
}
