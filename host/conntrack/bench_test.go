package conntrack

import (
	"fmt"
	"net/netip"
	"testing"

	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// BenchmarkKernelReconcileUDP deletes the flows of 100 removed endpoints
// (10 clients each, 1,000 flows) from a table of 10,000 UDP flows, in a
// fresh namespace per iteration: the cost of one dump plus one delete per
// stale flow, as the sink pays when many UDP endpoints go at once.
func BenchmarkKernelReconcileUDP(b *testing.B) {
	const services, backends, clients = 100, 10, 10 // 10,000 flows
	w := &Want{Frontends: map[netip.AddrPort]Endpoints{}}
	var flows []ct.Flow
	for s := range services {
		svc := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 96, 0, byte(s)}), 53)
		for e := range backends {
			be := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(s), byte(e)}), 5353)
			if e != 0 {
				if w.Frontends[svc] == nil {
					w.Frontends[svc] = Endpoints{}
				}
				w.Frontends[svc][be] = struct{}{}
			}
			for c := range clients {
				cl := fmt.Sprintf("10.0.%d.%d:%d", s, e, 40000+c)
				f := flow(unix.IPPROTO_UDP, cl, svc.String(), be.String())
				f.Timeout = 600
				flows = append(flows, f)
			}
		}
	}
	var deleted int
	for range b.N {
		b.StopTimer()
		ns := nstest.New(b)
		c, raw := dialNS(b, ns)
		for _, f := range flows {
			if err := raw.Create(f); err != nil {
				b.Fatalf("create flow %s: %v", f.TupleOrig, err)
			}
		}
		b.StartTimer()
		n, err := c.ReconcileUDP(false, w)
		b.StopTimer()
		if err != nil || n != services*clients {
			b.Fatalf("ReconcileUDP = %d, %v; want %d", n, err, services*clients)
		}
		deleted += n
		c.Close()
		raw.Close()
	}
	b.ReportMetric(float64(len(flows)), "flows-in-table")
	b.ReportMetric(float64(deleted)/float64(b.N), "flows-deleted/op")
}
