package ipvs

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	uapi "github.com/proxysinks/proxysinks/netlinkraw/internal/ipvsuapi"
	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

var cmpAddr = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

// nla builds one attribute by hand, for expected encodings: explicit,
// little-endian payloads, padded to 4 bytes.
func nla(typ uint16, payload ...[]byte) []byte {
	var p []byte
	for _, b := range payload {
		p = append(p, b...)
	}
	out := binary.LittleEndian.AppendUint16(nil, uint16(4+len(p)))
	out = binary.LittleEndian.AppendUint16(out, typ)
	out = append(out, p...)
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	return out
}

func le16(v uint16) []byte  { return binary.LittleEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte  { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte  { return binary.LittleEndian.AppendUint64(nil, v) }
func be16b(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func addr16(s string) []byte {
	a := netip.MustParseAddr(s)
	if a.Is4() {
		v := a.As4()
		return append(v[:], make([]byte, 12)...)
	}
	v := a.As16()
	return v[:]
}
func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// skipBigEndian skips tests whose expected bytes are little-endian.
func skipBigEndian(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("expected encodings are written for little-endian machines")
	}
}

func TestEncodeOp(t *testing.T) {
	skipBigEndian(t)
	svc4 := Service{Protocol: TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 53, Scheduler: "rr"}
	svc4ID := nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(2)), nla(uapi.SvcAttrProtocol, le16(6)),
		nla(uapi.SvcAttrAddr, addr16("10.96.0.10")), nla(uapi.SvcAttrPort, be16b(53)))
	tests := []struct {
		name string
		op   Op
		cmd  uint8
		want []byte // attributes after the generic netlink header
	}{{
		name: "create IPv4 service",
		op:   Op{Kind: OpCreateService, Service: svc4},
		cmd:  uapi.CmdNewService,
		want: nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(2)), nla(uapi.SvcAttrProtocol, le16(6)),
			nla(uapi.SvcAttrAddr, addr16("10.96.0.10")), nla(uapi.SvcAttrPort, be16b(53)),
			nla(uapi.SvcAttrSchedName, []byte("rr\x00")), nla(uapi.SvcAttrFlags, le32(0), le32(0xffffffff)),
			nla(uapi.SvcAttrTimeout, le32(0)), nla(uapi.SvcAttrNetmask, []byte{255, 255, 255, 255})),
	}, {
		name: "update IPv4 service persistent /24",
		op: Op{Kind: OpUpdateService, Service: Service{Protocol: UDP, Address: netip.MustParseAddr("10.0.0.1"), Port: 5060,
			Scheduler: "sh", Flags: FlagPersistent | FlagSchedSHPort, Timeout: 10800, Netmask: 24, PEName: "sip"}},
		cmd: uapi.CmdSetService,
		want: nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(2)), nla(uapi.SvcAttrProtocol, le16(17)),
			nla(uapi.SvcAttrAddr, addr16("10.0.0.1")), nla(uapi.SvcAttrPort, be16b(5060)),
			nla(uapi.SvcAttrSchedName, []byte("sh\x00")), nla(uapi.SvcAttrPEName, []byte("sip\x00")),
			nla(uapi.SvcAttrFlags, le32(0x11), le32(0xffffffff)),
			nla(uapi.SvcAttrTimeout, le32(10800)), nla(uapi.SvcAttrNetmask, []byte{255, 255, 255, 0})),
	}, {
		name: "create IPv6 fwmark service /64",
		op:   Op{Kind: OpCreateService, Service: Service{Family: IPv6, FWMark: 0x4000, Scheduler: "wlc", Netmask: 64}},
		cmd:  uapi.CmdNewService,
		want: nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(10)), nla(uapi.SvcAttrFWMark, le32(0x4000)),
			nla(uapi.SvcAttrSchedName, []byte("wlc\x00")), nla(uapi.SvcAttrFlags, le32(0), le32(0xffffffff)),
			nla(uapi.SvcAttrTimeout, le32(0)), nla(uapi.SvcAttrNetmask, le32(64))),
	}, {
		name: "IPv6 netmask defaults to 128",
		op:   Op{Kind: OpCreateService, Service: Service{Protocol: TCP, Address: netip.MustParseAddr("fd00::1"), Port: 80, Scheduler: "rr"}},
		cmd:  uapi.CmdNewService,
		want: nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(10)), nla(uapi.SvcAttrProtocol, le16(6)),
			nla(uapi.SvcAttrAddr, addr16("fd00::1")), nla(uapi.SvcAttrPort, be16b(80)),
			nla(uapi.SvcAttrSchedName, []byte("rr\x00")), nla(uapi.SvcAttrFlags, le32(0), le32(0xffffffff)),
			nla(uapi.SvcAttrTimeout, le32(0)), nla(uapi.SvcAttrNetmask, le32(128))),
	}, {
		name: "remove service sends its identity only",
		op:   Op{Kind: OpRemoveService, Service: svc4},
		cmd:  uapi.CmdDelService,
		want: svc4ID,
	}, {
		name: "create destination with a weight above 65535",
		op: Op{Kind: OpCreateDestination, Service: svc4, Destination: Destination{
			Address: netip.MustParseAddr("10.244.1.5"), Port: 8080, Weight: 70000, UpperThreshold: 9, LowerThreshold: 3}},
		cmd: uapi.CmdNewDest,
		want: cat(svc4ID, nla(uapi.CmdAttrDest, nla(uapi.DestAttrAddr, addr16("10.244.1.5")), nla(uapi.DestAttrPort, be16b(8080)),
			nla(uapi.DestAttrAddrFamily, le16(2)), nla(uapi.DestAttrFwdMethod, le32(0)), nla(uapi.DestAttrWeight, le32(70000)),
			nla(uapi.DestAttrUThresh, le32(9)), nla(uapi.DestAttrLThresh, le32(3)))),
	}, {
		name: "update GUE tunnel destination of another family",
		op: Op{Kind: OpUpdateDestination, Service: svc4, Destination: Destination{
			Address: netip.MustParseAddr("fd00::5"), Port: 8080, Forward: Tunnel, Weight: 1,
			TunnelType: TunnelGUE, TunnelPort: 6080, TunnelFlags: TunnelChecksum | TunnelRemoteChecksum}},
		cmd: uapi.CmdSetDest,
		want: cat(svc4ID, nla(uapi.CmdAttrDest, nla(uapi.DestAttrAddr, addr16("fd00::5")), nla(uapi.DestAttrPort, be16b(8080)),
			nla(uapi.DestAttrAddrFamily, le16(10)), nla(uapi.DestAttrFwdMethod, le32(2)), nla(uapi.DestAttrWeight, le32(1)),
			nla(uapi.DestAttrUThresh, le32(0)), nla(uapi.DestAttrLThresh, le32(0)),
			nla(uapi.DestAttrTunType, []byte{1}), nla(uapi.DestAttrTunPort, be16b(6080)), nla(uapi.DestAttrTunFlags, le16(3)))),
	}, {
		name: "remove destination sends identities only",
		op:   Op{Kind: OpRemoveDestination, Service: svc4, Destination: Destination{Address: netip.MustParseAddr("10.244.1.5"), Port: 8080, Weight: 5}},
		cmd:  uapi.CmdDelDest,
		want: cat(svc4ID, nla(uapi.CmdAttrDest, nla(uapi.DestAttrAddr, addr16("10.244.1.5")), nla(uapi.DestAttrPort, be16b(8080)),
			nla(uapi.DestAttrAddrFamily, le16(2)))),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var enc nlcore.Encoder
			if err := encodeOp(&enc, 0x1d, &tt.op, 77); err != nil {
				t.Fatal(err)
			}
			want := cat(le32(uint32(16+4+len(tt.want))), le16(0x1d), le16(nlcore.FlagRequest), le32(77), le32(0),
				[]byte{tt.cmd, 1, 0, 0}, tt.want)
			if diff := cmp.Diff(want, enc.B); diff != "" {
				t.Errorf("encoding (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEncodeInvalid(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.1")
	tests := []struct {
		name string
		op   Op
		want string
	}{
		{"no address", Op{Kind: OpCreateService, Service: Service{Scheduler: "rr"}}, "neither an address nor a firewall mark"},
		{"fwmark with address", Op{Kind: OpCreateService, Service: Service{Family: IPv4, FWMark: 1, Address: a}}, "no protocol, address or port"},
		{"fwmark without family", Op{Kind: OpRemoveService, Service: Service{FWMark: 1}}, "needs Family"},
		{"family mismatch", Op{Kind: OpCreateService, Service: Service{Family: IPv6, Address: a}}, "is not IPv6"},
		{"long scheduler", Op{Kind: OpCreateService, Service: Service{Address: a, Scheduler: strings.Repeat("x", 16)}}, "scheduler name"},
		{"long PE", Op{Kind: OpCreateService, Service: Service{Address: a, PEName: strings.Repeat("x", 17)}}, "persistence engine"},
		{"netmask", Op{Kind: OpUpdateService, Service: Service{Address: a, Netmask: 33}}, "netmask /33"},
		{"zone", Op{Kind: OpRemoveService, Service: Service{Address: netip.MustParseAddr("fe80::1%eth0")}}, "has a zone"},
		{"no destination", Op{Kind: OpCreateDestination, Service: Service{Address: a}}, "destination has no address"},
		{"destination family", Op{Kind: OpCreateDestination, Service: Service{Address: a}, Destination: Destination{Family: IPv6, Address: a}}, "is not IPv6"},
		{"unknown kind", Op{Kind: 99, Service: Service{Address: a}}, "unknown operation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var enc nlcore.Encoder
			err := encodeOp(&enc, 1, &tt.op, 1)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			if len(enc.B) != 0 {
				t.Errorf("a refused operation wrote %d bytes", len(enc.B))
			}
		})
	}
}

