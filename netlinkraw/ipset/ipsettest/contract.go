package ipsettest

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
)

// Options tunes the contract suite.
type Options struct {
	// BigBatch is the size of the large-batch case (100,000 in the kernel
	// and fake runs; smaller for quick runs). 0 means 100,000.
	BigBatch int
}

// Contract runs the behaviour every ipset.Client must have. open returns a
// client on an empty ipset (for the kernel: in a fresh network namespace);
// each subtest opens its own.
func Contract(t *testing.T, open func(t *testing.T) ipset.Client, opts Options) {
	if opts.BigBatch == 0 {
		opts.BigBatch = 100_000
	}
	t.Run("CreateHeader", func(t *testing.T) { testCreateHeader(t, open(t)) })
	t.Run("CreateExisting", func(t *testing.T) { testCreateExisting(t, open(t)) })
	t.Run("EntriesEveryType", func(t *testing.T) { testEntries(t, open(t)) })
	t.Run("ExistSemantics", func(t *testing.T) { testExist(t, open(t)) })
	t.Run("KernelChecks", func(t *testing.T) { testKernelChecks(t, open(t)) })
	t.Run("Extensions", func(t *testing.T) { testExtensions(t, open(t)) })
	t.Run("FlushRenameSwapDestroy", func(t *testing.T) { testLifecycle(t, open(t)) })
	t.Run("Missing", func(t *testing.T) { testMissing(t, open(t)) })
	t.Run("BigBatch", func(t *testing.T) { testBigBatch(t, open(t), opts.BigBatch) })
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var (
	a4  = netip.MustParseAddr
	p4  = netip.MustParsePrefix
	fam = []ipset.Family{ipset.INET, ipset.INET6}
)

// sample returns three valid entries of a type and family.
func sample(t ipset.Type, f ipset.Family) []ipset.Entry {
	ip := func(i int) netip.Addr {
		if f == ipset.INET {
			return a4(fmt.Sprintf("10.96.0.%d", i))
		}
		return a4(fmt.Sprintf("fd00:96::%x", i))
	}
	ip2 := func(i int) netip.Addr {
		if f == ipset.INET {
			return a4(fmt.Sprintf("10.244.1.%d", i))
		}
		return a4(fmt.Sprintf("fd00:244::%x", i))
	}
	net := func(i int) netip.Prefix {
		if f == ipset.INET {
			return p4(fmt.Sprintf("192.168.%d.0/24", i))
		}
		return p4(fmt.Sprintf("fd00:%x::/64", i))
	}
	protos := []ipset.Proto{ipset.TCP, ipset.UDP, ipset.SCTP}
	var out []ipset.Entry
	for i := 1; i <= 3; i++ {
		var e ipset.Entry
		switch t {
		case ipset.HashIP:
			e = ipset.Entry{IP: ip(i)}
		case ipset.HashIPPort:
			e = ipset.Entry{IP: ip(i), Proto: protos[i-1], Port: uint16(80 + i)}
		case ipset.HashIPPortIP:
			e = ipset.Entry{IP: ip(i), Proto: protos[i-1], Port: uint16(8080 + i), IP2: ip2(i)}
		case ipset.HashIPPortNet:
			e = ipset.Entry{IP: ip(i), Proto: protos[i-1], Port: uint16(443), Net: net(i)}
		case ipset.HashNet:
			e = ipset.Entry{Net: net(i)}
		case ipset.BitmapPort:
			e = ipset.Entry{Port: uint16(30000 + i)}
		}
		out = append(out, e)
	}
	return out
}

func sortEntries(es []ipset.Entry) []ipset.Entry {
	es = slices.Clone(es)
	slices.SortFunc(es, func(a, b ipset.Entry) int {
		return cmp.Or(a.IP.Compare(b.IP), cmp.Compare(a.Proto, b.Proto), cmp.Compare(a.Port, b.Port),
			a.IP2.Compare(b.IP2), a.Net.Addr().Compare(b.Net.Addr()), cmp.Compare(a.Net.Bits(), b.Net.Bits()))
	})
	return es
}

var cmpAddr = gocmp.Comparer(func(a, b netip.Addr) bool { return a == b })
var cmpPrefix = gocmp.Comparer(func(a, b netip.Prefix) bool { return a == b })

func diffEntries(want, got []ipset.Entry) string {
	return gocmp.Diff(sortEntries(want), sortEntries(got), cmpAddr, cmpPrefix, cmpopts.EquateEmpty())
}

// header compares the fields both the kernel and the fake define.
func header(h ipset.Header) ipset.Header {
	return ipset.Header{Set: h.Set, Elements: h.Elements}
}

func setOf(name string, t ipset.Type, f ipset.Family) ipset.Set {
	s := ipset.Set{Name: name, Type: t, Family: f}
	if t == ipset.BitmapPort {
		s.Family, s.PortFrom, s.PortTo = ipset.Unspec, 30000, 32767
	}
	return s
}

func testCreateHeader(t *testing.T, c ipset.Client) {
	cases := []struct {
		in   ipset.Set
		want ipset.Set
	}{
		{ipset.Set{Name: "defaults", Type: ipset.HashIP, Family: ipset.INET},
			ipset.Set{Name: "defaults", Type: ipset.HashIP, Family: ipset.INET, HashSize: 1024, MaxElem: 65536}},
		{ipset.Set{Name: "rounded", Type: ipset.HashIPPort, Family: ipset.INET6, HashSize: 1000, MaxElem: 5000},
			ipset.Set{Name: "rounded", Type: ipset.HashIPPort, Family: ipset.INET6, HashSize: 1024, MaxElem: 5000}},
		{ipset.Set{Name: "tiny", Type: ipset.HashNet, Family: ipset.INET, HashSize: 10},
			ipset.Set{Name: "tiny", Type: ipset.HashNet, Family: ipset.INET, HashSize: 64, MaxElem: 65536}},
		{ipset.Set{Name: "ext", Type: ipset.HashIPPortIP, Family: ipset.INET, Timeout: 600, Counters: true, Comment: true},
			ipset.Set{Name: "ext", Type: ipset.HashIPPortIP, Family: ipset.INET, HashSize: 1024, MaxElem: 65536, Timeout: 600, Counters: true, Comment: true}},
		{ipset.Set{Name: "ipportnet6", Type: ipset.HashIPPortNet, Family: ipset.INET6, HashSize: 4096, MaxElem: 131072},
			ipset.Set{Name: "ipportnet6", Type: ipset.HashIPPortNet, Family: ipset.INET6, HashSize: 4096, MaxElem: 131072}},
		{ipset.Set{Name: "KUBE-NODE-PORT-TCP", Type: ipset.BitmapPort, Family: ipset.INET, PortFrom: 0, PortTo: 65535},
			ipset.Set{Name: "KUBE-NODE-PORT-TCP", Type: ipset.BitmapPort, PortFrom: 0, PortTo: 65535}},
		{ipset.Set{Name: "bitmap-ext", Type: ipset.BitmapPort, PortFrom: 30000, PortTo: 32767, Counters: true, Comment: true, Timeout: 5},
			ipset.Set{Name: "bitmap-ext", Type: ipset.BitmapPort, PortFrom: 30000, PortTo: 32767, Counters: true, Comment: true, Timeout: 5}},
	}
	var names []string
	for _, tc := range cases {
		must(t, c.Create(tc.in))
		names = append(names, tc.in.Name)
		h, err := c.Header(tc.in.Name)
		must(t, err)
		if d := gocmp.Diff(ipset.Header{Set: tc.want}, header(h)); d != "" {
			t.Errorf("Header(%s) -want +got:\n%s", tc.in.Name, d)
		}
	}
	got, err := c.ListNames()
	must(t, err)
	slices.Sort(got)
	slices.Sort(names)
	if d := gocmp.Diff(names, got); d != "" {
		t.Errorf("ListNames -want +got:\n%s", d)
	}
	for _, bad := range []ipset.Set{
		{Name: "nofamily", Type: ipset.HashIP},
		{Name: "badtype", Type: "hash:foo", Family: ipset.INET},
		{Name: "this-name-is-much-too-long-for-ipset", Type: ipset.HashIP, Family: ipset.INET},
		{Name: "reversed", Type: ipset.BitmapPort, PortFrom: 10, PortTo: 1},
	} {
		if err := c.Create(bad); err == nil {
			t.Errorf("Create(%+v) succeeded, want an error", bad)
		}
	}
	if err := c.Create(ipset.Set{Name: "badtype", Type: "hash:foo", Family: ipset.INET}); !errors.Is(err, ipset.ErrFindType) {
		t.Errorf("Create(hash:foo) = %v, want ErrFindType", err)
	}
}

func testCreateExisting(t *testing.T, c ipset.Client) {
	s := ipset.Set{Name: "s", Type: ipset.HashIPPort, Family: ipset.INET, HashSize: 1024, MaxElem: 65536}
	must(t, c.Create(s))
	if err := c.Create(s); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("Create twice = %v, want EEXIST", err)
	}
	if err := c.Create(s, ipset.Exist); err != nil {
		t.Errorf("Create identical with Exist = %v, want nil", err)
	}
	d := s
	d.MaxElem = 1000
	if err := c.Create(d, ipset.Exist); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("Create different maxelem with Exist = %v, want EEXIST", err)
	}
	d = s
	d.Type = ipset.HashIP
	if err := c.Create(d, ipset.Exist); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("Create different type with Exist = %v, want EEXIST", err)
	}
}

