package ipvs

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// These tests run the system-call transport against the host kernel's
// generic netlink controller ("nlctrl"), which every kernel has: it checks
// batching, sequence matching and dumps on a real socket even where IPVS
// is missing. The IPVS commands sent to nlctrl fail (it has no such
// operations), which is exactly a batch in which everything fails.

func dialCtrl(t *testing.T) *Conn {
	t.Helper()
	ns := nstest.New(t)
	nc, s, err := nlcore.DialSocket(unix.NETLINK_GENERIC, ns.FD(), receiveBufferSize)
	if err != nil {
		t.Fatal(err)
	}
	// A lost reply must fail the test, not hang it.
	c := &Conn{family: unix.GENL_ID_CTRL, nl: nlcore.NewConn(s, time.Minute)}
	t.Cleanup(func() { nc.Close() })
	if err := setBuffers(c.nl, s, &Options{}); err != nil {
		t.Fatal(err)
	}
	c.setLimits(c.nl.SendBuf, c.nl.RecvBuf)
	t.Logf("socket buffers: send %d, receive %d bytes; batches of up to %d messages, %d bytes", c.nl.SendBuf, c.nl.RecvBuf, c.maxMsgs, c.maxBytes)
	return c
}

func TestDialWithoutIPVSKernel(t *testing.T) {
	ns := nstest.New(t)
	for _, o := range []*Options{{NetNS: ns.FD()}, {NetNSPath: ns.Path()}} {
		c, err := Dial(o)
		if err == nil {
			c.Close()
			t.Skip("this kernel has IPVS; the contract suite covers it")
		}
		if !errors.Is(err, ErrNotSupported) {
			t.Fatalf("Dial(%+v) = %v, want ErrNotSupported", o, err)
		}
		if want := "modprobe ip_vs"; !contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := Dial(&Options{NetNSPath: "/nonexistent/netns"}); err == nil || !errors.Is(err, unix.ENOENT) {
		t.Errorf("Dial with a missing namespace path: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestRawBatchAllFailKernel(t *testing.T) {
	c := dialCtrl(t)
	const n = 20000
	ops := make([]Op, n)
	for i := range ops {
		ops[i] = Op{Kind: OpCreateDestination,
			Service:     Service{Protocol: TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 80},
			Destination: Destination{Address: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), Port: 8080}}
	}
	start := time.Now()
	err := c.Apply(ops)
	var be *BatchError
	if !errors.As(err, &be) {
		t.Fatalf("Apply = %v, want a *BatchError", err)
	}
	if be.Failed != n {
		t.Fatalf("%d of %d failed, want all", be.Failed, n)
	}
	var errno unix.Errno
	for i, e := range be.Errors {
		var oe *Error
		if !errors.As(e, &oe) || oe.Index != i || !errors.As(e, &errno) {
			t.Fatalf("operation %d: %v", i, e)
		}
	}
	ctr := c.Counters()
	t.Logf("%d failing operations in %v: %d sendmsg, %d recvmsg, %d messages received; errno %v",
		n, time.Since(start), ctr.Sendmsg, ctr.Recvmsg, ctr.MessagesReceived, errno)
	if want := uint64((n + c.maxMsgs - 1) / c.maxMsgs); ctr.Sendmsg != want {
		t.Errorf("%d sendmsg, want %d", ctr.Sendmsg, want)
	}
	if ctr.MessagesReceived != n {
		t.Errorf("%d replies, want one error per message and no extra ACK", ctr.MessagesReceived)
	}
}
