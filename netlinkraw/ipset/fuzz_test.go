package ipset

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mdlayher/netlink"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// The seed corpora under testdata/fuzz/ were captured from the kernel by
// TestWriteFuzzSeeds (IPSET_WRITE_SEEDS=1 go test -run TestWriteFuzzSeeds).

func FuzzDecodeAck(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := decodeAck(b)
		if err == nil && info.Code < 0 {
			t.Fatalf("negative code %d", info.Code)
		}
	})
}

func FuzzDecodeProtocol(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeProtocol(b)
		if err == nil && r.Protocol == 0 {
			t.Fatal("protocol 0 accepted")
		}
	})
}

func FuzzDecodeType(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeType(b)
	})
}

func FuzzListing(f *testing.F) {
	f.Add(listMessage(Header{Set: Set{Name: "s", Type: HashIPPort, Family: INET, HashSize: 64, MaxElem: 10}}, []Entry{{IP: netip.MustParseAddr("10.0.0.1"), Proto: TCP, Port: 80}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		l := newListing()
		if err := l.add(b); err != nil {
			return
		}
		for _, name := range l.order {
			s := l.sets[name]
			for _, e := range s.Entries {
				_ = e.String()
			}
		}
	})
}

// FuzzEntryRoundTrip encodes entries that pass CheckEntry and decodes them
// back as a listing would.
func FuzzEntryRoundTrip(f *testing.F) {
	f.Add(uint8(1), []byte{10, 0, 0, 1}, uint8(6), uint16(80), []byte{10, 0, 0, 2}, uint8(24), false, "c")
	f.Add(uint8(3), []byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, uint8(17), uint16(53), []byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(64), true, "")
	f.Add(uint8(5), []byte{}, uint8(0), uint16(30000), []byte{}, uint8(0), false, "")
	f.Fuzz(func(t *testing.T, typ uint8, ip []byte, proto uint8, port uint16, ip2 []byte, bits uint8, nomatch bool, comment string) {
		ty := Types[int(typ)%len(Types)]
		a, _ := netip.AddrFromSlice(ip)
		b, _ := netip.AddrFromSlice(ip2)
		e := Entry{Proto: Proto(proto), Port: port, NoMatch: nomatch, Comment: comment}
		d := dimsOf(ty)
		if d.ip {
			e.IP = a
		}
		if d.ip2 {
			e.IP2 = b
		}
		if d.net {
			e.Net, _ = a.Prefix(int(bits))
		}
		if d.net2 {
			e.Net, _ = b.Prefix(int(bits))
		}
		fam := INET
		if a.Is6() || (!a.IsValid() && b.Is6()) {
			fam = INET6
		}
		if CheckEntry(ty, fam, e) != nil {
			return
		}
		var at nlcore.Encoder
		appendEntry(&at, ty, e, 1)
		var got Entry
		err := nlcore.ForEachAttr(at.B, func(_ uint16, v []byte) error { return decodeEntry(v, &got) })
		if err != nil {
			t.Fatalf("decode %s: %v", e, err)
		}
		want := e
		if want.IP.IsValid() {
			want.IP = want.IP.Unmap()
		}
		if got != want {
			t.Fatalf("round trip of %s (%s): got %+v, want %+v", e, ty, got, want)
		}
	})
}

// recorder wraps a transport and keeps copies of what the kernel sent.
type recorder struct {
	nlcore.Transport
	datagrams [][]message
}

func (r *recorder) Receive(deadline time.Time, ctr *nlcore.Counters) ([]message, error) {
	ms, err := r.Transport.Receive(deadline, ctr)
	if err == nil {
		cp := make([]message, len(ms))
		for i, m := range ms {
			cp[i] = m
			cp[i].Data = append([]byte(nil), m.Data...)
		}
		r.datagrams = append(r.datagrams, cp)
	}
	return ms, err
}

// TestWriteFuzzSeeds captures kernel replies into the seed corpora.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("IPSET_WRITE_SEEDS") != "1" {
		t.Skip("set IPSET_WRITE_SEEDS=1 to rewrite testdata/fuzz from the kernel")
	}
	ns := nstest.New(t)
	c, err := Dial(&Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec := &recorder{Transport: c.nl.T}
	c.nl.T = rec
	// The protocol reply (negotiation happened before the recorder).
	if err := c.negotiate(7); err != nil {
		t.Fatal(err)
	}
	sets := []Set{
		{Name: "ipport", Type: HashIPPort, Family: INET, Comment: true, Counters: true, Timeout: 60},
		{Name: "ipport6", Type: HashIPPortIP, Family: INET6},
		{Name: "net", Type: HashNet, Family: INET},
		{Name: "ipportnet6", Type: HashIPPortNet, Family: INET6},
		{Name: "ports", Type: BitmapPort, PortFrom: 1, PortTo: 1000},
	}
	for _, s := range sets {
		if err := c.Create(s); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Add("ipport", []Entry{{IP: netip.MustParseAddr("10.0.0.1"), Proto: TCP, Port: 80, Comment: "x"}, {IP: netip.MustParseAddr("10.0.0.1"), Proto: TCP, Port: 80}})
	_ = c.Add("ipport6", []Entry{{IP: netip.MustParseAddr("fd00::1"), Proto: UDP, Port: 53, IP2: netip.MustParseAddr("fd00::2")}})
	_ = c.Add("net", []Entry{{Net: netip.MustParsePrefix("10.0.0.0/8"), NoMatch: true}})
	_ = c.Add("ipportnet6", []Entry{{IP: netip.MustParseAddr("fd00::1"), Proto: SCTP, Port: 1, Net: netip.MustParsePrefix("fd00::/16")}})
	_ = c.Add("ports", []Entry{{Port: 5}, {Port: 2000}})
	for _, s := range sets {
		if _, _, err := c.List(s.Name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ListNames(); err != nil {
		t.Fatal(err)
	}
	write := func(fuzz string, i int, b []byte) {
		dir := filepath.Join("testdata", "fuzz", fuzz)
		if fuzz == "FuzzParseMessages" { // the parser is the netlink core's
			dir = filepath.Join("..", "internal", "nlcore", "testdata", "fuzz", fuzz)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%skernel-%03d", map[bool]string{true: "ipset-"}[fuzz == "FuzzParseMessages"], i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n := map[string]int{}
	add := func(fuzz string, b []byte) {
		write(fuzz, n[fuzz], b)
		n[fuzz]++
	}
	for _, d := range rec.datagrams {
		var raw []byte
		for _, m := range d {
			hdr := make([]byte, nlcore.HdrLen)
			putHeader(hdr, m, len(m.Data))
			raw = append(raw, hdr...)
			raw = append(raw, m.Data...)
			for len(raw)%4 != 0 {
				raw = append(raw, 0)
			}
			switch {
			case m.Type == uint16(netlink.Error):
				add("FuzzDecodeAck", m.Data)
			case m.Type == nlcore.NfnlType(nlcore.NfnlSubsysIPSet, cmdProtocol):
				add("FuzzDecodeProtocol", m.Data)
			case m.Type == nlcore.NfnlType(nlcore.NfnlSubsysIPSet, cmdType):
				add("FuzzDecodeType", m.Data)
			case m.Type == nlcore.NfnlType(nlcore.NfnlSubsysIPSet, cmdList):
				add("FuzzListing", m.Data)
			}
		}
		add("FuzzParseMessages", raw)
	}
	t.Logf("seeds written: %v", n)
}
