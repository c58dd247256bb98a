package conntrack_test

import (
	"log"
	"net/netip"

	"github.com/proxysinks/proxysinks/host/conntrack"
)

// The UDP service 10.96.0.10:53 is now served by 10.244.1.6:5353 alone:
// the flows of its clients that something else answered (a gone endpoint,
// or nothing while it had none) are deleted, so that their next datagrams
// are scheduled to a serving endpoint. (Not run by go test: it works in
// the caller's network namespace and needs CAP_NET_ADMIN; the kernel tests
// use a fresh one.)
func Example() {
	c, err := conntrack.Dial(nil) // &conntrack.Config{NetNS: fd} for another namespace
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	serving := conntrack.Endpoints{netip.MustParseAddrPort("10.244.1.6:5353"): {}}
	n, err := c.ReconcileUDP(false, &conntrack.Want{
		Frontends: map[netip.AddrPort]conntrack.Endpoints{netip.MustParseAddrPort("10.96.0.10:53"): serving},
		NodePorts: map[uint16]conntrack.Endpoints{30053: serving},
	})
	if err != nil {
		log.Print(err) // the flows that could not be deleted; the others are
	}
	log.Printf("%d stale UDP flows deleted", n)
}
