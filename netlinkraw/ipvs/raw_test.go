package ipvs

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

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
	nc, err := netlink.Dial(unix.NETLINK_GENERIC, &netlink.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	// A lost reply must fail the test, not hang it.
	if err := nc.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	rc, err := nc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	snd, rcv, err := setBuffers(rc, &Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &Conn{family: unix.GENL_ID_CTRL, seq: 1, t: &rawTransport{nc: nc, rc: rc, buf: make([]byte, receiveBufferSize), ctr: nil}}
	c.t.(*rawTransport).ctr = &c.ctr
	c.setLimits(snd, rcv)
	t.Cleanup(func() { c.Close() })
	t.Logf("socket buffers: send %d, receive %d bytes; batches of up to %d messages, %d bytes", snd, rcv, c.maxMsgs, c.maxBytes)
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

func TestRawRequestAndDumpKernel(t *testing.T) {
	c := dialCtrl(t)
	// A doit request with a reply: CTRL_CMD_GETFAMILY for nlctrl itself.
	b, err := c.request(unix.CTRL_CMD_GETFAMILY, true, func(e *encoder) { e.str(unix.CTRL_ATTR_FAMILY_NAME, "nlctrl") })
	if err != nil {
		t.Fatal(err)
	}
	v, ok, err := findAttr(b[genlHdrLen:], unix.CTRL_ATTR_FAMILY_ID)
	if err != nil || !ok || native.Uint16(v) != unix.GENL_ID_CTRL {
		t.Errorf("nlctrl's family ID attribute %x (%v)", v, err)
	}
	// A request the kernel refuses.
	_, err = c.request(unix.CTRL_CMD_GETFAMILY, true, func(e *encoder) { e.str(unix.CTRL_ATTR_FAMILY_NAME, "no-such-family") })
	if !errors.Is(err, unix.ENOENT) {
		t.Errorf("unknown family: %v, want ENOENT", err)
	}
	// A dump of every family.
	var names []string
	err = c.dump(unix.CTRL_CMD_GETFAMILY, nil, func() { names = names[:0] }, func(data []byte) error {
		v, ok, err := findAttr(data[genlHdrLen:], unix.CTRL_ATTR_FAMILY_NAME)
		if ok {
			names = append(names, getString(v))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range names {
		found = found || n == "nlctrl"
	}
	if !found {
		t.Errorf("dump of generic netlink families %v lacks nlctrl", names)
	}
	ctr := c.Counters()
	if ctr.Sendmsg != 3 || ctr.Recvmsg < 3 {
		t.Errorf("counters %+v, want 3 sendmsg and at least 3 recvmsg", ctr)
	}
}
