package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"golang.org/x/sys/unix"
)

// failKind fails every IPVS operation of one kind with err.
type failKind struct {
	recorder
	kind ipvs.OpKind
	err  error
}

func (f *failKind) IPVS(ops []ipvs.Op) []error {
	errs := f.recorder.IPVS(ops)
	for i, o := range ops {
		if o.Kind == f.kind {
			errs[i] = fmt.Errorf("ipvs: %s: %w", o, f.err)
		}
	}
	return errs
}

// TestErrorsKeepTheirChain: the failures of a Result joined into one error
// keep their chains: errors.Is finds the errno, whatever their number.
func TestErrorsKeepTheirChain(t *testing.T) {
	w := &failKind{kind: ipvs.OpCreateService, err: unix.ENOMEM}
	a := NewApplier(w)
	var p Plan
	for i := range 8 {
		p.CreateServers = append(p.CreateServers, Server{VS: render.VirtualServer{Protocol: render.TCP, Addr: netip.AddrFrom4([4]byte{10, 96, 0, byte(i)}), Port: 80}})
	}
	err := a.Apply(p).Err()
	if !errors.Is(err, unix.ENOMEM) {
		t.Errorf("Result.Err() = %v, does not match ENOMEM", err)
	}
	if err == nil || len(err.Error()) == 0 {
		t.Fatal("no error message")
	}
}

// TestTerminatingUntilRemoved: a terminating destination stays in the
// terminating list until what ends its termination succeeded: its weight
// restored when it comes back, or its server's removal.
func TestTerminatingUntilRemoved(t *testing.T) {
	vs := render.VirtualServer{Protocol: render.TCP, Addr: netip.MustParseAddr("10.96.0.7"), Port: 80}
	d := dest(vs, "10.244.1.9", 80)

	w := &failKind{kind: 255}
	a := NewApplier(w)
	a.Apply(Plan{DeleteDests: []Dest{d}})
	if !a.IsTerminating(d.D) {
		t.Fatal("a removed TCP destination is not terminating")
	}
	w.kind, w.err = ipvs.OpUpdateDestination, unix.ENOMEM
	if res := a.Apply(Plan{CreateDests: []Dest{d}}); res.Failed.Dests[d.D] == nil {
		t.Fatal("the weight restore did not fail")
	}
	if !a.IsTerminating(d.D) {
		t.Error("a destination whose weight restore failed left the terminating list (still weight 0 in the kernel)")
	}
	w.kind, w.err = ipvs.OpRemoveService, unix.EBUSY
	if res := a.Apply(Plan{DeleteServers: []Server{{VS: vs}}}); res.Failed.Servers[vs] == nil {
		t.Fatal("the server removal did not fail")
	}
	if !a.IsTerminating(d.D) {
		t.Error("a destination left the terminating list though its server's removal failed")
	}
	w.kind = 255
	a.Apply(Plan{DeleteServers: []Server{{VS: vs}}})
	if a.IsTerminating(d.D) {
		t.Error("a destination still terminating after its server was removed")
	}
}

// TestCmpEntryIPv6Prefixes: cmpEntry is a total order on entries with
// IPv6 prefixes: by address, then prefix length.
func TestCmpEntryIPv6Prefixes(t *testing.T) {
	base := render.SetEntry{Set: "KUBE-6-LOAD-BALANCER-SOURCE-CID", Addr: netip.MustParseAddr("fd00::1"), Protocol: render.TCP, Port: 80}
	var es []render.SetEntry
	for _, p := range []string{"2001:db8::/128", "2001:db9::/0", "2001:db8::/32", "::/0", "2001:db9::/16"} {
		e := base
		e.Net = netip.MustParsePrefix(p)
		es = append(es, e)
	}
	slices.SortFunc(es, cmpEntry)
	var got []string
	for _, e := range es {
		got = append(got, e.Net.String())
	}
	want := []string{"::/0", "2001:db8::/32", "2001:db8::/128", "2001:db9::/0", "2001:db9::/16"}
	if !slices.Equal(got, want) {
		t.Errorf("sorted %v, want %v", got, want)
	}
	for _, x := range es {
		for _, y := range es {
			if (cmpEntry(x, y) < 0) != (cmpEntry(y, x) > 0) {
				t.Errorf("cmpEntry not antisymmetric on %s, %s", x.Net, y.Net)
			}
		}
	}
}
