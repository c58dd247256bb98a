package ipvs_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"

	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs/ipvstest"
)

// Tests of client behaviour that need the fake's instrumentation.

func TestNotSupportedFake(t *testing.T) {
	_, err := ipvstest.New(ipvstest.WithoutIPVS()).Conn()
	if !errors.Is(err, ipvs.ErrNotSupported) {
		t.Fatalf("got %v, want ErrNotSupported", err)
	}
	if !strings.Contains(err.Error(), "modprobe ip_vs") {
		t.Errorf("error %q does not say how to load IPVS", err)
	}
}

func TestAckOnlyOnLastMessageFake(t *testing.T) {
	c, k := dialFake(t)
	var ops []ipvs.Op
	for i := range 3000 {
		s := ipvs.Service{Protocol: ipvs.TCP, Address: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Scheduler: "rr"}
		ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateService, Service: s})
	}
	before := k.Stats()
	if err := c.Apply(ops); err != nil {
		t.Fatal(err)
	}
	after := k.Stats()
	sends, acks, msgs := after.Sends-before.Sends, after.AckRequested-before.AckRequested, after.Messages-before.Messages
	if msgs != 3000 || sends != 3 || acks != 3 {
		t.Errorf("3000 operations went as %d messages in %d sends with %d ACK requests; want 3000 in 3 with 3", msgs, sends, acks)
	}
	ctr := c.Counters()
	if ctr.MessagesSent < 3000 || ctr.Sendmsg < 3 {
		t.Errorf("counters %+v miss the batch", ctr)
	}
}

func TestDumpInterruptedFake(t *testing.T) {
	c, k := dialFake(t)
	s := ipvs.Service{Protocol: ipvs.TCP, Address: netip.MustParseAddr("10.96.0.1"), Port: 80, Scheduler: "rr"}
	if err := c.CreateService(s); err != nil {
		t.Fatal(err)
	}
	k.InterruptDumps(2)
	before := c.Counters()
	got, err := c.Services()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Service.Key() != s.Key() {
		t.Errorf("services after retries: %+v", got)
	}
	if n := c.Counters().Sendmsg - before.Sendmsg; n != 3 {
		t.Errorf("%d dump requests, want 3 (two interrupted, one retry that succeeds)", n)
	}
	// (netlink.Conn hides the final DONE message, so the fake can only
	// signal an interrupted dump on entries: give the service one.)
	if err := c.CreateDestination(s, ipvs.Destination{Address: netip.MustParseAddr("10.244.0.1"), Port: 80, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	k.InterruptDumps(1000)
	if _, err := c.Destinations(s.Key()); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("a dump interrupted every time: %v", err)
	}
}

func TestFakeReceiveWithoutRequest(t *testing.T) {
	nc := ipvstest.New().Dial()
	defer nc.Close()
	if _, err := nc.Receive(); err == nil || !strings.Contains(err.Error(), "would block") {
		t.Errorf("receive with nothing queued: %v", err)
	}
	// An unknown netlink message type gets ENOENT, like the kernel.
	if _, err := nc.Execute(netlink.Message{Header: netlink.Header{Type: 0x7fff, Flags: netlink.Request}}); err == nil {
		t.Error("unknown family accepted")
	}
}
