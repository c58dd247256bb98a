package conntrack_test

import (
	"log"
	"net/netip"

	"github.com/proxysinks/proxysinks/host/conntrack"
)

// Endpoint 10.244.1.5:5353 of the UDP service 10.96.0.10:53 is gone: its
// clients' flows are deleted so that their next datagrams are scheduled to
// a live endpoint. (Not run by go test: it works in the caller's network
// namespace and needs CAP_NET_ADMIN; the kernel tests use a fresh one.)
func Example() {
	c, err := conntrack.Dial(nil) // &conntrack.Config{NetNS: fd} for another namespace
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	n, err := c.FlushUDP([]conntrack.Target{{
		Service: netip.MustParseAddrPort("10.96.0.10:53"),
		Backend: netip.MustParseAddrPort("10.244.1.5:5353"),
	}})
	if err != nil {
		log.Print(err) // the flows that could not be deleted; the others are
	}
	log.Printf("%d stale UDP flows deleted", n)
}