func testEntries(t *testing.T, c ipset.Client) {
	for _, typ := range ipset.Types {
		for _, f := range fam {
			if typ == ipset.BitmapPort && f == ipset.INET6 {
				continue
			}
			name := fmt.Sprintf("%s-%s", typ, f)
			must(t, c.Create(setOf(name, typ, f)))
			es := sample(typ, f)
			must(t, c.Add(name, es))
			h, got, err := c.List(name)
			must(t, err)
			if d := diffEntries(es, got); d != "" {
				t.Errorf("List(%s) -want +got:\n%s", name, d)
			}
			if h.Elements != 3 {
				t.Errorf("List(%s).Elements = %d, want 3", name, h.Elements)
			}
			for _, e := range es {
				ok, err := c.Test(name, e)
				if err != nil || !ok {
					t.Errorf("Test(%s, %s) = %v, %v; want true", name, e, ok, err)
				}
			}
			must(t, c.Del(name, es[1:2]))
			if ok, err := c.Test(name, es[1]); err != nil || ok {
				t.Errorf("Test(%s, %s) after Del = %v, %v; want false", name, es[1], ok, err)
			}
			_, got, err = c.List(name)
			must(t, err)
			if d := diffEntries([]ipset.Entry{es[0], es[2]}, got); d != "" {
				t.Errorf("List(%s) after Del -want +got:\n%s", name, d)
			}
			// An entry of the other family or shape is refused locally,
			// for that entry only.
			other := sample(typ, ipset.INET6)[0]
			if f == ipset.INET6 {
				other = sample(typ, ipset.INET)[0]
			}
			if typ != ipset.BitmapPort {
				err := c.Add(name, []ipset.Entry{es[1], other})
				var be *ipset.BatchError
				if !errors.As(err, &be) || len(be.Failed) != 1 || be.Failed[0].Index != 1 || !errors.Is(err, ipset.ErrInvalidFamily) {
					t.Errorf("Add(%s, [valid, other family]) = %v, want one ErrInvalidFamily at index 1", name, err)
				}
				if ok, _ := c.Test(name, es[1]); !ok {
					t.Errorf("valid entry beside a refused one was not added to %s", name)
				}
			}
		}
	}
	// nomatch entries in hash:net and hash:ip,port,net.
	must(t, c.Create(setOf("nm", ipset.HashNet, ipset.INET)))
	nm := []ipset.Entry{{Net: p4("10.0.0.0/8")}, {Net: p4("10.1.0.0/16"), NoMatch: true}}
	must(t, c.Add("nm", nm))
	_, got, err := c.List("nm")
	must(t, err)
	if d := diffEntries(nm, got); d != "" {
		t.Errorf("List(nm) -want +got:\n%s", d)
	}
	if ok, err := c.Test("nm", ipset.Entry{Net: p4("10.1.0.0/16")}); err != nil || ok {
		t.Errorf("Test of a nomatch entry = %v, %v; want false", ok, err)
	}
	// Host bits of networks are masked.
	must(t, c.Add("nm", []ipset.Entry{{Net: p4("172.16.5.9/12")}}))
	if ok, err := c.Test("nm", ipset.Entry{Net: p4("172.16.0.0/12")}); err != nil || !ok {
		t.Errorf("Test(172.16.0.0/12) after adding 172.16.5.9/12 = %v, %v; want true", ok, err)
	}
	// Wrong shapes.
	for _, bad := range []struct {
		set string
		e   ipset.Entry
	}{
		{"hash:ip-inet", ipset.Entry{IP: a4("10.0.0.1"), Port: 80}},
		{"hash:ip,port-inet", ipset.Entry{Proto: ipset.TCP, Port: 80}},
		{"hash:net-inet", ipset.Entry{IP: a4("10.0.0.1")}},
		{"bitmap:port-inet", ipset.Entry{Port: 30001, Proto: ipset.TCP}},
		{"hash:ip-inet", ipset.Entry{IP: a4("10.0.0.1"), NoMatch: true}},
	} {
		err := c.Add(bad.set, []ipset.Entry{bad.e})
		if !errors.Is(err, ipset.ErrInvalidEntry) {
			t.Errorf("Add(%s, %s) = %v, want ErrInvalidEntry", bad.set, bad.e, err)
		}
	}
}

