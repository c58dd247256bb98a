package ipvs_test

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs/ipvstest"
)

// A batch creates a service and its destinations in one sendmsg; one
// operation fails (a duplicate) without stopping the others.
func Example() {
	// In production: c, err := ipvs.Dial(&ipvs.Options{NetNSPath: "/run/netns/node"})
	c, err := ipvstest.New().Conn()
	if err != nil {
		panic(err)
	}
	defer c.Close()

	svc := ipvs.Service{Protocol: ipvs.UDP, Address: netip.MustParseAddr("10.96.0.10"), Port: 53, Scheduler: "rr"}
	pod := func(ip string, weight uint32) ipvs.Destination {
		return ipvs.Destination{Address: netip.MustParseAddr(ip), Port: 5353, Weight: weight}
	}
	err = c.Apply([]ipvs.Op{
		{Kind: ipvs.OpCreateService, Service: svc},
		{Kind: ipvs.OpCreateDestination, Service: svc, Destination: pod("10.244.1.5", 1)},
		{Kind: ipvs.OpCreateDestination, Service: svc, Destination: pod("10.244.1.5", 1)},
		{Kind: ipvs.OpCreateDestination, Service: svc, Destination: pod("10.244.2.7", 100000)},
	})
	fmt.Println(err)
	fmt.Println("exists:", errors.Is(err, unix.EEXIST))

	ds, err := c.Destinations(svc.Key())
	if err != nil {
		panic(err)
	}
	for _, d := range ds {
		fmt.Println(d.Destination, "weight", d.Destination.Weight)
	}
	// Output:
	// ipvs: 1 of 4 operations failed; create destination 10.244.1.5:5353 on UDP/10.96.0.10:53: file exists
	// exists: true
	// 10.244.2.7:5353 weight 100000
	// 10.244.1.5:5353 weight 1
}
