package ipvs

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	uapi "github.com/proxysinks/proxysinks/netlinkraw/internal/ipvsuapi"
	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
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
		var enc nlcore.Encoder
		off := enc.BeginMessage(1, nlcore.FlagRequest, 1)
		enc.Genl(uapi.CmdNewService, uapi.GenlVersion)
		encodeService(&enc, n, true)
		enc.EndMessage(off)
		again, err := decodeServiceMessage(enc.B[nlcore.HdrLen:])
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
		var enc nlcore.Encoder
		encodeDestination(&enc, d, true)
		v, ok, err := nlcore.FindAttr(enc.B, uapi.CmdAttrDest)
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
		var enc nlcore.Encoder
		enc.B = append(enc.B, uapi.CmdNewService, 1, 0, 0)
		encodeService(&enc, n, true)
		out = append(out, enc.B)
	}
	// A dumped service also carries counters.
	var enc nlcore.Encoder
	enc.B = append(enc.B, uapi.CmdNewService, 1, 0, 0)
	nest := enc.BeginNest(uapi.CmdAttrService)
	enc.U16(uapi.SvcAttrAF, uint16(IPv4))
	enc.U32(uapi.SvcAttrFWMark, 3)
	enc.Str(uapi.SvcAttrSchedName, "rr")
	enc.U32(uapi.SvcAttrNetmask, ^uint32(0))
	st := enc.BeginNest(uapi.SvcAttrStats64)
	for i := uint16(1); i <= 10; i++ {
		enc.Attr(i, nlcore.Native.AppendUint64(nil, uint64(i)<<33))
	}
	enc.EndNest(st)
	enc.EndNest(nest)
	return append(out, enc.B)
}

func seedDestinations() [][]byte {
	ds := []Destination{
		{Address: netip.MustParseAddr("10.244.1.5"), Port: 8080, Weight: 70000},
		{Address: netip.MustParseAddr("fd00::5"), Port: 8080, Forward: Tunnel, Weight: 1, TunnelType: TunnelGUE, TunnelPort: 6080, TunnelFlags: TunnelChecksum},
	}
	var out [][]byte
	for _, d := range ds {
		n, _ := checkDestination(&d)
		var enc nlcore.Encoder
		enc.B = append(enc.B, uapi.CmdNewDest, 1, 0, 0)
		encodeDestination(&enc, n, true)
		out = append(out, enc.B)
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
	var st nlcore.Encoder
	for i := uint16(1); i <= 10; i++ {
		st.U32(i, uint32(i))
	}
	write("FuzzDecodeStats", 0, b(st.B))
	var info nlcore.Encoder
	info.B = append(info.B, uapi.CmdSetInfo, 1, 0, 0)
	info.U32(uapi.InfoAttrVersion, 0x010201)
	info.U32(uapi.InfoAttrConnTabSize, 4096)
	write("FuzzDecodeInfo", 0, b(info.B))
	var cfg nlcore.Encoder
	cfg.B = append(cfg.B, uapi.CmdSetConfig, 1, 0, 0)
	cfg.U32(uapi.CmdAttrTimeoutTCP, 900)
	cfg.U32(uapi.CmdAttrTimeoutTCPFin, 120)
	cfg.U32(uapi.CmdAttrTimeoutUDP, 300)
	write("FuzzDecodeConfig", 0, b(cfg.B))
}
