package ipset_test

import (
	"errors"
	"fmt"
	"log"
	"net/netip"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
)

// Example programs kube-proxy's KUBE-CLUSTER-IP set in a throwaway network
// namespace (it needs root, like kube-proxy).
func Example() {
	nsFD, err := throwawayNetNS()
	if err != nil {
		log.Fatal(err)
	}
	defer unix.Close(nsFD)

	c, err := ipset.Dial(&ipset.Config{NetNS: nsFD})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	set := ipset.Set{Name: "KUBE-CLUSTER-IP", Type: ipset.HashIPPort, Family: ipset.INET, HashSize: 1024, MaxElem: 65536}
	if err := c.Create(set, ipset.Exist); err != nil {
		log.Fatal(err)
	}
	entries := []ipset.Entry{
		{IP: netip.MustParseAddr("10.96.0.10"), Proto: ipset.UDP, Port: 53},
		{IP: netip.MustParseAddr("10.96.0.1"), Proto: ipset.TCP, Port: 443},
	}
	if err := c.Add(set.Name, entries); err != nil {
		log.Fatal(err)
	}
	// Adding again without Exist names the entries that failed.
	err = c.Add(set.Name, entries[1:])
	var be *ipset.BatchError
	if errors.As(err, &be) {
		fmt.Println(be.Failed[0].Entry, "->", be.Failed[0].Err)
	}
	ok, _ := c.Test(set.Name, entries[0])
	fmt.Println("has", entries[0], ok)
	h, listed, _ := c.List(set.Name)
	fmt.Println(h.Name, h.Type, h.Family, len(listed), "entries")
	// Output:
	// 10.96.0.1,tcp:443 -> element already exists
	// has 10.96.0.10,udp:53 true
	// KUBE-CLUSTER-IP hash:ip,port inet 2 entries
}

// throwawayNetNS creates a network namespace and returns a descriptor for
// it; the namespace goes away when the descriptor is closed.
func throwawayNetNS() (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result)
	go func() {
		// The thread stays locked and is discarded: it is in the new
		// namespace.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- result{-1, err}
			return
		}
		fd, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}