func stats32(base uint32) []byte {
	return cat(nla(uapi.StatsAttrConns, le32(base)), nla(uapi.StatsAttrInPkts, le32(base+1)), nla(uapi.StatsAttrOutPkts, le32(base+2)),
		nla(uapi.StatsAttrInBytes, le64(uint64(base)+3)), nla(uapi.StatsAttrOutBytes, le64(uint64(base)+4)),
		nla(uapi.StatsAttrCPS, le32(base+5)), nla(uapi.StatsAttrInPPS, le32(base+6)), nla(uapi.StatsAttrOutPPS, le32(base+7)),
		nla(uapi.StatsAttrInBPS, le32(base+8)), nla(uapi.StatsAttrOutBPS, le32(base+9)))
}

func stats64(base uint64) []byte {
	var out []byte
	for i := uint16(1); i <= 10; i++ {
		out = append(out, nla(i, le64(base+uint64(i)-1))...)
	}
	return out
}

func wantStats(base uint64) Stats {
	return Stats{base, base + 1, base + 2, base + 3, base + 4, base + 5, base + 6, base + 7, base + 8, base + 9}
}

func TestDecodeService(t *testing.T) {
	skipBigEndian(t)
	genl := []byte{uapi.CmdNewService, 1, 0, 0}
	tests := []struct {
		name    string
		attrs   []byte
		want    ServiceEntry
		wantErr string
	}{{
		name: "IPv4 as the kernel dumps it, 64-bit stats preferred",
		attrs: nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(2)), nla(uapi.SvcAttrProtocol, le16(6)),
			nla(uapi.SvcAttrAddr, addr16("10.96.0.10")), nla(uapi.SvcAttrPort, be16b(53)),
			nla(uapi.SvcAttrSchedName, []byte("rr\x00")), nla(uapi.SvcAttrFlags, le32(0x3), le32(0xffffffff)),
			nla(uapi.SvcAttrTimeout, le32(10800)), nla(uapi.SvcAttrNetmask, []byte{255, 255, 255, 0}),
			nla(uapi.SvcAttrStats, stats32(1)), nla(uapi.SvcAttrStats64, stats64(1<<40))),
		want: ServiceEntry{
			Service: Service{Family: IPv4, Protocol: TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 53,
				Scheduler: "rr", Flags: FlagPersistent | FlagHashed, Timeout: 10800, Netmask: 24},
			Stats: wantStats(1 << 40),
		},
	}, {
		name: "IPv6 fwmark with a persistence engine, 32-bit stats only (old kernel)",
		attrs: nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(10)), nla(uapi.SvcAttrFWMark, le32(9)),
			nla(uapi.SvcAttrSchedName, []byte("sh\x00")), nla(uapi.SvcAttrPEName, []byte("sip\x00")),
			nla(uapi.SvcAttrFlags, le32(0x1a), le32(0xffffffff)),
			nla(uapi.SvcAttrTimeout, le32(0)), nla(uapi.SvcAttrNetmask, le32(64)), nla(uapi.SvcAttrStats, stats32(5))),
		want: ServiceEntry{
			Service: Service{Family: IPv6, FWMark: 9, Scheduler: "sh", PEName: "sip",
				Flags: FlagHashed | FlagSchedSHFallback | FlagSchedSHPort, Netmask: 64},
			Stats: wantStats(5),
		},
	}, {
		name:  "flags are masked, unknown attributes ignored",
		attrs: nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(2)), nla(uapi.SvcAttrFWMark, le32(1)), nla(uapi.SvcAttrFlags, le32(0xff), le32(0x1)), nla(99, le32(1))),
		want:  ServiceEntry{Service: Service{Family: IPv4, FWMark: 1, Flags: FlagPersistent}},
	}, {
		name:    "no family",
		attrs:   nla(uapi.CmdAttrService, nla(uapi.SvcAttrFWMark, le32(1))),
		wantErr: "without an address family",
	}, {
		name:    "unknown family",
		attrs:   nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(7))),
		wantErr: "unknown family(7)",
	}, {
		name:    "short IPv6 address",
		attrs:   nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(10)), nla(uapi.SvcAttrAddr, addr16("10.0.0.1")[:4])),
		wantErr: "has 4 bytes for IPv6",
	}, {
		name:    "non-contiguous netmask",
		attrs:   nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(2)), nla(uapi.SvcAttrNetmask, []byte{255, 0, 255, 0})),
		wantErr: "255.0.255.0 is not a prefix",
	}, {
		name:    "IPv6 netmask out of range",
		attrs:   nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(10)), nla(uapi.SvcAttrNetmask, le32(129))),
		wantErr: "IPv6 netmask /129",
	}, {
		name:    "wrong port length",
		attrs:   nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(2)), nla(uapi.SvcAttrPort, le32(1))),
		wantErr: "attribute port has 4 bytes",
	}, {
		name:    "truncated attribute",
		attrs:   nla(uapi.CmdAttrService, nla(uapi.SvcAttrAF, le16(2)))[:6],
		wantErr: "truncated",
	}, {
		name:    "no service attribute",
		attrs:   nla(uapi.CmdAttrDest),
		wantErr: "without a service attribute",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeServiceMessage(cat(genl, tt.attrs))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpAddr); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeDestination(t *testing.T) {
	skipBigEndian(t)
	genl := []byte{uapi.CmdNewDest, 1, 0, 0}
	tests := []struct {
		name      string
		attrs     []byte
		svcFamily Family
		want      DestinationEntry
		wantErr   string
	}{{
		name: "as the kernel dumps it",
		attrs: nla(uapi.CmdAttrDest, nla(uapi.DestAttrAddr, addr16("10.244.1.5")), nla(uapi.DestAttrPort, be16b(8080)),
			nla(uapi.DestAttrFwdMethod, le32(2)), nla(uapi.DestAttrWeight, le32(1<<31-1)),
			nla(uapi.DestAttrTunType, []byte{1}), nla(uapi.DestAttrTunPort, be16b(6080)), nla(uapi.DestAttrTunFlags, le16(1)),
			nla(uapi.DestAttrUThresh, le32(100)), nla(uapi.DestAttrLThresh, le32(10)),
			nla(uapi.DestAttrActiveConns, le32(3)), nla(uapi.DestAttrInactConns, le32(4)), nla(uapi.DestAttrPersistConns, le32(5)),
			nla(uapi.DestAttrAddrFamily, le16(2)), nla(uapi.DestAttrStats, stats32(7)), nla(uapi.DestAttrStats64, stats64(1<<33))),
		svcFamily: IPv6,
		want: DestinationEntry{
			Destination: Destination{Family: IPv4, Address: netip.MustParseAddr("10.244.1.5"), Port: 8080, Forward: Tunnel,
				Weight: 1<<31 - 1, UpperThreshold: 100, LowerThreshold: 10, TunnelType: TunnelGUE, TunnelPort: 6080, TunnelFlags: TunnelChecksum},
			ActiveConns: 3, InactiveConns: 4, PersistentConns: 5, Stats: wantStats(1 << 33),
		},
	}, {
		name:      "no family attribute: the service's (old kernels)",
		attrs:     nla(uapi.CmdAttrDest, nla(uapi.DestAttrAddr, addr16("fd00::5")), nla(uapi.DestAttrPort, be16b(80)), nla(uapi.DestAttrWeight, le32(70000))),
		svcFamily: IPv6,
		want:      DestinationEntry{Destination: Destination{Family: IPv6, Address: netip.MustParseAddr("fd00::5"), Port: 80, Weight: 70000}},
	}, {
		name:      "no address",
		attrs:     nla(uapi.CmdAttrDest, nla(uapi.DestAttrPort, be16b(80))),
		svcFamily: IPv4,
		wantErr:   "without an address",
	}, {
		name:      "bad weight length",
		attrs:     nla(uapi.CmdAttrDest, nla(uapi.DestAttrWeight, le16(1))),
		svcFamily: IPv4,
		wantErr:   "attribute weight has 2 bytes",
	}, {
		name:      "bad stats counter",
		attrs:     nla(uapi.CmdAttrDest, nla(uapi.DestAttrAddr, addr16("10.0.0.1")), nla(uapi.DestAttrStats64, nla(uapi.StatsAttrConns, le16(1)))),
		svcFamily: IPv4,
		wantErr:   "stats counter has 2 bytes",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeDestinationMessage(cat(genl, tt.attrs), tt.svcFamily)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpAddr); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeInfoAndConfig(t *testing.T) {
	skipBigEndian(t)
	i, err := decodeInfo(cat([]byte{uapi.CmdSetInfo, 1, 0, 0}, nla(uapi.InfoAttrVersion, le32(0x010201)), nla(uapi.InfoAttrConnTabSize, le32(4096))))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Info{Version: 0x010201, ConnTableSize: 4096}); i != want || i.VersionString() != "1.2.1" {
		t.Errorf("info %+v %s, want %+v", i, i.VersionString(), want)
	}
	c, err := decodeConfig(cat([]byte{uapi.CmdSetConfig, 1, 0, 0}, nla(uapi.CmdAttrTimeoutTCP, le32(900)), nla(uapi.CmdAttrTimeoutTCPFin, le32(120)), nla(uapi.CmdAttrTimeoutUDP, le32(300))))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Config{900, 120, 300}); c != want {
		t.Errorf("config %+v, want %+v", c, want)
	}
	if _, err := decodeInfo([]byte{1}); err == nil {
		t.Error("a message shorter than the generic netlink header decoded")
	}
	if _, err := decodeConfig(cat([]byte{uapi.CmdSetConfig, 1, 0, 0}, nla(uapi.CmdAttrTimeoutTCP, le16(1)))); err == nil {
		t.Error("a 2-byte timeout decoded")
	}
}