func testExist(t *testing.T, c ipset.Client) {
	must(t, c.Create(setOf("s", ipset.HashIPPort, ipset.INET)))
	es := sample(ipset.HashIPPort, ipset.INET)
	must(t, c.Add("s", es[:2]))
	err := c.Add("s", es)
	var be *ipset.BatchError
	if !errors.As(err, &be) || len(be.Failed) != 2 || be.Failed[0].Index != 0 || be.Failed[1].Index != 1 || !errors.Is(err, ipset.ErrExist) {
		t.Fatalf("Add of two present and one new entry = %v, want ErrExist at 0 and 1", err)
	}
	if ok, _ := c.Test("s", es[2]); !ok {
		t.Errorf("new entry after failing ones was not added")
	}
	if err := c.Add("s", es, ipset.Exist); err != nil {
		t.Errorf("Add present entries with Exist = %v", err)
	}
	must(t, c.Del("s", es[:1]))
	err = c.Del("s", es)
	if !errors.As(err, &be) || len(be.Failed) != 1 || be.Failed[0].Index != 0 || !errors.Is(err, ipset.ErrNotFound) || !errors.Is(err, ipset.ErrExist) {
		t.Fatalf("Del of an absent and two present entries = %v, want ErrNotFound at 0", err)
	}
	_, got, err := c.List("s")
	must(t, err)
	if len(got) != 0 {
		t.Errorf("entries left after Del: %v", got)
	}
	if err := c.Del("s", es, ipset.Exist); err != nil {
		t.Errorf("Del absent entries with Exist = %v", err)
	}
}

