package nfacct

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// TestDecode: a reply's attributes give the counter; one missing is an
// error.
func TestDecode(t *testing.T) {
	var e nlcore.Encoder
	e.Nfgen(unix.AF_UNSPEC, 0)
	e.Str(attrName, "ct_state_invalid_dropped_pkts")
	e.BE64(attrPkts, 7)
	e.BE64(attrBytes, 420)
	e.U32(4, 1) // NFACCT_USE: skipped
	got, err := decode(e.B)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Counter{Name: "ct_state_invalid_dropped_pkts", Packets: 7, Bytes: 420}, got); diff != "" {
		t.Errorf("counter (-want +got):\n%s", diff)
	}
	var short nlcore.Encoder
	short.Nfgen(unix.AF_UNSPEC, 0)
	short.Str(attrName, "x")
	if _, err := decode(short.B); err == nil {
		t.Error("a reply without counts decoded")
	}
}

// TestKernel: in a fresh namespace, a missing object is ENOENT; Ensure
// creates it once (a second Ensure keeps its counts); an iptables rule
// counts into it, and iptables-save prints the match as kube-proxy's
// differential sees it.
func TestKernel(t *testing.T) {
	nstest.LookPath(t, "iptables-nft")
	ns := nstest.New(t)
	c, err := Dial(&Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const name = "localhost_nps_accepted_pkts"
	if _, err := c.Get(name); !errors.Is(err, unix.ENOENT) {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT) {
			nstest.Missing(t, "nfnetlink_acct in the kernel: %v", err)
		}
		t.Fatalf("get of a missing object: %v, want ENOENT", err)
	}
	if err := c.Ensure(name); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(name); err != nil || got != (Counter{Name: name}) {
		t.Fatalf("new object: %+v, %v", got, err)
	}
	if out, err := ns.Run("iptables-nft", "-A", "OUTPUT", "-d", "127.0.0.1/32", "-p", "udp", "-m", "udp", "--dport", "9", "-m", "nfacct", "--nfacct-name", name, "-j", "ACCEPT"); err != nil {
		nstest.Missing(t, "the nfacct match (xt_nfacct): %v %s", err, out)
	}
	if err := ns.Do(func() error {
		// Unconnected: the port-unreachable answers fail no write.
		u, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer u.Close()
		for range 3 {
			if _, err := u.WriteTo([]byte("x"), &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Ensure(name); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(name)
	if err != nil || got.Packets != 3 || got.Bytes == 0 {
		t.Errorf("after 3 packets: %+v, %v; want 3 packets", got, err)
	}
	save := ns.MustRun(t, "iptables-nft-save", "-t", "filter")
	if want := "-m nfacct --nfacct-name  " + name + " -j ACCEPT"; !strings.Contains(save, want) {
		t.Errorf("iptables-save lacks %q:\n%s", want, save)
	}
	if err := checkName("get", strings.Repeat("x", MaxName+1)); err == nil {
		t.Error("a 32-byte name was taken")
	}
}
