package ipsettest_test

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxysinks/proxysinks/netlinkraw"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset/ipsettest"
)

func entries(n int) []ipset.Entry {
	out := make([]ipset.Entry, n)
	for i := range out {
		out[i] = ipset.Entry{IP: netip.AddrFrom4([4]byte{10, 96, 0, byte(i + 1)}), Proto: ipset.TCP, Port: 80}
	}
	return out
}

func fakeWithSet(t *testing.T) *ipsettest.Fake {
	t.Helper()
	f := ipsettest.New()
	if err := f.Create(ipset.Set{Name: "s", Type: ipset.HashIPPort, Family: ipset.INET}); err != nil {
		t.Fatal(err)
	}
	return f
}

func members(t *testing.T, f *ipsettest.Fake) int {
	t.Helper()
	_, es, err := f.List("s")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestFakeFailNth: the injected failure names exactly its entry
// (errors.Is works), the other entries are applied, and retrying the
// failed entry succeeds.
func TestFakeFailNth(t *testing.T) {
	f := fakeWithSet(t)
	f.FailNth(3, ipset.ErrHashFull)
	err := f.Add("s", entries(5))
	var be *ipset.BatchError
	if !errors.As(err, &be) || !errors.Is(err, ipset.ErrHashFull) {
		t.Fatalf("Add: %v, want a BatchError matching ErrHashFull", err)
	}
	if diff := cmp.Diff([]int{2}, []int{be.Failed[0].Index}); diff != "" || len(be.Failed) != 1 {
		t.Errorf("failed %+v, want entry 2 only", be.Failed)
	}
	if n := members(t, f); n != 4 {
		t.Errorf("%d members, want 4", n)
	}
	if err := f.Add("s", []ipset.Entry{be.Failed[0].Entry}); err != nil {
		t.Errorf("retry: %v", err)
	}
	// A command.
	f.FailNth(1, syscall.ENOMEM)
	if err := f.Flush("s"); !errors.Is(err, syscall.ENOMEM) || !strings.Contains(err.Error(), "set s") {
		t.Errorf("Flush: %v, want ENOMEM naming set s", err)
	}
	if n := members(t, f); n != 5 {
		t.Errorf("failed Flush applied: %d members", n)
	}
}

// TestFakeLostReplyAndENOBUFS: the call is applied but fails as a real
// connection's would; the next call works.
func TestFakeLostReplyAndENOBUFS(t *testing.T) {
	f := fakeWithSet(t)
	f.DropReplies(1)
	err := f.Add("s", entries(2))
	if !errors.Is(err, netlinkraw.ErrReplyTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "set s") {
		t.Errorf("Add with a lost reply: %v, want ErrReplyTimeout naming set s", err)
	}
	f.FailReceives(1, syscall.ENOBUFS)
	if err := f.Add("s", entries(3)[2:]); !errors.Is(err, syscall.ENOBUFS) {
		t.Errorf("Add with ENOBUFS: %v", err)
	}
	if n := members(t, f); n != 3 {
		t.Errorf("%d members, want 3 (both calls applied)", n)
	}
}

// TestFakeInterruptedDumps: fewer interrupts than the client's attempts
// cost nothing; as many fail the call with ErrDumpInterrupted.
func TestFakeInterruptedDumps(t *testing.T) {
	f := fakeWithSet(t)
	f.InterruptDumps(netlinkraw.MaxDumpAttempts - 1)
	if _, err := f.Header("s"); err != nil {
		t.Errorf("Header: %v", err)
	}
	f.InterruptDumps(netlinkraw.MaxDumpAttempts)
	if _, _, err := f.List("s"); !errors.Is(err, netlinkraw.ErrDumpInterrupted) {
		t.Errorf("List: %v, want ErrDumpInterrupted", err)
	}
	if _, err := f.ListNames(); err != nil {
		t.Errorf("ListNames after the fault: %v", err)
	}
}

// TestContractFakeAfterFaults: set and cleared faults leave the contract
// holding.
func TestContractFakeAfterFaults(t *testing.T) {
	ipsettest.Contract(t, func(t *testing.T) ipset.Client {
		f := ipsettest.New()
		f.FailNth(1, syscall.EIO)
		f.DropReplies(2)
		f.FailReceives(1, syscall.ENOBUFS)
		f.InterruptDumps(100)
		f.ClearFaults()
		return f
	}, ipsettest.Options{})
}