func testKernelChecks(t *testing.T, c ipset.Client) {
	must(t, c.Create(ipset.Set{Name: "full", Type: ipset.HashIP, Family: ipset.INET, MaxElem: 2}))
	must(t, c.Create(setOf("ipp", ipset.HashIPPort, ipset.INET6)))
	must(t, c.Create(setOf("net", ipset.HashNet, ipset.INET)))
	must(t, c.Create(setOf("ports", ipset.BitmapPort, ipset.Unspec)))
	cases := []struct {
		set     string
		entries []ipset.Entry
		wantIdx []int
		want    error
	}{
		{"full", []ipset.Entry{{IP: a4("10.0.0.1")}, {IP: a4("10.0.0.2")}, {IP: a4("10.0.0.3")}, {IP: a4("10.0.0.4")}}, []int{2, 3}, ipset.ErrHashFull},
		{"full", []ipset.Entry{{IP: a4("0.0.0.0")}}, []int{0}, ipset.ErrHashElem},
		{"ipp", []ipset.Entry{{IP: a4("fd00::1"), Proto: ipset.TCP, Port: 1}, {IP: a4("fd00::1"), Port: 1}}, []int{1}, ipset.ErrMissingProto},
		{"net", []ipset.Entry{{Net: p4("0.0.0.0/0")}, {Net: p4("10.0.0.0/8")}}, []int{0}, ipset.ErrInvalidCIDR},
		{"ports", []ipset.Entry{{Port: 30001}, {Port: 80}, {Port: 32767}, {Port: 32768}}, []int{1, 3}, ipset.ErrBitmapRange},
		{"net", []ipset.Entry{{Net: p4("10.2.0.0/16"), Comment: "x"}}, []int{0}, ipset.ErrComment},
		{"net", []ipset.Entry{{Net: p4("10.2.0.0/16"), Timeout: 5}}, []int{0}, ipset.ErrTimeout},
		{"net", []ipset.Entry{{Net: p4("10.2.0.0/16"), Packets: 5}}, []int{0}, ipset.ErrCounter},
	}
	for _, tc := range cases {
		err := c.Add(tc.set, tc.entries)
		var be *ipset.BatchError
		if !errors.As(err, &be) {
			t.Errorf("Add(%s, %v) = %v, want a BatchError", tc.set, tc.entries, err)
			continue
		}
		var idx []int
		for _, f := range be.Failed {
			idx = append(idx, f.Index)
			if !errors.Is(f.Err, tc.want) {
				t.Errorf("Add(%s): entry %d failed with %v, want %v", tc.set, f.Index, f.Err, tc.want)
			}
		}
		if d := gocmp.Diff(tc.wantIdx, idx); d != "" {
			t.Errorf("Add(%s, %v) failed indexes -want +got:\n%s", tc.set, tc.entries, d)
		}
	}
	if got := ipset.ErrHashFull.Error(); got != "set is full" {
		t.Errorf("ErrHashFull text = %q", got)
	}
}

