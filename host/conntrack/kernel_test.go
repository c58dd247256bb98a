package conntrack

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
	ct "github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// The kernel tests run in a fresh network namespace each: conntrack
// tables are per namespace, so they see only their own flows.

// dialNS opens this package's Conn and a raw ti-mo/conntrack connection
// (to create and list flows) in ns; it calls Missing when the kernel has
// no ctnetlink.
func dialNS(t testing.TB, ns *nstest.NetNS) (*Conn, *ct.Conn) {
	t.Helper()
	c, err := Dial(&Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	raw, err := ct.Dial(&netlink.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	if _, err := raw.Dump(nil); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT) {
			nstest.Missing(t, "conntrack netlink (nf_conntrack_netlink): %v", err)
		}
		t.Fatalf("dump conntrack: %v", err)
	}
	return c, raw
}

// udpFlows lists the namespace's UDP flows as "client -> service via
// backend" strings, sorted.
func udpFlows(t *testing.T, raw *ct.Conn) []string {
	t.Helper()
	flows, err := raw.Dump(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range flows {
		o, r := f.TupleOrig, f.TupleReply
		proto := "udp"
		if o.Proto.Protocol != unix.IPPROTO_UDP {
			proto = fmt.Sprint("proto-", o.Proto.Protocol)
		}
		out = append(out, fmt.Sprintf("%s %s -> %s via %s", proto,
			netip.AddrPortFrom(o.IP.SourceAddress, o.Proto.SourcePort),
			netip.AddrPortFrom(o.IP.DestinationAddress, o.Proto.DestinationPort),
			netip.AddrPortFrom(r.IP.SourceAddress, r.Proto.SourcePort)))
	}
	slices.Sort(out)
	return out
}

// TestKernelReconcileCreated creates flows directly through ctnetlink (as
// IPVS and DNAT leave them: the reply comes from the backend) and
// reconciles them with testWant, per family.
func TestKernelReconcileCreated(t *testing.T) {
	ns := nstest.New(t)
	c, raw := dialNS(t, ns)
	flows := []ct.Flow{
		flow(unix.IPPROTO_UDP, "10.0.0.1:40000", "10.96.0.10:53", "10.244.1.5:5353"),
		flow(unix.IPPROTO_UDP, "10.0.0.2:40000", "10.96.0.10:53", "10.244.1.6:5353"),
		flow(unix.IPPROTO_UDP, "10.0.0.1:40001", "192.0.2.10:53", "10.244.1.6:5353"),
		flow(unix.IPPROTO_UDP, "10.0.0.1:40002", "10.96.0.10:54", "10.244.1.6:5353"),
		flow(unix.IPPROTO_UDP, "10.0.0.1:40003", "10.244.1.6:5353", "10.244.1.6:5353"),
		flow(unix.IPPROTO_TCP, "10.0.0.1:40004", "10.96.0.10:53", "10.244.1.6:5353"),
		flow(unix.IPPROTO_UDP, "[fd00::1]:40000", "[fd00::10]:53", "[fd00:244::5]:5353"),
		flow(unix.IPPROTO_UDP, "[fd00::1]:40001", "[fd00::10]:53", "[fd00:244::6]:5353"),
		// A service without endpoints: every flow to it is stale.
		flow(unix.IPPROTO_UDP, "10.0.0.1:40010", "10.96.0.30:53", "10.96.0.30:53"),
		// Node port 30053 on any address.
		flow(unix.IPPROTO_UDP, "10.0.0.1:40020", "192.168.1.2:30053", "10.244.1.5:5353"),
		flow(unix.IPPROTO_UDP, "10.0.0.1:40021", "192.168.1.2:30053", "192.168.1.2:30053"),
	}
	for _, f := range flows {
		f.Timeout = 120
		if f.TupleOrig.Proto.Protocol == unix.IPPROTO_TCP {
			f.ProtoInfo.TCP = &ct.ProtoInfoTCP{State: 3} // ESTABLISHED
		}
		if err := raw.Create(f); err != nil {
			t.Fatalf("create flow %s: %v", f.TupleOrig, err)
		}
	}
	before := udpFlows(t, raw)
	if len(before) != len(flows) {
		t.Fatalf("created %d flows, the kernel lists %d: %v", len(flows), len(before), before)
	}
	w := testWant()
	n, err := c.ReconcileUDP(false, w)
	if err != nil || n != 4 {
		t.Fatalf("ReconcileUDP(IPv4) = %d, %v; want 4 flows deleted", n, err)
	}
	n, err = c.ReconcileUDP(true, w)
	if err != nil || n != 1 {
		t.Fatalf("ReconcileUDP(IPv6) = %d, %v; want 1 flow deleted", n, err)
	}
	want := []string{
		"proto-6 10.0.0.1:40004 -> 10.96.0.10:53 via 10.244.1.6:5353",
		"udp 10.0.0.1:40000 -> 10.96.0.10:53 via 10.244.1.5:5353",
		"udp 10.0.0.1:40002 -> 10.96.0.10:54 via 10.244.1.6:5353",
		"udp 10.0.0.1:40003 -> 10.244.1.6:5353 via 10.244.1.6:5353",
		"udp 10.0.0.1:40020 -> 192.168.1.2:30053 via 10.244.1.5:5353",
		"udp [fd00::1]:40000 -> [fd00::10]:53 via [fd00:244::5]:5353",
	}
	if diff := cmp.Diff(want, udpFlows(t, raw)); diff != "" {
		t.Errorf("flows left (-want +got):\n%s", diff)
	}
	// Again: nothing left to delete.
	if n, err := c.ReconcileUDP(false, w); err != nil || n != 0 {
		t.Errorf("second ReconcileUDP = %d, %v; want 0, nil", n, err)
	}
}

// send sends one UDP datagram from src to dst inside ns.
func send(t *testing.T, ns *nstest.NetNS, src, dst string) {
	t.Helper()
	err := ns.Do(func() error {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(src)))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.WriteToUDP([]byte("ping"), net.UDPAddrFromAddrPort(netip.MustParseAddrPort(dst)))
		return err
	})
	if err != nil {
		t.Fatalf("send %s -> %s: %v", src, dst, err)
	}
}

