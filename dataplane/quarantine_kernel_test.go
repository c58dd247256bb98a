package dataplane_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/dataplanetest"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/quarantine"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// TestKernelQuarantineEntries: set entries the kernel refuses (a
// zero-length source CIDR, "invalid CIDR prefix length"; an entry past a
// full set's maxelem) are quarantined by name while the rest of the batch
// is in the kernel and nothing fails as a whole; they are held until due,
// retried 1 s then 2 s later, and written once the kernel takes them; one
// no longer wanted leaves the quarantine.
func TestKernelQuarantineEntries(t *testing.T) {
	ns := nstest.New(t)
	c, err := ipset.Dial(&ipset.Config{NetNS: ns.FD()})
	if err != nil {
		nstest.Missing(t, "ipset in the kernel: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	if err := dataplane.CreateSets(c, []xtables.Family{xtables.IPv4}, 1024, 3); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	a := dataplane.NewApplier(&dataplane.Kernel{IPSet: c, Link: dataplanetest.NewLinks()})
	a.Quarantine = quarantine.New[any](time.Second, 30*time.Second)
	a.Quarantine.Now = func() time.Time { return now }

	lb := netip.MustParseAddr("192.0.2.10")
	zero := render.SetEntry{Set: rules.SetLoadBalancerSrcNet, Addr: lb, Protocol: render.TCP, Port: 443, Net: netip.MustParsePrefix("0.0.0.0/0")}
	good := zero
	good.Net = netip.MustParsePrefix("203.0.113.0/24")
	cip := func(i byte) render.SetEntry {
		return render.SetEntry{Set: rules.SetClusterIP, Addr: netip.AddrFrom4([4]byte{10, 96, 0, i}), Protocol: render.TCP, Port: 80}
	}
	names := func(es []quarantine.Entry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Kind+" "+e.Name)
		}
		return out
	}
	list := func(set string) []string {
		_, es, err := c.List(set)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.String())
		}
		slices.Sort(out)
		return out
	}
	refused := []string{"SetEntry KUBE-CLUSTER-IP 10.96.0.4,tcp:80", "SetEntry " + zero.String()}

	res := a.Apply(dataplane.Plan{AddEntries: []render.SetEntry{zero, good, cip(1), cip(2), cip(3), cip(4)}})
	if err := res.WholeErr(); err != nil {
		t.Fatalf("a batch with two entries refused failed as a whole: %v", err)
	}
	if d := cmp.Diff(refused, names(res.Quarantined)); d != "" {
		t.Fatalf("quarantined -want +got:\n%s\n(errors: %v)", d, res.Err())
	}
	if got := list(rules.SetClusterIP); len(got) != 3 || len(list(rules.SetLoadBalancerSrcNet)) != 1 {
		t.Fatalf("kernel: cluster IPs %v, source CIDRs %v; want the rest of the batch in", got, list(rules.SetLoadBalancerSrcNet))
	}
	// What a controller plans next: the entries not written. Not due.
	pending := dataplane.Plan{AddEntries: []render.SetEntry{zero, cip(4)}}
	if res := a.Apply(pending); res.Held != 2 || res.Writes != 0 {
		t.Fatalf("before 1 s: %d held, %d written; want both held", res.Held, res.Writes)
	}
	now = now.Add(time.Second)
	res = a.Apply(pending)
	if res.Writes != 2 || len(res.Quarantined) != 2 || res.Quarantined[0].Attempts != 2 || res.Quarantined[0].Next.Sub(now) != 2*time.Second {
		t.Fatalf("at 1 s: %d written, quarantined %+v; want both retried, next in 2 s", res.Writes, res.Quarantined)
	}
	// The set gets room; the zero-length range is no longer wanted.
	if err := c.Del(rules.SetClusterIP, []ipset.Entry{dataplane.Entry(cip(1))}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	res = a.Apply(dataplane.Plan{AddEntries: []render.SetEntry{cip(4)}})
	if res.Err() != nil || len(res.Quarantined) != 0 {
		t.Fatalf("after the fault cleared: %v, quarantined %v", res.Err(), names(res.Quarantined))
	}
	if got := list(rules.SetClusterIP); !slices.Contains(got, "10.96.0.4,tcp:80") {
		t.Errorf("cluster IPs %v: want 10.96.0.4 written", got)
	}
}
