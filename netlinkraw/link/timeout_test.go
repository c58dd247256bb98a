package link

import (
	"errors"
	"iter"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// silent is a netlink socket whose kernel never answers: a receive waits
// until the read deadline (forever without one).
type silent struct {
	mu       sync.Mutex
	deadline time.Time
	sent     int
}

func (s *silent) Close() error { return nil }

func (s *silent) Send(m netlink.Message) error { return s.SendMessages([]netlink.Message{m}) }

func (s *silent) SendMessages(m []netlink.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent += len(m)
	return nil
}

func (s *silent) Receive() ([]netlink.Message, error) {
	s.mu.Lock()
	d := s.deadline
	s.mu.Unlock()
	if d.IsZero() {
		select {} // what a socket does
	}
	time.Sleep(time.Until(d))
	return nil, os.ErrDeadlineExceeded
}

func (s *silent) ReceiveIter() iter.Seq2[netlink.Message, error] {
	return func(yield func(netlink.Message, error) bool) {
		_, err := s.Receive()
		yield(netlink.Message{}, err)
	}
}

func (s *silent) SetDeadline(t time.Time) error { return s.SetReadDeadline(t) }

func (s *silent) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deadline = t
	return nil
}

func (s *silent) SetWriteDeadline(time.Time) error { return nil }

// TestReplyTimeout: a kernel that never answers an address batch fails
// the call with ErrReplyTimeout within the configured timeout; the next
// call works on fresh sockets.
func TestReplyTimeout(t *testing.T) {
	ns := nstest.New(t)
	c, err := Dial(&Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lo, err := c.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	// Only the silent socket's wait is short: the real kernel's answers
	// may take longer than 100ms in the emulated VM.
	s := &silent{}
	c.raw = netlink.NewConn(s, 1)
	c.timeout = 100 * time.Millisecond
	a := netip.MustParseAddr("10.96.0.1")
	start := time.Now()
	err = c.batch("add address", "lo", unix.RTM_NEWADDR, netlink.Create|netlink.Excl, []netip.Addr{a}, addrEncoder(lo.Index), unix.EEXIST)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("AddAddresses took %v with a 100ms reply timeout", took)
	}
	if !errors.Is(err, netlinkraw.ErrReplyTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("AddAddresses to a silent kernel: %v, want ErrReplyTimeout", err)
	}
	if s.sent != 1 {
		t.Errorf("%d messages sent to the silent socket, want 1", s.sent)
	}
	// The fault is gone: the next call dials again and works.
	c.timeout = netlinkraw.DefaultReplyTimeout
	if err := c.AddAddresses("lo", []netip.Addr{a}); err != nil {
		t.Fatalf("AddAddresses after the timeout: %v", err)
	}
	got, err := c.Addresses("lo")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, a) {
		t.Errorf("lo has %v, want %v among them", got, a)
	}
}
