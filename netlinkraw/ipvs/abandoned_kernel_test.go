package ipvs_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/proxysinks/proxysinks/netlinkraw"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
)

// TestAbandonedCallsKernel: calls that gave up waiting on the real kernel
// (a 1ns reply timeout fails the wait before the first read, so every
// reply stays queued: late replies) leave stale answers on the socket,
// among them a dump the kernel is still producing (more services than one
// datagram holds), which would make it refuse the next dump with EBUSY.
// The next calls on the same Conn skip the stale answers and return
// exactly the kernel's state: never empty, short or failed because of
// them.
func TestAbandonedCallsKernel(t *testing.T) {
	c := dialKernel(t)
	const n = 2000 // several dump datagrams
	var ops []ipvs.Op
	for i := range n {
		ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateService, Service: ipvs.Service{
			Protocol: ipvs.TCP, Address: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Scheduler: "rr"}})
	}
	if err := c.Apply(ops); err != nil {
		t.Fatal(err)
	}
	missing := ipvs.ServiceKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.97.0.1"), Port: 1}
	extra := ipvs.Service{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.98.0.1"), Port: 80, Scheduler: "rr"}
	for _, tc := range []struct {
		name    string
		abandon func() error
		want    int
	}{
		{"after a command", func() error { return c.CreateService(extra) }, n + 1},
		{"after a request", func() error { _, err := c.Info(); return err }, n + 1},
		{"after an empty dump", func() error { _, err := c.Destinations(missing); return err }, n + 1},
		{"after a large dump", func() error { _, err := c.Services(); return err }, n + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.SetReplyTimeout(time.Nanosecond)
			err := tc.abandon()
			c.SetReplyTimeout(0)
			if !errors.Is(err, netlinkraw.ErrReplyTimeout) {
				t.Fatalf("call with a 1ns reply timeout: %v, want ErrReplyTimeout", err)
			}
			got, err := c.Services()
			if err != nil {
				t.Fatalf("Services after the abandoned call: %v", err)
			}
			if len(got) != tc.want {
				t.Errorf("Services after the abandoned call: %d services, want %d", len(got), tc.want)
			}
			ds, err := c.Destinations(missing)
			if err != nil || len(ds) != 0 {
				t.Errorf("Destinations of a missing service after the abandoned call: %v, %v; want none", ds, err)
			}
		})
	}
}
