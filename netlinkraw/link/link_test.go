package link_test

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/link"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

var cmpAddr = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func dial(t *testing.T) (*link.Conn, *nstest.NetNS) {
	t.Helper()
	ns := nstest.New(t)
	c, err := link.Dial(&link.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ns
}

// dummy creates kube-ipvs0, or stops the test where the kernel has no
// dummy links (the build machines; the VM has them).
func dummy(t *testing.T, c *link.Conn) link.Link {
	t.Helper()
	l, err := c.EnsureDummy(link.DefaultDummy)
	if errors.Is(err, unix.EOPNOTSUPP) {
		nstest.Missing(t, "dummy links in the kernel: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// veth adds a veth pair inside ns with the ip CLI.
func veth(t *testing.T, ns *nstest.NetNS, name string) {
	t.Helper()
	nstest.LookPath(t, "ip")
	ns.MustRun(t, "ip", "link", "add", name, "type", "veth", "peer", "name", name+"p")
}

// vips returns n /32 and n/4 /128 service addresses.
func vips(n int) []netip.Addr {
	var out []netip.Addr
	for i := range n {
		out = append(out, netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}))
	}
	for i := range n / 4 {
		out = append(out, netip.AddrFrom16([16]byte{0: 0xfd, 1: 0, 2: 0, 3: 0x96, 14: byte(i >> 8), 15: byte(i)}))
	}
	return out
}

// vipOps are the three operations on a link's VIPs that exercise runs:
// addresses (AddAddresses...) or local routes (AddLocalRoutes...).
type vipOps struct {
	what     string // "address", "local route"
	add, del func(name string, addrs []netip.Addr) error
	list     func(name string) ([]netip.Addr, error)
}

func addressOps(c *link.Conn) vipOps {
	// The kernel adds a link-local IPv6 address to links that are up.
	list := func(name string) ([]netip.Addr, error) {
		a, err := c.Addresses(name)
		return withoutLinkLocal(a), err
	}
	return vipOps{"address", c.AddAddresses, c.DelAddresses, list}
}

// exercise adds want on a link, adds some again, lists them, calls
// between (if not nil), deletes half, deletes some again, lists, deletes
// all: adding what is there and deleting what is not are not errors.
func exercise(t *testing.T, ops vipOps, name string, want []netip.Addr, between func()) {
	t.Helper()
	n := len(want)
	check := func(step string, want []netip.Addr) {
		t.Helper()
		got, err := ops.list(name)
		if err != nil {
			t.Fatal(err)
		}
		sorted := slices.Clone(want)
		sortAddrs(sorted)
		if len(sorted) == 0 {
			sorted = nil
		}
		if d := cmp.Diff(sorted, got, cmpAddr); d != "" {
			t.Fatalf("%ss on %s after %s -want +got:\n%s", ops.what, name, step, d)
		}
	}
	if err := ops.add(name, want); err != nil {
		t.Fatal(err)
	}
	if err := ops.add(name, want[:10]); err != nil {
		t.Fatalf("adding present %ss: %v", ops.what, err)
	}
	check("adding", want)
	if between != nil {
		between()
	}
	if err := ops.del(name, want[:n/2]); err != nil {
		t.Fatal(err)
	}
	if err := ops.del(name, want[:10]); err != nil {
		t.Fatalf("deleting absent %ss: %v", ops.what, err)
	}
	check("deleting half", want[n/2:])
	if err := ops.del(name, want); err != nil {
		t.Fatal(err)
	}
	check("deleting all", nil)
}

// exerciseAddresses binds, lists and unbinds n IPv4 and n/4 IPv6
// addresses on a link.
func exerciseAddresses(t *testing.T, c *link.Conn, name string, n int) {
	t.Helper()
	exercise(t, addressOps(c), name, vips(n), nil)
}

func sortAddrs(a []netip.Addr) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j].Less(a[j-1]); j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

func withoutLinkLocal(a []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, x := range a {
		if !x.IsLinkLocalUnicast() {
			out = append(out, x)
		}
	}
	return out
}

// TestDummyKernel: create kube-ipvs0, bind 1,000 VIPs (and 250 IPv6 ones),
// list, unbind. Runs in the VM; skipped where dummy links are missing.
func TestDummyKernel(t *testing.T) {
	c, _ := dial(t)
	l := dummy(t, c)
	if l.Kind != "dummy" || l.Name != link.DefaultDummy || l.Up {
		t.Errorf("EnsureDummy = %+v, want a down dummy named %s", l, link.DefaultDummy)
	}
	again, err := c.EnsureDummy(link.DefaultDummy)
	if err != nil || again.Index != l.Index {
		t.Errorf("EnsureDummy again = %+v, %v; want the same link", again, err)
	}
	exerciseAddresses(t, c, link.DefaultDummy, 1000)
	if err := c.DeleteLink(link.DefaultDummy); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LinkByName(link.DefaultDummy); !errors.Is(err, unix.ENODEV) {
		t.Errorf("LinkByName after DeleteLink = %v, want ENODEV", err)
	}
	if err := c.DeleteLink(link.DefaultDummy); err != nil {
		t.Errorf("DeleteLink of a missing link = %v", err)
	}
}

// TestAddressesKernel runs the address operations on a veth link, which
// the build machines' kernel has, standing in for the dummy.
func TestAddressesKernel(t *testing.T) {
	c, ns := dial(t)
	veth(t, ns, "vips0")
	exerciseAddresses(t, c, "vips0", 1000)
}

// TestListAddressesKernel: every address of every link, with its link's
// index (addrwatch chooses the node's among them).
func TestListAddressesKernel(t *testing.T) {
	c, ns := dial(t)
	veth(t, ns, "eth0")
	ns.MustRun(t, "ip", "addr", "add", "192.0.2.10/24", "dev", "eth0")
	ns.MustRun(t, "ip", "addr", "add", "2001:db8::10/64", "dev", "eth0", "nodad")
	eth0, err := c.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	lo, err := c.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.ListAddresses()
	if err != nil {
		t.Fatal(err)
	}
	want := []link.Addr{
		{Prefix: netip.MustParsePrefix("127.0.0.1/8"), Index: lo.Index},
		{Prefix: netip.MustParsePrefix("192.0.2.10/24"), Index: eth0.Index},
		{Prefix: netip.MustParsePrefix("::1/128"), Index: lo.Index},
		{Prefix: netip.MustParsePrefix("2001:db8::10/64"), Index: eth0.Index},
	}
	byAddr := cmpopts.SortSlices(func(a, b link.Addr) bool { return a.Prefix.Addr().Less(b.Prefix.Addr()) })
	// eth0 is down: no IPv6 link-local address comes.
	if d := cmp.Diff(want, got, byAddr, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("ListAddresses -want +got:\n%s", d)
	}
}

// TestNamespaceIsolation: a namespace sees only its own links and
// addresses.
func TestNamespaceIsolation(t *testing.T) {
	c1, ns1 := dial(t)
	c2, _ := dial(t)
	veth(t, ns1, "vips0")
	if err := c1.AddAddresses("vips0", vips(20)); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.LinkByName("vips0"); !errors.Is(err, unix.ENODEV) {
		t.Errorf("the other namespace sees vips0: %v", err)
	}
	got, err := c2.ListAddresses()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range got {
		if !a.Prefix.Addr().IsLoopback() {
			t.Errorf("the other namespace has address %v", a.Prefix)
		}
	}
	links, err := c2.Links()
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 1 || !links[0].Loopback {
		t.Errorf("the other namespace has links %+v, want lo only", links)
	}
}

func TestEnsureDummyOnOtherKind(t *testing.T) {
	c, ns := dial(t)
	veth(t, ns, link.DefaultDummy)
	_, err := c.EnsureDummy(link.DefaultDummy)
	if !errors.Is(err, link.ErrNotDummy) {
		t.Errorf("EnsureDummy over a veth = %v, want ErrNotDummy", err)
	}
}

func TestErrors(t *testing.T) {
	c, _ := dial(t)
	err := c.AddAddresses("nope0", vips(1))
	if !errors.Is(err, unix.ENODEV) || err.Error() != "link: find link nope0: "+unix.ENODEV.Error() {
		t.Errorf("AddAddresses on a missing link = %v", err)
	}
	_, err = c.Addresses("nope0")
	if !errors.Is(err, unix.ENODEV) {
		t.Errorf("Addresses on a missing link = %v", err)
	}
	err = c.AddAddresses("lo", []netip.Addr{{}})
	if err == nil || fmt.Sprint(err) != "link: add address invalid IP on lo: not a plain IP address" {
		t.Errorf("AddAddresses of a zero address = %v", err)
	}
}

// TestBatchFailureInTheMiddle: in one batch, an address the kernel refuses
// (IPv6 on a link with IPv6 disabled) is reported by name, and the
// addresses around it are still bound.
func TestBatchFailureInTheMiddle(t *testing.T) {
	c, ns := dial(t)
	veth(t, ns, "vips1")
	ns.MustRun(t, "sysctl", "-qw", "net.ipv6.conf.vips1.disable_ipv6=1")
	a, b, d := netip.MustParseAddr("10.96.7.1"), netip.MustParseAddr("fd00:96::7"), netip.MustParseAddr("10.96.7.2")
	err := c.AddAddresses("vips1", []netip.Addr{a, b, d})
	if err == nil || !strings.Contains(err.Error(), "add address fd00:96::7 on vips1") {
		t.Fatalf("AddAddresses = %v, want an error naming fd00:96::7", err)
	}
	var be *link.BatchError
	var le *link.Error
	if !errors.As(err, &be) || len(be.Errors) != 1 || !errors.As(be.Errors[0], &le) || le.Addr != b {
		t.Errorf("AddAddresses = %#v, want a BatchError with exactly %v", err, b)
	}
	got, err := c.Addresses("vips1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, a) || !slices.Contains(got, d) || slices.Contains(got, b) {
		t.Errorf("bound %v, want %v and %v only", got, a, d)
	}
}

// TestBatchAnswers: only the last address of each sendmsg asks for an
// acknowledgement, so a batch with nothing failing costs one reply; each
// failed address, first, last or inside a batch, is still named, and the
// others are bound.
func TestBatchAnswers(t *testing.T) {
	c, ns := dial(t)
	veth(t, ns, "vips2")
	ns.MustRun(t, "sysctl", "-qw", "net.ipv6.conf.vips2.disable_ipv6=1")
	// 200 addresses make four batches: 0–63, 64–127, 128–191, 192–199.
	const n = 200
	bad := []int{0, 63, 64, 127, 199} // IPv6: refused on this link
	var addrs, wantFailed []netip.Addr
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, 97, byte(i >> 8), byte(i)})
		if slices.Contains(bad, i) {
			a = netip.AddrFrom16([16]byte{0: 0xfd, 3: 0x97, 15: byte(i)})
			wantFailed = append(wantFailed, a)
		}
		addrs = append(addrs, a)
	}
	before := c.Stats()
	err := c.AddAddresses("vips2", addrs)
	var be *link.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("AddAddresses = %v, want a BatchError", err)
	}
	var gotFailed []netip.Addr
	for _, e := range be.Errors {
		var le *link.Error
		if !errors.As(e, &le) {
			t.Fatalf("failure %v is not a *link.Error", e)
		}
		gotFailed = append(gotFailed, le.Addr)
	}
	if d := cmp.Diff(wantFailed, gotFailed, cmpAddr); d != "" {
		t.Errorf("failed addresses -want +got:\n%s", d)
	}
	got, err := c.Addresses("vips2")
	if err != nil {
		t.Fatal(err)
	}
	var want []netip.Addr
	for _, a := range addrs {
		if !slices.Contains(wantFailed, a) {
			want = append(want, a)
		}
	}
	sortAddrs(want)
	if d := cmp.Diff(want, got, cmpAddr); d != "" {
		t.Errorf("bound addresses -want +got:\n%s", d)
	}
	// Batch 1: two errors (0, and 63 answering the last message); batch
	// 2: two (64, 127); batch 3: the acknowledgement; batch 4: 199's error.
	wantStats := link.Stats{Sendmsg: 4, Messages: n, Replies: 6}
	if d := cmp.Diff(wantStats, sub(c.Stats(), before)); d != "" {
		t.Errorf("batch traffic -want +got:\n%s", d)
	}
	// With nothing failing, one reply per batch.
	before = c.Stats()
	if err := c.DelAddresses("vips2", want); err != nil {
		t.Fatal(err)
	}
	wantStats = link.Stats{Sendmsg: 4, Messages: uint64(len(want)), Replies: 4}
	if d := cmp.Diff(wantStats, sub(c.Stats(), before)); d != "" {
		t.Errorf("batch traffic of a clean delete -want +got:\n%s", d)
	}
}

func sub(a, b link.Stats) link.Stats {
	return link.Stats{Sendmsg: a.Sendmsg - b.Sendmsg, Messages: a.Messages - b.Messages, Replies: a.Replies - b.Replies}
}