func testExtensions(t *testing.T, c ipset.Client) {
	must(t, c.Create(ipset.Set{Name: "ext", Type: ipset.HashIPPort, Family: ipset.INET, Timeout: 300, Counters: true, Comment: true}))
	es := []ipset.Entry{
		{IP: a4("10.0.0.1"), Proto: ipset.TCP, Port: 80, Comment: "default/web:http", Packets: 7, Bytes: 700},
		{IP: a4("10.0.0.2"), Proto: ipset.UDP, Port: 53, Timeout: 100},
	}
	must(t, c.Add("ext", es))
	_, got, err := c.List("ext")
	must(t, err)
	want := []ipset.Entry{es[0], es[1]}
	want[0].Timeout = 300
	got = sortEntries(got)
	for i := range got {
		// The kernel lists the time left; allow a few seconds to pass.
		if got[i].Timeout <= want[i].Timeout && got[i].Timeout+5 >= want[i].Timeout {
			got[i].Timeout = want[i].Timeout
		}
	}
	if d := diffEntries(want, got); d != "" {
		t.Errorf("List(ext) -want +got:\n%s", d)
	}
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'x'
	}
	err = c.Add("ext", []ipset.Entry{{IP: a4("10.0.0.3"), Proto: ipset.TCP, Port: 1, Comment: string(long)}, {IP: a4("10.0.0.4"), Proto: ipset.TCP, Port: 1}})
	var be *ipset.BatchError
	if !errors.As(err, &be) || len(be.Failed) != 1 || be.Failed[0].Index != 0 {
		t.Errorf("Add with a 300-byte comment = %v, want that entry refused", err)
	}
}

