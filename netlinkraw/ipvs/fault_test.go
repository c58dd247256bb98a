package ipvs_test

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw"
	"github.com/proxysinks/proxysinks/netlinkraw/internal/fault"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs/ipvstest"
)

// faultOps creates n services with one destination each (2n operations:
// service i at index 2i, its destination at 2i+1).
func faultOps(n int) []ipvs.Op {
	var ops []ipvs.Op
	for i := range n {
		svc := ipvs.Service{Protocol: ipvs.TCP, Address: netip.AddrFrom4([4]byte{10, 96, 0, byte(i + 1)}), Port: 80, Scheduler: "rr"}
		ops = append(ops,
			ipvs.Op{Kind: ipvs.OpCreateService, Service: svc},
			ipvs.Op{Kind: ipvs.OpCreateDestination, Service: svc, Destination: ipvs.Destination{
				Address: netip.AddrFrom4([4]byte{10, 244, 0, byte(i + 1)}), Port: 8080, Weight: 1}})
	}
	return ops
}

// serviceAddrs lists the fake's services' addresses and destination
// counts, through the client.
func serviceAddrs(t *testing.T, c *ipvs.Conn) []string {
	t.Helper()
	svcs, err := c.Services()
	if err != nil {
		t.Fatalf("Services: %v", err)
	}
	var out []string
	for _, s := range svcs {
		ds, err := c.Destinations(s.Service.Key())
		if err != nil {
			t.Fatalf("Destinations: %v", err)
		}
		out = append(out, fmt.Sprintf("%s/%d", s.Service.Address, len(ds)))
	}
	slices.Sort(out)
	return out
}

// TestFaultNthOperation: a kernel error on one operation of a batch names
// exactly that operation (errors.Is works); the others are applied; the
// next call succeeds.
func TestFaultNthOperation(t *testing.T) {
	c, k := dialFake(t)
	k.FailNth(4, unix.ENOMEM) // the second service's destination
	err := c.Apply(faultOps(4))
	var be *ipvs.BatchError
	if !errors.As(err, &be) || be.Failed != 1 {
		t.Fatalf("Apply: %v, want a BatchError with one failure", err)
	}
	for i, e := range be.Errors {
		if (e != nil) != (i == 3) {
			t.Errorf("operation %d: error %v", i, e)
		}
	}
	var oe *ipvs.Error
	if !errors.Is(err, unix.ENOMEM) || !errors.As(be.Errors[3], &oe) || oe.Index != 3 {
		t.Errorf("error %v: not ENOMEM on operation 3", err)
	}
	if !strings.Contains(err.Error(), "create destination 10.244.0.2:8080 on TCP/10.96.0.2:80") {
		t.Errorf("error %q does not name the destination", err)
	}
	if diff := cmp.Diff([]string{"10.96.0.1/1", "10.96.0.2/0", "10.96.0.3/1", "10.96.0.4/1"}, serviceAddrs(t, c)); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
	// The fault cleared: retrying exactly the failed operation succeeds.
	if err := c.Apply([]ipvs.Op{faultOps(4)[3]}); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if diff := cmp.Diff([]string{"10.96.0.1/1", "10.96.0.2/1", "10.96.0.3/1", "10.96.0.4/1"}, serviceAddrs(t, c)); diff != "" {
		t.Errorf("after the retry (-want +got):\n%s", diff)
	}
}