// TestRoundTrip encodes services and destinations and decodes them again.
func TestRoundTrip(t *testing.T) {
	svcs := []Service{
		{Protocol: TCP, Address: netip.MustParseAddr("10.96.0.10"), Port: 443, Scheduler: "rr", Flags: FlagPersistent, Timeout: 10800, Netmask: 32},
		{Family: IPv6, Protocol: SCTP, Address: netip.MustParseAddr("2001:db8::1"), Port: 36412, Scheduler: "mh", Flags: FlagSchedMHFallback | FlagSchedMHPort, Netmask: 48},
		{Family: IPv4, FWMark: 1 << 31, Scheduler: "none", PEName: "sip", Netmask: 8},
		{Protocol: UDP, Address: netip.MustParseAddr("10.96.0.1"), Scheduler: "wlc", Netmask: 1},
	}
	for _, s := range svcs {
		var enc nlcore.Encoder
		if err := encodeOp(&enc, 1, &Op{Kind: OpCreateService, Service: s}, 1); err != nil {
			t.Fatal(err)
		}
		got, err := decodeServiceMessage(enc.B[nlcore.HdrLen:])
		if err != nil {
			t.Fatal(err)
		}
		want := s
		want.Family = s.Key().Family
		if diff := cmp.Diff(want, got.Service, cmpAddr); diff != "" {
			t.Errorf("round trip of %v (-want +got):\n%s", s, diff)
		}
	}
	d := Destination{Address: netip.MustParseAddr("fd00::7"), Port: 1, Forward: Tunnel, Weight: 1 << 20,
		UpperThreshold: 5, LowerThreshold: 1, TunnelType: TunnelGRE, TunnelFlags: TunnelRemoteChecksum}
	var enc nlcore.Encoder
	if err := encodeOp(&enc, 1, &Op{Kind: OpCreateDestination, Service: svcs[0], Destination: d}, 1); err != nil {
		t.Fatal(err)
	}
	p := enc.B[nlcore.HdrLen+nlcore.GenlHdrLen:]
	v, ok, err := nlcore.FindAttr(p, uapi.CmdAttrDest)
	if err != nil || !ok {
		t.Fatalf("no destination attribute: %v", err)
	}
	got, err := decodeDestination(v, IPv4)
	if err != nil {
		t.Fatal(err)
	}
	d.Family = IPv6
	if diff := cmp.Diff(d, got.Destination, cmpAddr); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}