func testLifecycle(t *testing.T, c ipset.Client) {
	must(t, c.Create(setOf("a", ipset.HashIPPort, ipset.INET)))
	must(t, c.Create(setOf("b", ipset.HashIPPort, ipset.INET)))
	must(t, c.Create(setOf("c", ipset.HashIP, ipset.INET)))
	ea := sample(ipset.HashIPPort, ipset.INET)
	must(t, c.Add("a", ea[:1]))
	must(t, c.Add("b", ea[1:]))
	must(t, c.Swap("a", "b"))
	_, got, err := c.List("a")
	must(t, err)
	if d := diffEntries(ea[1:], got); d != "" {
		t.Errorf("List(a) after swap -want +got:\n%s", d)
	}
	if err := c.Swap("a", "c"); !errors.Is(err, ipset.ErrTypeMismatch) {
		t.Errorf("Swap of different types = %v, want ErrTypeMismatch", err)
	}
	if err := c.Swap("a", "nope"); !errors.Is(err, ipset.ErrExistSetName2) {
		t.Errorf("Swap with a missing second set = %v, want ErrExistSetName2", err)
	}
	if err := c.Rename("a", "c"); !errors.Is(err, ipset.ErrExistSetName2) {
		t.Errorf("Rename onto an existing set = %v, want ErrExistSetName2", err)
	}
	must(t, c.Rename("a", "a2"))
	if _, err := c.Header("a"); !ipset.IsNotExist(err) {
		t.Errorf("Header(a) after rename = %v, want not-exist", err)
	}
	h, got, err := c.List("a2")
	must(t, err)
	if h.Name != "a2" || len(got) != 2 {
		t.Errorf("List(a2) = %+v, %v", h, got)
	}
	must(t, c.Flush("a2"))
	_, got, err = c.List("a2")
	must(t, err)
	if len(got) != 0 {
		t.Errorf("List after Flush = %v", got)
	}
	must(t, c.Destroy("a2"))
	if err := c.Destroy("a2"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("Destroy twice = %v, want ENOENT", err)
	}
	if err := c.Destroy("a2", ipset.Exist); err != nil {
		t.Errorf("Destroy missing with Exist = %v", err)
	}
	names, err := c.ListNames()
	must(t, err)
	slices.Sort(names)
	if d := gocmp.Diff([]string{"b", "c"}, names); d != "" {
		t.Errorf("ListNames -want +got:\n%s", d)
	}
}

func testMissing(t *testing.T, c ipset.Client) {
	e := ipset.Entry{IP: a4("10.0.0.1")}
	checks := map[string]error{
		"flush":   c.Flush("nope"),
		"rename":  c.Rename("nope", "x"),
		"swap":    c.Swap("nope", "x"),
		"add":     c.Add("nope", []ipset.Entry{e}),
		"del":     c.Del("nope", []ipset.Entry{e}),
		"destroy": c.Destroy("nope"),
	}
	_, checks["header"] = c.Header("nope")
	_, _, checks["list"] = c.List("nope")
	_, checks["test"] = c.Test("nope", e)
	for op, err := range checks {
		if !errors.Is(err, syscall.ENOENT) {
			t.Errorf("%s on a missing set = %v, want ENOENT", op, err)
		}
		var oe *ipset.OpError
		if !errors.As(err, &oe) {
			t.Errorf("%s on a missing set = %T, want *ipset.OpError", op, err)
		}
	}
}

