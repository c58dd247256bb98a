package ipvs

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The fuzz targets feed arbitrary bytes to every decoder: none may panic,
// and what decodes must encode and decode to the same value. Their seed
// corpora are committed under testdata/fuzz; IPVS_WRITE_SEEDS=1 go test
// -run TestWriteFuzzSeeds regenerates them.

func FuzzDecodeServiceMessage(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := decodeServiceMessage(data)
		if err != nil {
			return
		}
		s := e.Service
		if s.Netmask == 0 {
			return // an IPv4 mask of 0.0.0.0 re-encodes as the default
		}
		n, err := checkService(&s, true)
		if err != nil {
			return
		}
		var enc encoder
		off := enc.beginMessage(1, flagRequest, 1, cmdNewService)
		enc.service(n, true)
		enc.endMessage(off)
		again, err := decodeServiceMessage(enc.b[nlmsgHdrLen:])
		if err != nil {
			t.Fatalf("re-encoded %+v does not decode: %v", s, err)
		}
		if diff := cmp.Diff(s, again.Service, cmpAddr); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

func FuzzDecodeDestinationMessage(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, family uint16) {
		e, err := decodeDestinationMessage(data, Family(family))
		if err != nil {
			return
		}
		d, err := checkDestination(&e.Destination)
		if err != nil {
			return
		}
		var enc encoder
		enc.destination(d, true)
		v, ok, err := findAttr(enc.b, cmdAttrDest)
		if err != nil || !ok {
			t.Fatalf("re-encoded destination has no attribute: %v", err)
		}
		again, err := decodeDestination(v, Family(family))
		if err != nil {
			t.Fatalf("re-encoded %+v does not decode: %v", e.Destination, err)
		}
		if diff := cmp.Diff(e.Destination, again.Destination, cmpAddr); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

func FuzzDecodeStats(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = decodeStats(data) })
}

func FuzzDecodeInfo(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = decodeInfo(data) })
}

func FuzzDecodeConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = decodeConfig(data) })
}

func FuzzParseMessages(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, err := parseMessages(nil, data)
		if err != nil {
			return
		}
		for _, m := range msgs {
			if len(m.data) > len(data) {
				t.Fatalf("message payload of %d bytes from a %d-byte datagram", len(m.data), len(data))
			}
		}
	})
}

// seedServices returns service messages to seed the corpus with.
func seedServices() [][]byte {
	svcs := []Service{
		{Protocol: TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 53, Scheduler: "rr"},
		{Protocol: UDP, Address: netip.MustParseAddr("fd00::10"), Port: 53, Scheduler: "sh", Flags: FlagPersistent | FlagSchedSHPort, Timeout: 300, Netmask: 64, PEName: "sip"},
		{Family: IPv4, FWMark: 7, Scheduler: "wlc", Netmask: 24},
	}
	var out [][]byte
	for _, s := range svcs {
		n, _ := checkService(&s, true)
		var enc encoder
		enc.b = append(enc.b, cmdNewService, 1, 0, 0)
		enc.service(n, true)
		out = append(out, enc.b)
	}
	// A dumped service also carries counters.
	var enc encoder
	enc.b = append(enc.b, cmdNewService, 1, 0, 0)
	nest := enc.beginNest(cmdAttrService)
	enc.u16(svcAttrAF, uint16(IPv4))
	enc.u32(svcAttrFWMark, 3)
	enc.str(svcAttrSchedName, "rr")
	enc.u32(svcAttrNetmask, ^uint32(0))
	st := enc.beginNest(svcAttrStats64)
	for i := uint16(1); i <= 10; i++ {
		enc.attr(i, native.AppendUint64(nil, uint64(i)<<33))
	}
	enc.endNest(st)
	enc.endNest(nest)
	return append(out, enc.b)
}

func seedDestinations() [][]byte {
	ds := []Destination{
		{Address: netip.MustParseAddr("10.244.1.5"), Port: 8080, Weight: 70000},
		{Address: netip.MustParseAddr("fd00::5"), Port: 8080, Forward: Tunnel, Weight: 1, TunnelType: TunnelGUE, TunnelPort: 6080, TunnelFlags: TunnelChecksum},
	}
	var out [][]byte
	for _, d := range ds {
		n, _ := checkDestination(&d)
		var enc encoder
		enc.b = append(enc.b, cmdNewDest, 1, 0, 0)
		enc.destination(n, true)
		out = append(out, enc.b)
	}
	return out
}

func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("IPVS_WRITE_SEEDS") != "1" {
		t.Skip("set IPVS_WRITE_SEEDS=1 to regenerate testdata/fuzz")
	}
	write := func(target string, i int, args ...string) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := "go test fuzz v1\n"
		for _, a := range args {
			body += a + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := func(v []byte) string { return "[]byte(" + strconv.Quote(string(v)) + ")" }
	for i, s := range seedServices() {
		write("FuzzDecodeServiceMessage", i, b(s))
	}
	for i, d := range seedDestinations() {
		write("FuzzDecodeDestinationMessage", i, b(d), "uint16(2)")
	}
	var st encoder
	for i := uint16(1); i <= 10; i++ {
		st.u32(i, uint32(i))
	}
	write("FuzzDecodeStats", 0, b(st.b))
	var info encoder
	info.b = append(info.b, cmdSetInfo, 1, 0, 0)
	info.u32(infoAttrVersion, 0x010201)
	info.u32(infoAttrConnTabSize, 4096)
	write("FuzzDecodeInfo", 0, b(info.b))
	var cfg encoder
	cfg.b = append(cfg.b, cmdSetConfig, 1, 0, 0)
	cfg.u32(cmdAttrTimeoutTCP, 900)
	cfg.u32(cmdAttrTimeoutTCPFin, 120)
	cfg.u32(cmdAttrTimeoutUDP, 300)
	write("FuzzDecodeConfig", 0, b(cfg.b))
	// A datagram: an ACK, then an error with an extended-ACK message.
	var dg encoder
	off := dg.beginMessage(typeError, 0, 5, 0)
	dg.b = dg.b[:off+nlmsgHdrLen]
	dg.b = native.AppendUint32(dg.b, 0)
	dg.b = append(dg.b, make([]byte, 16)...)
	dg.endMessage(off)
	off = dg.beginMessage(typeError, 0x300, 6, 0)
	dg.b = dg.b[:off+nlmsgHdrLen]
	dg.b = native.AppendUint32(dg.b, uint32(0x100000000-17))
	dg.b = native.AppendUint32(dg.b, 20)
	dg.b = append(dg.b, make([]byte, 12)...)
	dg.str(1, "file exists")
	dg.endMessage(off)
	write("FuzzParseMessages", 0, b(dg.b))
}