// TestKernelReconcileTraffic makes real NAT'd flows: UDP datagrams to a
// service address that an iptables DNAT rule sends to a backend, as IPVS
// does. It shows the problem (a client keeps its stale flow to the old
// backend after the service moves) and that ReconcileUDP fixes it while
// the flows of serving backends and other services stay.
func TestKernelReconcileTraffic(t *testing.T) {
	iptables := nstest.LookPath(t, "iptables")
	ns := nstest.New(t)
	c, raw := dialNS(t, ns)
	for _, a := range []string{"10.0.0.1", "10.96.0.10", "10.96.0.11", "10.244.1.5", "10.244.1.6"} {
		ns.MustRun(t, "ip", "addr", "add", a+"/32", "dev", "lo")
	}
	rule := func(op string, args ...string) {
		t.Helper()
		if out, err := ns.Run(iptables, append([]string{"-w", "-t", "nat", op, "OUTPUT", "-p", "udp"}, args...)...); err != nil {
			t.Fatalf("iptables %s %v: %v: %s", op, args, err, out)
		}
	}
	// The first client port is pinned to backend .6; the rest of
	// 10.96.0.10:53 goes to .5, and 10.96.0.11:53 to .5 too.
	rule("-A", "-d", "10.96.0.10", "--dport", "53", "--sport", "40001", "-j", "DNAT", "--to-destination", "10.244.1.6:5353")
	rule("-A", "-d", "10.96.0.10", "--dport", "53", "-j", "DNAT", "--to-destination", "10.244.1.5:5353")
	rule("-A", "-d", "10.96.0.11", "--dport", "53", "-j", "DNAT", "--to-destination", "10.244.1.5:5353")

	send(t, ns, "10.0.0.1:40000", "10.96.0.10:53")
	send(t, ns, "10.0.0.1:40001", "10.96.0.10:53")
	send(t, ns, "10.0.0.1:40002", "10.96.0.11:53")
	send(t, ns, "10.0.0.1:40003", "10.244.1.5:5353")
	want := []string{
		"udp 10.0.0.1:40000 -> 10.96.0.10:53 via 10.244.1.5:5353",
		"udp 10.0.0.1:40001 -> 10.96.0.10:53 via 10.244.1.6:5353",
		"udp 10.0.0.1:40002 -> 10.96.0.11:53 via 10.244.1.5:5353",
		"udp 10.0.0.1:40003 -> 10.244.1.5:5353 via 10.244.1.5:5353",
	}
	if diff := cmp.Diff(want, udpFlows(t, raw)); diff != "" {
		t.Fatalf("flows after the first datagrams (-want +got):\n%s", diff)
	}

	// Backend .5 of 10.96.0.10:53 goes away: the service now sends to .6.
	rule("-D", "-d", "10.96.0.10", "--dport", "53", "-j", "DNAT", "--to-destination", "10.244.1.5:5353")
	rule("-A", "-d", "10.96.0.10", "--dport", "53", "-j", "DNAT", "--to-destination", "10.244.1.6:5353")
	// Without a reconcile, the client's next datagram still follows its stale
	// flow to the removed backend.
	send(t, ns, "10.0.0.1:40000", "10.96.0.10:53")
	if got := udpFlows(t, raw); !slices.Contains(got, want[0]) {
		t.Fatalf("the stale flow is gone without a reconcile (the test would prove nothing): %v", got)
	}

	n, err := c.ReconcileUDP(false, &Want{Frontends: map[netip.AddrPort]Endpoints{
		netip.MustParseAddrPort("10.96.0.10:53"): endpoints("10.244.1.6:5353"),
		netip.MustParseAddrPort("10.96.0.11:53"): endpoints("10.244.1.5:5353"),
	}})
	if err != nil || n != 1 {
		t.Fatalf("ReconcileUDP = %d, %v; want 1 flow deleted", n, err)
	}
	if diff := cmp.Diff(want[1:], udpFlows(t, raw)); diff != "" {
		t.Errorf("flows after the reconcile (-want +got):\n%s", diff)
	}
	// The client's next datagram reaches the live backend.
	send(t, ns, "10.0.0.1:40000", "10.96.0.10:53")
	if got := udpFlows(t, raw); !slices.Contains(got, "udp 10.0.0.1:40000 -> 10.96.0.10:53 via 10.244.1.6:5353") {
		t.Errorf("after the reconcile the client does not reach the live backend: %v", got)
	}
}

