package ipset

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw"
	"github.com/proxysinks/proxysinks/netlinkraw/internal/fault"
)

// faultKernel is a scripted kernel holding one hash:ip,port set "s" whose
// first interrupt dumps are marked NLM_F_DUMP_INTR.
func faultKernel(t *testing.T) (*scripted, *int, *Conn) {
	t.Helper()
	interrupt := new(int)
	tr := &scripted{}
	tr.kernel = func(msgs []netlink.Message) [][]message {
		m := msgs[0]
		switch cmdOf(m) {
		case cmdProtocol:
			return [][]message{protoReply(m, 7), ack(m, 0)}
		case cmdList:
			var flags uint16 = uint16(netlink.Multi)
			if *interrupt > 0 {
				*interrupt--
				flags |= uint16(netlink.DumpInterrupted)
			}
			hdr := Header{Set: Set{Name: "s", Type: HashIPPort, Family: INET, HashSize: 1024, MaxElem: 65536}}
			return [][]message{{{Type: uint16(m.Header.Type), Flags: flags, Seq: m.Header.Sequence, Data: listMessage(hdr, nil)}},
				{{Type: uint16(netlink.Done), Flags: flags, Seq: m.Header.Sequence, Data: []byte{0, 0, 0, 0}}}}
		}
		last := msgs[len(msgs)-1]
		return [][]message{ack(last, 0)}
	}
	c, err := newConn(tr, Config{ReplyTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return tr, interrupt, c
}

func someEntries(n int) []Entry {
	out := make([]Entry, n)
	for i := range out {
		out[i] = Entry{IP: netip.AddrFrom4([4]byte{10, 96, 0, byte(i + 1)}), Proto: TCP, Port: 80}
	}
	return out
}

// TestFaultLostReply: a lost reply fails Add with ErrReplyTimeout, naming
// the set, in bounded time; a late reply that comes afterwards is skipped
// by the next call, which succeeds.
func TestFaultLostReply(t *testing.T) {
	tr, _, c := faultKernel(t)
	if _, err := c.Header("s"); err != nil { // learn the set's kind
		t.Fatal(err)
	}
	tr.drop = 1
	err := fault.Bounded(t, 2*time.Second, func() error { return c.Add("s", someEntries(3)) })
	if !errors.Is(err, netlinkraw.ErrReplyTimeout) || !strings.Contains(err.Error(), "set s") {
		t.Fatalf("Add with a lost reply: %v, want ErrReplyTimeout naming set s", err)
	}
	// The lost ACK arrives late, before the next request's answers.
	sent := tr.sends[len(tr.sends)-1]
	tr.queue = append(tr.queue, ack(sent[len(sent)-1], int(ErrExist)))
	if err := c.Add("s", someEntries(2)); err != nil {
		t.Fatalf("Add after the late reply: %v", err)
	}
	tr.drop = 2 // the whole dump
	if _, err := c.Header("s"); !errors.Is(err, netlinkraw.ErrReplyTimeout) {
		t.Errorf("Header with a lost dump: %v, want ErrReplyTimeout", err)
	}
	tr.queue = nil
	if _, err := c.Header("s"); err != nil {
		t.Errorf("Header after the fault: %v", err)
	}
}

// TestFaultENOBUFS: replies lost to a full receive buffer fail the call
// with an error matching ENOBUFS; the next call works.
func TestFaultENOBUFS(t *testing.T) {
	tr, _, c := faultKernel(t)
	if _, err := c.Header("s"); err != nil {
		t.Fatal(err)
	}
	tr.failRecv = fmt.Errorf("receive: kernel answers were lost: %w", unix.ENOBUFS)
	err := c.Add("s", someEntries(3))
	if !errors.Is(err, unix.ENOBUFS) || !strings.Contains(err.Error(), "set s") {
		t.Fatalf("Add: %v, want ENOBUFS naming set s", err)
	}
	if err := c.Add("s", someEntries(3)); err != nil {
		t.Errorf("Add after the fault: %v", err)
	}
}

// TestFaultDumpInterrupted: an interrupted dump is run again; one
// interrupted every time is ErrDumpInterrupted; then the next works.
func TestFaultDumpInterrupted(t *testing.T) {
	tr, interrupt, c := faultKernel(t)
	*interrupt = 2
	before := len(tr.sends)
	if _, err := c.Header("s"); err != nil {
		t.Fatalf("Header with two interrupted dumps: %v", err)
	}
	if got := len(tr.sends) - before; got != 3 {
		t.Errorf("%d dumps, want 3", got)
	}
	*interrupt = 1000
	if _, err := c.Header("s"); !errors.Is(err, netlinkraw.ErrDumpInterrupted) || !strings.Contains(err.Error(), "set s") {
		t.Errorf("always interrupted: %v, want ErrDumpInterrupted naming set s", err)
	}
	*interrupt = 0
	if _, err := c.Header("s"); err != nil {
		t.Errorf("after the fault: %v", err)
	}
}
