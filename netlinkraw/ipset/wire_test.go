package ipset

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// le16 writes a host-order (little-endian on the build machines) u16, for
// hand-written expected bytes.
func ne16(v uint16) []byte { return binary.NativeEndian.AppendUint16(nil, v) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestAppendEntry(t *testing.T) {
	ip4 := func(addr string) []byte { // nested IP attribute holding an IPv4 address
		a := netip.MustParseAddr(addr).As4()
		return cat(ne16(12), ne16(attrIP|nlcore.AttrNested), ne16(8), ne16(attrIPAddrIPv4|nlcore.AttrNetByteOrder), a[:])
	}
	cases := []struct {
		name string
		t    Type
		e    Entry
		line uint32
		want []byte
	}{
		{"hash:ip", HashIP, Entry{IP: netip.MustParseAddr("10.96.0.10")}, 0,
			cat(ne16(16), ne16(attrData|nlcore.AttrNested), ip4("10.96.0.10"))},
		{"hash:ip,port with line", HashIPPort, Entry{IP: netip.MustParseAddr("10.0.0.1"), Proto: TCP, Port: 443}, 7,
			cat(ne16(40), ne16(attrData|nlcore.AttrNested), ip4("10.0.0.1"),
				ne16(6), ne16(attrPort|nlcore.AttrNetByteOrder), []byte{0x01, 0xbb, 0, 0},
				ne16(5), ne16(attrProto), []byte{6, 0, 0, 0},
				ne16(8), ne16(attrLineNo), binary.NativeEndian.AppendUint32(nil, 7))},
		{"hash:net nomatch", HashNet, Entry{Net: netip.MustParsePrefix("10.1.0.0/16"), NoMatch: true}, 0,
			cat(ne16(32), ne16(attrData|nlcore.AttrNested), ip4("10.1.0.0"),
				ne16(5), ne16(attrCIDR), []byte{16, 0, 0, 0},
				ne16(8), ne16(attrCADTFlags|nlcore.AttrNetByteOrder), []byte{0, 0, 0, 4})},
		{"bitmap:port 0", BitmapPort, Entry{Port: 0}, 0,
			cat(ne16(12), ne16(attrData|nlcore.AttrNested), ne16(6), ne16(attrPort|nlcore.AttrNetByteOrder), []byte{0, 0, 0, 0})},
		{"ipv6", HashIP, Entry{IP: netip.MustParseAddr("fd00::1")}, 0,
			cat(ne16(28), ne16(attrData|nlcore.AttrNested), ne16(24), ne16(attrIP|nlcore.AttrNested), ne16(20), ne16(attrIPAddrIPv6|nlcore.AttrNetByteOrder),
				[]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var a nlcore.Encoder
			appendEntry(&a, tc.t, tc.e, tc.line)
			if d := cmp.Diff(tc.want, a.B); d != "" {
				t.Errorf("appendEntry -want +got:\n%s", d)
			}
		})
	}
}

// listMessage builds a LIST reply as the kernel sends it: header data and
// entries in one message.
func listMessage(h Header, entries []Entry) []byte {
	a := &nlcore.Encoder{B: nfgenmsg()}
	a.U8(attrProtocol, 7)
	a.Str(attrSetName, h.Name)
	a.Str(attrTypeName, string(h.Type))
	a.U8(attrFamily, uint8(h.Family))
	a.U8(attrRevision, h.Revision)
	off := a.BeginNest(attrData | nlcore.AttrNested)
	if h.Type.IsHash() {
		a.BE32(attrHashSize|nlcore.AttrNetByteOrder, h.HashSize)
		a.BE32(attrMaxElem|nlcore.AttrNetByteOrder, h.MaxElem)
	} else {
		a.BE16(attrPort|nlcore.AttrNetByteOrder, h.PortFrom)
		a.BE16(attrPortTo|nlcore.AttrNetByteOrder, h.PortTo)
	}
	a.BE32(attrElements|nlcore.AttrNetByteOrder, h.Elements)
	a.BE32(attrReferences|nlcore.AttrNetByteOrder, h.References)
	a.BE32(attrMemSize|nlcore.AttrNetByteOrder, h.MemSize)
	a.EndNest(off)
	adt := a.BeginNest(attrADT | nlcore.AttrNested)
	for _, e := range entries {
		appendEntry(a, h.Type, e, 0)
	}
	a.EndNest(adt)
	return a.B
}

func TestListingRoundTrip(t *testing.T) {
	cases := []struct {
		h       Header
		entries []Entry
	}{
		{Header{Set: Set{Name: "KUBE-CLUSTER-IP", Type: HashIPPort, Family: INET, HashSize: 1024, MaxElem: 65536}, Revision: 7, Elements: 2, MemSize: 500},
			[]Entry{{IP: netip.MustParseAddr("10.96.0.10"), Proto: UDP, Port: 53}, {IP: netip.MustParseAddr("10.96.0.1"), Proto: TCP, Port: 443}}},
		{Header{Set: Set{Name: "SRC", Type: HashIPPortNet, Family: INET6, HashSize: 64, MaxElem: 10}, Revision: 7, Elements: 1},
			[]Entry{{IP: netip.MustParseAddr("2001:db8::1"), Proto: SCTP, Port: 9, Net: netip.MustParsePrefix("2001:db8::/32"), NoMatch: true}}},
		{Header{Set: Set{Name: "LB", Type: HashIPPortIP, Family: INET, HashSize: 64, MaxElem: 10}, Revision: 5, Elements: 1},
			[]Entry{{IP: netip.MustParseAddr("10.0.0.1"), Proto: TCP, Port: 80, IP2: netip.MustParseAddr("10.0.0.2")}}},
		{Header{Set: Set{Name: "NP", Type: BitmapPort, PortFrom: 30000, PortTo: 32767}, Revision: 3, Elements: 1},
			[]Entry{{Port: 30080}}},
		{Header{Set: Set{Name: "N", Type: HashNet, Family: INET, HashSize: 64, MaxElem: 10}, Revision: 7, Elements: 1},
			[]Entry{{Net: netip.MustParsePrefix("10.0.0.0/8")}}},
	}
	for _, tc := range cases {
		l := newListing()
		if err := l.add(listMessage(tc.h, tc.entries)); err != nil {
			t.Fatal(err)
		}
		got := l.sets[tc.h.Name]
		if got == nil {
			t.Fatalf("set %s not decoded", tc.h.Name)
		}
		if d := cmp.Diff(tc.h, got.Header); d != "" {
			t.Errorf("header -want +got:\n%s", d)
		}
		if d := cmp.Diff(tc.entries, got.Entries, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
			t.Errorf("entries -want +got:\n%s", d)
		}
	}
}

func TestDecodeAck(t *testing.T) {
	// An ipset batch failure: error code, then the request with LINENO
	// rewritten to the failing line.
	req := &nlcore.Encoder{B: nfgenmsg()}
	req.U8(attrProtocol, 7)
	req.Str(attrSetName, "s")
	req.U32(attrLineNo, 42)
	hdr := make([]byte, nlcore.HdrLen)
	binary.NativeEndian.PutUint32(hdr, uint32(nlcore.HdrLen+len(req.B)))
	code := make([]byte, 4)
	binary.NativeEndian.PutUint32(code, negCode(int(ErrExist)))
	cases := []struct {
		name string
		in   []byte
		want ackInfo
	}{
		{"ack", []byte{0, 0, 0, 0}, ackInfo{}},
		{"capped error", binary.NativeEndian.AppendUint32(nil, negCode(2)), ackInfo{Code: 2}},
		{"line", cat(code, hdr, req.B), ackInfo{Code: int(ErrExist), Line: 42, HasLine: true}},
	}
	for _, tc := range cases {
		got, err := decodeAck(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: decodeAck = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if _, err := decodeAck([]byte{1}); err == nil {
		t.Error("decodeAck of 1 byte succeeded")
	}
}

// scripted is a transport whose kernel is a function: it sees every batch
// and returns the datagrams to deliver.
type scripted struct {
	kernel func(msgs []netlink.Message) [][]message
	queue  [][]message
	sends  [][]netlink.Message
	// drop loses the next drop datagrams the kernel answers (faults).
	drop int
	// failRecv, when set, fails the next receive and loses the queue.
	failRecv error
}

// Send implements nlcore.Transport: the kernel function sees the
// messages as mdlayher/netlink's.
func (s *scripted) Send(b []byte, st *nlcore.Counters) error {
	st.Sendmsg++
	ms, err := nlcore.ParseMessages(nil, b)
	if err != nil {
		return err
	}
	cp := make([]netlink.Message, len(ms))
	for i, m := range ms {
		cp[i] = netlink.Message{
			Header: netlink.Header{Length: uint32(nlcore.HdrLen + len(m.Data)), Type: netlink.HeaderType(m.Type), Flags: netlink.HeaderFlags(m.Flags), Sequence: m.Seq},
			Data:   append([]byte(nil), m.Data...),
		}
	}
	s.sends = append(s.sends, cp)
	for _, d := range s.kernel(cp) {
		if s.drop > 0 {
			s.drop--
			continue
		}
		s.queue = append(s.queue, d)
	}
	return nil
}

// Receive implements nlcore.Transport.
func (s *scripted) Receive(deadline time.Time, st *nlcore.Counters) ([]message, error) {
	st.Recvmsg++
	if s.failRecv != nil {
		err := s.failRecv
		s.failRecv, s.queue = nil, nil // the replies are lost with it
		return nil, err
	}
	if len(s.queue) == 0 {
		if !deadline.IsZero() {
			// A silent kernel: wait like a socket would.
			time.Sleep(time.Until(deadline))
			return nil, os.ErrDeadlineExceeded
		}
		return nil, errQueueEmpty
	}
	d := s.queue[0]
	s.queue = s.queue[1:]
	for i := range d {
		if d[i].Type == nlcore.TypeError && len(d[i].Data) >= 4 {
			d[i].Errno = -int32(binary.NativeEndian.Uint32(d[i].Data))
		}
	}
	return d, nil
}

// WholeDumps implements nlcore.Transport: the kernel's datagrams.
func (s *scripted) WholeDumps() bool { return false }

// Close implements nlcore.Transport.
func (s *scripted) Close() error { return nil }

type queueEmpty struct{}

func (queueEmpty) Error() string { return "scripted kernel: nothing to receive" }

var errQueueEmpty = queueEmpty{}

func ack(m netlink.Message, code int) []message {
	d := binary.NativeEndian.AppendUint32(nil, negCode(code))
	return []message{{Type: uint16(netlink.Error), Seq: m.Header.Sequence, Data: d}}
}

func protoReply(m netlink.Message, v uint8) []message {
	a := &nlcore.Encoder{B: nfgenmsg()}
	a.U8(attrProtocol, v)
	a.U8(attrProtocolMin, 6)
	return []message{{Type: uint16(m.Header.Type), Seq: m.Header.Sequence, Data: a.B}}
}

func cmdOf(m netlink.Message) uint8 { return uint8(m.Header.Type) }

// offered returns the protocol attribute of a request.
func offered(t *testing.T, m netlink.Message) uint8 {
	v, ok, err := nlcore.FindAttr(m.Data[nlcore.NfgenLen:], attrProtocol)
	if err != nil || !ok || len(v) != 1 {
		t.Fatalf("no protocol attribute (%v)", err)
	}
	return v[0]
}

func TestNegotiate(t *testing.T) {
	cases := []struct {
		name    string
		kernel  uint8 // protocol the kernel speaks
		reject7 bool  // the kernel refuses protocol 7 requests
		want    uint8
		wantErr bool
	}{
		{"protocol 7 kernel", 7, false, 7, false},
		{"protocol 6 kernel", 6, false, 6, false},
		{"kernel refusing 7", 6, true, 6, false},
		{"future kernel", 9, false, 7, false},
		{"ancient kernel", 5, false, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := &scripted{}
			tr.kernel = func(msgs []netlink.Message) [][]message {
				m := msgs[0]
				if cmdOf(m) != cmdProtocol {
					t.Fatalf("command %d before negotiation", cmdOf(m))
				}
				if tc.reject7 && offered(t, m) > 6 {
					return [][]message{ack(m, int(ErrProtocol))}
				}
				return [][]message{protoReply(m, tc.kernel), ack(m, 0)}
			}
			c, err := newConn(tr, Config{})
			if tc.wantErr {
				if err == nil {
					t.Fatalf("newConn succeeded with protocol %d", c.proto)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Protocol() != tc.want {
				t.Errorf("Protocol() = %d, want %d", c.Protocol(), tc.want)
			}
		})
	}
}

// TestBatchingScripted checks the batch shape: many entries per message,
// many messages per sendmsg, an acknowledgement asked only on the last
// message, and a failing line resent from the next entry on.
func TestBatchingScripted(t *testing.T) {
	const n = 5000
	failAt := map[uint32]bool{} // failing line numbers of the first message
	var round int
	tr := &scripted{}
	tr.kernel = func(msgs []netlink.Message) [][]message {
		var out [][]message
		switch cmdOf(msgs[0]) {
		case cmdProtocol:
			return [][]message{protoReply(msgs[0], 7), ack(msgs[0], 0)}
		case cmdList: // the header query before the first Add
			return [][]message{{{Type: uint16(msgs[0].Header.Type), Seq: msgs[0].Header.Sequence, Data: listMessage(Header{Set: Set{Name: "s", Type: HashIPPort, Family: INET, HashSize: 1024, MaxElem: 65536}}, nil)}},
				{{Type: uint16(netlink.Done), Flags: uint16(netlink.Multi), Seq: msgs[0].Header.Sequence, Data: []byte{0, 0, 0, 0}}}}
		}
		round++
		for i, m := range msgs {
			wantAck := i == len(msgs)-1
			if got := m.Header.Flags&netlink.Acknowledge != 0; got != wantAck {
				t.Errorf("round %d message %d: ack flag %v, want %v", round, i, got, wantAck)
			}
			if round == 1 && i == 0 {
				// Fail line 3: the kernel copies the request with LINENO
				// set to 3.
				hdr := make([]byte, nlcore.HdrLen)
				binary.NativeEndian.PutUint32(hdr, uint32(nlcore.HdrLen+len(m.Data)))
				data := append([]byte(nil), m.Data...)
				_ = nlcore.ForEachAttr(data[4:], func(typ uint16, v []byte) error {
					if typ == attrLineNo { // v's offset in data: what its capacity lacks
						binary.NativeEndian.PutUint32(data[cap(data)-cap(v):], 3)
					}
					return nil
				})
				code := binary.NativeEndian.AppendUint32(nil, negCode(int(ErrExist)))
				out = append(out, []message{{Type: uint16(netlink.Error), Seq: m.Header.Sequence, Data: cat(code, hdr, data)}})
				failAt[3] = true
				continue
			}
			if wantAck {
				out = append(out, ack(m, 0))
			}
		}
		return out
	}
	c, err := newConn(tr, Config{BatchBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	entries := make([]Entry, n)
	for i := range entries {
		entries[i] = Entry{IP: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Proto: TCP, Port: 80}
	}
	before := c.Stats()
	err = c.Add("s", entries)
	be, ok := err.(*BatchError)
	if !ok || len(be.Failed) != 1 || be.Failed[0].Index != 2 {
		t.Fatalf("Add = %v, want entry 2 failed", err)
	}
	st := c.Stats()
	// 5000 entries of 40 bytes in 60 KB messages: 4 messages in one
	// sendmsg; then the entries after the failed line of the first message
	// in messages of an eighth of its size.
	adds := tr.sends[len(tr.sends)-2:]
	if len(adds[0]) != 4 {
		t.Errorf("first sendmsg carries %d messages, want 4", len(adds[0]))
	}
	firstLen := entriesIn(t, adds[0][0])
	resent := 0
	for _, m := range adds[1] {
		k := entriesIn(t, m)
		if k > firstLen/8 {
			t.Errorf("resent message carries %d entries, want at most %d", k, firstLen/8)
		}
		resent += k
	}
	if resent != firstLen-3 || len(adds[1]) < 2 {
		t.Errorf("resent %d entries in %d messages, want %d in several", resent, len(adds[1]), firstLen-3)
	}
	if got := st.Sendmsg - before.Sendmsg; got != 3 { // header dump + 2 rounds
		t.Errorf("sendmsg = %d, want 3", got)
	}
}

// negCode is an error code as the kernel writes it: negated, as a u32.
func negCode(code int) uint32 { return uint32(int32(-code)) }

// putHeader writes a netlink header for m with a payload of n bytes.
func putHeader(b []byte, m message, n int) {
	binary.NativeEndian.PutUint32(b[0:], uint32(nlcore.HdrLen+n))
	binary.NativeEndian.PutUint16(b[4:], m.Type)
	binary.NativeEndian.PutUint16(b[6:], m.Flags)
	binary.NativeEndian.PutUint32(b[8:], m.Seq)
}

// entriesIn counts the entries of an ADD/DEL message.
func entriesIn(t *testing.T, m netlink.Message) int {
	adt, ok, err := nlcore.FindAttr(m.Data[nlcore.NfgenLen:], attrADT)
	if err != nil || !ok {
		t.Fatalf("no ADT attribute (%v)", err)
	}
	n := 0
	if err := nlcore.ForEachAttr(adt, func(uint16, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSequenceWrap: the sequence numbers of one sendmsg stay contiguous when
// the counter wraps, so every answer finds its message.
func TestSequenceWrap(t *testing.T) {
	tr := &scripted{}
	var failSeq uint32
	tr.kernel = func(msgs []netlink.Message) [][]message {
		switch cmdOf(msgs[0]) {
		case cmdProtocol:
			return [][]message{protoReply(msgs[0], 7), ack(msgs[0], 0)}
		case cmdList:
			return [][]message{{{Type: uint16(msgs[0].Header.Type), Seq: msgs[0].Header.Sequence, Data: listMessage(Header{Set: Set{Name: "s", Type: HashIP, Family: INET, HashSize: 64, MaxElem: 10}}, nil)}},
				{{Type: uint16(netlink.Done), Flags: uint16(netlink.Multi), Seq: msgs[0].Header.Sequence, Data: []byte{0, 0, 0, 0}}}}
		}
		var out [][]message
		for i, m := range msgs {
			if i > 0 && m.Header.Sequence != msgs[i-1].Header.Sequence+1 {
				t.Errorf("sequence %d follows %d", m.Header.Sequence, msgs[i-1].Header.Sequence)
			}
			if i == 1 {
				failSeq = m.Header.Sequence
				out = append(out, ack(m, int(ErrHashFull))) // no line: the whole message fails
			}
		}
		return append(out, ack(msgs[len(msgs)-1], 0))
	}
	c, err := newConn(tr, Config{})
	if err != nil {
		t.Fatal(err)
	}
	c.nl.Seq = ^uint32(0) - 1
	entries := make([]Entry, 6000)
	for i := range entries {
		entries[i] = Entry{IP: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})}
	}
	err = c.Add("s", entries)
	if !errors.Is(err, ErrHashFull) {
		t.Fatalf("Add = %v, want the second message's ErrHashFull", err)
	}
	if failSeq == 0 || failSeq > 100 {
		t.Errorf("failing message had sequence %d, want a small one after the wrap", failSeq)
	}
}

func TestErrnoFromKernel(t *testing.T) {
	cases := []struct {
		code   int
		bitmap bool
		want   string
	}{
		{4103, false, "element already exists"},
		{4098, false, "set type not supported"},
		{4352, false, "set is full"},
		{4352, true, "element is out of the range of the set"},
		{4355, false, "protocol missing"},
		{4108, false, "set is referenced by a kernel component"},
		{2, false, "no such file or directory"},
		{5000, false, "ipset error 5000"},
	}
	for _, tc := range cases {
		if got := errnoFromKernel(tc.code, tc.bitmap).Error(); got != tc.want {
			t.Errorf("errnoFromKernel(%d, %v) = %q, want %q", tc.code, tc.bitmap, got, tc.want)
		}
	}
	err := &OpError{Op: "create", Object: "set KUBE-X", Err: errnoFromKernel(17, false)}
	if got := err.Error(); got != "ipset: create set KUBE-X: set already exists" {
		t.Errorf("OpError text = %q", got)
	}
}