// TestKernelReconcileIPVS checks the flows IPVS itself leaves (with
// net.ipv4.vs.conntrack=1, as the sinks set it): a UDP virtual server
// sending to a destination gives a flow whose original destination is the
// virtual server and whose reply source is the destination, which
// ReconcileUDP deletes once the destination no longer serves. It needs IPVS: it runs in the VM.
func TestKernelReconcileIPVS(t *testing.T) {
	iptables := nstest.LookPath(t, "iptables")
	ns := nstest.New(t)
	c, raw := dialNS(t, ns)
	vsConn, err := ipvs.Dial(&ipvs.Options{NetNS: ns.FD()})
	if errors.Is(err, ipvs.ErrNotSupported) {
		_ = exec.Command("modprobe", "ip_vs").Run()
		vsConn, err = ipvs.Dial(&ipvs.Options{NetNS: ns.FD()})
	}
	if err != nil {
		nstest.Missing(t, "IPVS: %v", err)
	}
	defer vsConn.Close()
	err = ns.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/vs/conntrack", []byte("1"), 0)
	})
	if err != nil {
		t.Fatalf("set net.ipv4.vs.conntrack=1 in the namespace: %v", err)
	}
	for _, a := range []string{"10.0.0.1", "10.96.0.10", "10.244.1.5"} {
		ns.MustRun(t, "ip", "addr", "add", a+"/32", "dev", "lo")
	}
	// Conntrack tracks a namespace's packets once a rule needs it, as the
	// sinks' masquerade rule (KUBE-POSTROUTING) does on a node.
	ns.MustRun(t, iptables, "-w", "-t", "nat", "-A", "POSTROUTING", "-m", "mark", "--mark", "0x4000/0x4000", "-j", "MASQUERADE")
	svc := ipvs.Service{Family: ipvs.IPv4, Protocol: ipvs.UDP, Address: netip.MustParseAddr("10.96.0.10"), Port: 53, Scheduler: "rr", Netmask: 32}
	dst := ipvs.Destination{Family: ipvs.IPv4, Address: netip.MustParseAddr("10.244.1.5"), Port: 5353, Forward: ipvs.Masquerade, Weight: 1}
	if err := vsConn.CreateService(svc); err != nil {
		t.Fatal(err)
	}
	if err := vsConn.CreateDestination(svc, dst); err != nil {
		t.Fatal(err)
	}

	send(t, ns, "10.0.0.1:40000", "10.96.0.10:53")
	send(t, ns, "10.0.0.1:40001", "10.244.1.5:5353")
	want := []string{
		"udp 10.0.0.1:40000 -> 10.96.0.10:53 via 10.244.1.5:5353",
		"udp 10.0.0.1:40001 -> 10.244.1.5:5353 via 10.244.1.5:5353",
	}
	if diff := cmp.Diff(want, udpFlows(t, raw)); diff != "" {
		t.Fatalf("flows IPVS left (-want +got):\n%s", diff)
	}
	n, err := c.ReconcileUDP(false, &Want{Frontends: map[netip.AddrPort]Endpoints{
		netip.MustParseAddrPort("10.96.0.10:53"): endpoints("10.244.1.6:5353"),
		netip.MustParseAddrPort("10.96.0.11:53"): endpoints("10.244.1.5:5353"),
	}})
	if err != nil || n != 1 {
		t.Fatalf("ReconcileUDP = %d, %v; want 1 flow deleted", n, err)
	}
	if diff := cmp.Diff(want[1:], udpFlows(t, raw)); diff != "" {
		t.Errorf("flows after the reconcile (-want +got):\n%s", diff)
	}
}
