package nlcore

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// TestRequestAndDumpKernel runs a request, a refused request and a dump
// against the host kernel's generic netlink controller ("nlctrl"), which
// every kernel has.
func TestRequestAndDumpKernel(t *testing.T) {
	ns := nstest.New(t)
	_, s, err := DialSocket(unix.NETLINK_GENERIC, ns.FD(), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	c := NewConn(s, time.Minute)
	t.Cleanup(func() { c.T.Close() })
	request := func(name string) ([]byte, error) {
		seq := c.NextSeq(1)
		c.Enc.Reset()
		off := c.Enc.BeginMessage(unix.GENL_ID_CTRL, FlagRequest, seq)
		c.Enc.Genl(unix.CTRL_CMD_GETFAMILY, 1)
		c.Enc.Str(unix.CTRL_ATTR_FAMILY_NAME, name)
		c.Enc.EndMessage(off)
		return c.Request(seq, true, unix.GENL_ID_CTRL)
	}
	b, err := request("nlctrl")
	if err != nil {
		t.Fatal(err)
	}
	v, ok, err := FindAttr(b[GenlHdrLen:], unix.CTRL_ATTR_FAMILY_ID)
	if err != nil || !ok || Native.Uint16(v) != unix.GENL_ID_CTRL {
		t.Errorf("nlctrl's family ID attribute %x (%v)", v, err)
	}
	if _, err := request("no-such-family"); !errors.Is(err, unix.ENOENT) {
		t.Errorf("unknown family: %v, want ENOENT", err)
	}
	var names []string
	err = c.Dump(DumpRequest{
		Type:    unix.GENL_ID_CTRL,
		Payload: func(e *Encoder) { e.Genl(unix.CTRL_CMD_GETFAMILY, 1) },
		Reset:   func() { names = names[:0] },
		Each: func(m *Message) error {
			v, ok, err := FindAttr(m.Data[GenlHdrLen:], unix.CTRL_ATTR_FAMILY_NAME)
			if ok {
				names = append(names, GetString(v))
			}
			return err
		},
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
	if c.Ctr.Sendmsg != 3 || c.Ctr.Recvmsg < 3 {
		t.Errorf("counters %+v, want 3 sendmsg and at least 3 recvmsg", c.Ctr)
	}
}
