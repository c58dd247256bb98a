package link_test

import (
	"fmt"
	"log"
	"net/netip"

	"github.com/proxysinks/proxysinks/netlinkraw/link"
)

// Example binds a service VIP on kube-ipvs0 and lists every link's
// addresses. It is compiled but not run by go test: the build
// machines' kernel has no dummy links (TestDummyKernel runs the same steps
// in the VM).
func Example() {
	c, err := link.Dial(&link.Config{}) // NetNS: a namespace descriptor, or 0 for the caller's
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.EnsureDummy(link.DefaultDummy); err != nil {
		log.Fatal(err)
	}
	vip := netip.MustParseAddr("10.96.0.10")
	if err := c.AddAddresses(link.DefaultDummy, []netip.Addr{vip}); err != nil {
		log.Fatal(err)
	}
	bound, err := c.Addresses(link.DefaultDummy)
	if err != nil {
		log.Fatal(err)
	}
	all, err := c.ListAddresses()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("VIPs:", bound, "addresses of every link:", len(all))
}