// TestFaultLostReply: a lost reply fails the call with ErrReplyTimeout in
// bounded time, for a batch, a single request and a dump; the connection
// works afterwards.
func TestFaultLostReply(t *testing.T) {
	c, k := dialFake(t)
	c.SetReplyTimeout(100 * time.Millisecond)
	k.DropReplies(1) // the batch's only ACK
	err := fault.Bounded(t, 2*time.Second, func() error { return c.Apply(faultOps(3)) })
	if !errors.Is(err, netlinkraw.ErrReplyTimeout) || !strings.Contains(err.Error(), "ipvs: apply") {
		t.Fatalf("Apply with a lost reply: %v, want ErrReplyTimeout", err)
	}
	k.DropReplies(1)
	svc := faultOps(5)[8].Service
	err = fault.Bounded(t, 2*time.Second, func() error { return c.CreateService(svc) })
	if !errors.Is(err, netlinkraw.ErrReplyTimeout) {
		t.Fatalf("CreateService with a lost reply: %v, want ErrReplyTimeout", err)
	}
	k.DropReplies(1)
	_, err = c.Services()
	if !errors.Is(err, netlinkraw.ErrReplyTimeout) {
		t.Fatalf("Services with a lost dump: %v, want ErrReplyTimeout", err)
	}
	// The fault cleared: the next calls succeed (the kernel had applied
	// the operations; only the answers were lost).
	if diff := cmp.Diff([]string{"10.96.0.1/1", "10.96.0.2/1", "10.96.0.3/1", "10.96.0.5/0"}, serviceAddrs(t, c)); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if err := c.Apply(faultOps(4)[6:]); err != nil {
		t.Errorf("Apply after the fault: %v", err)
	}
}