// testBigBatch adds n entries with failures in the middle: every failure
// must be reported for exactly its entry, every other entry added.
func testBigBatch(t *testing.T, c ipset.Client, n int) {
	for _, f := range fam {
		name := "big-" + f.String()
		must(t, c.Create(ipset.Set{Name: name, Type: ipset.HashIPPort, Family: f, HashSize: 65536, MaxElem: uint32(2 * n)}))
		es := BigEntries(f, n)
		// Pre-add a few entries spread over the batch; they fail as
		// duplicates.
		dups := []int{0, 1, n / 3, n/3 + 1, n / 2, n - 2}
		var pre []ipset.Entry
		for _, i := range dups {
			pre = append(pre, es[i])
		}
		must(t, c.Add(name, pre))
		// And one malformed entry (no protocol), refused by the kernel.
		bad := n/2 + 7
		es[bad].Proto = 0
		err := c.Add(name, es)
		var be *ipset.BatchError
		if !errors.As(err, &be) {
			t.Fatalf("Add(%d entries) = %v, want a BatchError", n, err)
		}
		want := append(slices.Clone(dups), bad)
		slices.Sort(want)
		var got []int
		for _, fe := range be.Failed {
			got = append(got, fe.Index)
			wantErr := error(ipset.ErrExist)
			if fe.Index == bad {
				wantErr = ipset.ErrMissingProto
			}
			if !errors.Is(fe.Err, wantErr) {
				t.Errorf("entry %d failed with %v, want %v", fe.Index, fe.Err, wantErr)
			}
		}
		if d := gocmp.Diff(want, got); d != "" {
			t.Fatalf("failed entries -want +got:\n%s", d)
		}
		h, listed, err := c.List(name)
		must(t, err)
		if len(listed) != n-1 || h.Elements != uint32(n-1) {
			t.Fatalf("listed %d entries (header says %d), want %d", len(listed), h.Elements, n-1)
		}
		seen := make(map[ipset.Entry]bool, n)
		for _, e := range listed {
			seen[e] = true
		}
		for i, e := range es {
			if i != bad && !seen[e] {
				t.Fatalf("entry %d (%s) missing from the listing", i, e)
			}
		}
		// Adding present entries again fails for every one of them, each
		// reported (10,000 of them: every failure costs the kernel one
		// error message, slow under emulation).
		again := es[:min(n, 10_000)]
		start := time.Now()
		err = c.Add(name, again)
		if !errors.As(err, &be) || len(be.Failed) != len(again) {
			t.Fatalf("Add of %d present entries = %v, want %d failures", len(again), err, len(again))
		}
		for i, fe := range be.Failed {
			if fe.Index != i {
				t.Fatalf("failure %d is for entry %d", i, fe.Index)
			}
		}
		t.Logf("%d failing entries reported in %v", len(again), time.Since(start))
		// Delete all of them, including the malformed one.
		err = c.Del(name, es)
		if !errors.As(err, &be) || len(be.Failed) != 1 || be.Failed[0].Index != bad {
			t.Fatalf("Del(%d entries) = %v, want one failure at %d", n, err, bad)
		}
		_, listed, err = c.List(name)
		must(t, err)
		if len(listed) != 0 {
			t.Fatalf("%d entries left after Del", len(listed))
		}
	}
}

// BigEntries returns n distinct hash:ip,port entries of family f, the
// workload of the large-batch test and the benchmarks.
func BigEntries(f ipset.Family, n int) []ipset.Entry {
	out := make([]ipset.Entry, n)
	protos := []ipset.Proto{ipset.TCP, ipset.UDP}
	for i := range out {
		var ip netip.Addr
		if f == ipset.INET {
			ip = netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		} else {
			ip = netip.AddrFrom16([16]byte{0: 0xfd, 1: 0, 2: 0, 3: 0x96, 14: byte(i >> 8), 15: byte(i)})
		}
		out[i] = ipset.Entry{IP: ip, Proto: protos[(i>>16)&1], Port: uint16(1000 + (i>>17)*100 + i%7)}
	}
	return out
}