// TestFaultDelayedReply: a reply later than the timeout fails the call;
// the late reply is skipped by the next call, which succeeds.
func TestFaultDelayedReply(t *testing.T) {
	c, k := dialFake(t)
	c.SetReplyTimeout(100 * time.Millisecond)
	k.DelayReplies(1, 400*time.Millisecond)
	err := fault.Bounded(t, 2*time.Second, func() error { return c.Apply(faultOps(2)) })
	if !errors.Is(err, netlinkraw.ErrReplyTimeout) {
		t.Fatalf("Apply with a late reply: %v, want ErrReplyTimeout", err)
	}
	time.Sleep(400 * time.Millisecond) // the late ACK is now queued
	c.SetReplyTimeout(time.Second)
	if err := c.Apply(faultOps(3)[4:]); err != nil {
		t.Fatalf("Apply after the late reply: %v", err)
	}
	if diff := cmp.Diff([]string{"10.96.0.1/1", "10.96.0.2/1", "10.96.0.3/1"}, serviceAddrs(t, c)); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

// TestFaultENOBUFS: a receive that fails with ENOBUFS (replies lost to a
// full receive buffer) fails the call with an error matching it; the
// failures already read stay in the chain; the connection works after.
func TestFaultENOBUFS(t *testing.T) {
	c, k := dialFake(t)
	c.SetReplyTimeout(100 * time.Millisecond)
	k.FailReceives(1, unix.ENOBUFS)
	err := c.Apply(faultOps(2))
	if !errors.Is(err, unix.ENOBUFS) {
		t.Fatalf("Apply: %v, want ENOBUFS", err)
	}
	// The kernel had applied the batch; only its answer was lost.
	if err := c.Apply(faultOps(2)[:1]); !errors.Is(err, unix.EEXIST) {
		t.Errorf("next Apply: %v, want EEXIST (the first batch was applied)", err)
	}
	if diff := cmp.Diff([]string{"10.96.0.1/1", "10.96.0.2/1"}, serviceAddrs(t, c)); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

// TestFaultDumpInterrupted: an interrupted dump is run again; one
// interrupted on every attempt is ErrDumpInterrupted.
func TestFaultDumpInterrupted(t *testing.T) {
	c, k := dialFake(t)
	if err := c.Apply(faultOps(3)); err != nil {
		t.Fatal(err)
	}
	k.InterruptDumps(2)
	if diff := cmp.Diff([]string{"10.96.0.1/1", "10.96.0.2/1", "10.96.0.3/1"}, serviceAddrs(t, c)); diff != "" {
		t.Errorf("after two interrupted dumps (-want +got):\n%s", diff)
	}
	k.InterruptDumps(1000)
	if _, err := c.Services(); !errors.Is(err, netlinkraw.ErrDumpInterrupted) {
		t.Errorf("always interrupted: %v, want ErrDumpInterrupted", err)
	}
	k.ClearFaults()
	if got := serviceAddrs(t, c); len(got) != 3 {
		t.Errorf("after the fault cleared: %v", got)
	}
}

// TestFakeContractWithFaultsCleared: faults that were set and cleared
// leave the fake passing the contract.
func TestFakeContractWithFaultsCleared(t *testing.T) {
	contract(t, target{
		dial: func(t *testing.T) *ipvs.Conn {
			c, k := dialFake(t)
			k.FailNth(1, unix.EIO)
			k.DropReplies(3)
			k.DelayReplies(2, time.Hour)
			k.FailReceives(1, unix.ENOBUFS)
			k.InterruptDumps(5)
			k.ClearFaults()
			return c
		},
		schedulers: ipvstest.DefaultSchedulers,
	})
}

// TestFaultLateReplyThenDump: after a call gave up on a late reply, the
// first call on the connection is a dump. The late datagram (an ACK, or
// the whole answer to a dump, empty or not) reaches that dump first; it is
// skipped by sequence number, and the dump returns exactly the kernel's
// state: never an empty list without an error.
func TestFaultLateReplyThenDump(t *testing.T) {
	missing := ipvs.ServiceKey{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.97.0.1"), Port: 1}
	for _, tc := range []struct {
		name string
		late func(c *ipvs.Conn) error // the call whose answer comes late
	}{
		{"late ACK", func(c *ipvs.Conn) error { return c.Apply(faultOps(4)[6:]) }},
		{"late reply", func(c *ipvs.Conn) error { _, err := c.Info(); return err }},
		{"late dump", func(c *ipvs.Conn) error { _, err := c.Services(); return err }},
		{"late empty dump", func(c *ipvs.Conn) error { _, err := c.Destinations(missing); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, k := dialFake(t)
			if err := c.Apply(faultOps(3)); err != nil {
				t.Fatal(err)
			}
			c.SetReplyTimeout(100 * time.Millisecond)
			k.DelayReplies(2, 300*time.Millisecond)
			if err := fault.Bounded(t, 2*time.Second, func() error { return tc.late(c) }); !errors.Is(err, netlinkraw.ErrReplyTimeout) {
				t.Fatalf("call with a late answer: %v, want ErrReplyTimeout", err)
			}
			time.Sleep(300 * time.Millisecond) // the late answer is queued now
			c.SetReplyTimeout(5 * time.Second) // generous: a timeout here would be a new fault
			got, err := c.Services()
			if err != nil {
				t.Fatalf("Services after the late answer: %v", err)
			}
			want := []string{"10.96.0.1/1", "10.96.0.2/1", "10.96.0.3/1"}
			if tc.name == "late ACK" {
				want = append(want, "10.96.0.4/1")
			}
			if len(got) != len(want) {
				t.Fatalf("Services after the late answer: %d services, want %d", len(got), len(want))
			}
			if diff := cmp.Diff(want, serviceAddrs(t, c)); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
			// Every late answer read, dumps take one receive again.
			before := c.Counters()
			if _, err := c.Services(); err != nil {
				t.Fatal(err)
			}
			if n := c.Counters().Recvmsg - before.Recvmsg; n != 1 {
				t.Errorf("a dump after the fault took %d receives, want 1", n)
			}
		})
	}
}

// TestFaultLostDumpAnswer: a dump whose answer is lost fails, also when
// the dump would have been empty; it never returns an empty list.
func TestFaultLostDumpAnswer(t *testing.T) {
	for _, n := range []int{0, 2} {
		t.Run(fmt.Sprintf("services=%d", n), func(t *testing.T) {
			c, k := dialFake(t)
			if n > 0 {
				if err := c.Apply(faultOps(n)); err != nil {
					t.Fatal(err)
				}
			}
			c.SetReplyTimeout(100 * time.Millisecond)
			k.DropReplies(1)
			got, err := fault.Bounded2(t, 2*time.Second, c.Services)
			if !errors.Is(err, netlinkraw.ErrReplyTimeout) {
				t.Fatalf("Services with its answer lost: %d services, error %v; want ErrReplyTimeout", len(got), err)
			}
			got, err = c.Services()
			if err != nil || len(got) != n {
				t.Errorf("Services after the fault: %d services, error %v; want %d", len(got), err, n)
			}
		})
	}
}
