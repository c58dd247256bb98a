package ipset_test

import (
	"errors"
	"slices"
	"time"

	"github.com/proxysinks/proxysinks/netlinkraw"
	"testing"

	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset/ipsettest"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// dial opens a Conn in a fresh network namespace.
func dial(t *testing.T, cfg ipset.Config) (*ipset.Conn, *nstest.NetNS) {
	t.Helper()
	ns := nstest.New(t)
	cfg.NetNS = ns.FD()
	c, err := ipset.Dial(&cfg)
	if err != nil {
		nstest.Missing(t, "ipset in the kernel: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ns
}

func TestContractKernel(t *testing.T) {
	ipsettest.Contract(t, func(t *testing.T) ipset.Client {
		c, _ := dial(t, ipset.Config{})
		return c
	}, ipsettest.Options{})
}

// TestContractKernelProtocol6 runs the suite speaking protocol 6, as on
// kernels older than protocol 7.
func TestContractKernelProtocol6(t *testing.T) {
	ipsettest.Contract(t, func(t *testing.T) ipset.Client {
		c, _ := dial(t, ipset.Config{MaxProtocol: 6})
		if c.Protocol() != 6 {
			t.Fatalf("Protocol() = %d, want 6", c.Protocol())
		}
		return c
	}, ipsettest.Options{BigBatch: 5000})
}

// TestBatchSyscallsKernel: 100,000 entries go to the kernel in a handful of
// system calls (the benchmark's target is at most 1/20 of `ipset
// restore`'s 2,006).
func TestBatchSyscallsKernel(t *testing.T) {
	c, _ := dial(t, ipset.Config{})
	if err := c.Create(ipset.Set{Name: "s", Type: ipset.HashIPPort, Family: ipset.INET, MaxElem: 200_000}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Header("s"); err != nil {
		t.Fatal(err)
	}
	before := c.Stats()
	if err := c.Add("s", ipsettest.BigEntries(ipset.INET, 100_000)); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	calls := st.Sendmsg - before.Sendmsg + st.Recvmsg - before.Recvmsg
	msgs := st.MessagesSent - before.MessagesSent
	t.Logf("100,000 entries: %d sendmsg, %d recvmsg, %d messages, %d bytes", st.Sendmsg-before.Sendmsg, st.Recvmsg-before.Recvmsg, msgs, st.BytesSent-before.BytesSent)
	if calls > 10 || msgs > 100 {
		t.Errorf("100,000 entries took %d syscalls and %d messages, want at most 10 and 100", calls, msgs)
	}
}

// TestAbandonedCallsKernel: calls that gave up waiting (a reply timeout
// shorter than the kernel's answer: here 1ns, so the wait fails before the
// first read and every reply stays queued) leave late replies on the
// socket, among them a dump the kernel is still producing (a set larger
// than one datagram). The next calls on the same Conn skip the stale
// replies by sequence number and return exactly the kernel's state: a dump
// never comes back empty, short or failed because of them.
func TestAbandonedCallsKernel(t *testing.T) {
	c, _ := dial(t, ipset.Config{})
	const n = 5000 // about 100 KiB listed: several dump datagrams
	if err := c.Create(ipset.Set{Name: "big", Type: ipset.HashIPPort, Family: ipset.INET, MaxElem: 2 * n}); err != nil {
		t.Fatal(err)
	}
	if err := c.Add("big", ipsettest.BigEntries(ipset.INET, n)); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ipset.Set{Name: "small", Type: ipset.HashIP, Family: ipset.INET}); err != nil {
		t.Fatal(err)
	}
	// (A second call with a 1ns timeout would not read the rest of the
	// first abandoned dump either: its own wait fails at once.)
	abandon := func(what string, f func() error) {
		t.Helper()
		c.SetReplyTimeout(time.Nanosecond)
		err := f()
		c.SetReplyTimeout(0)
		if !errors.Is(err, netlinkraw.ErrReplyTimeout) {
			t.Fatalf("%s with a 1ns reply timeout: %v, want ErrReplyTimeout", what, err)
		}
	}
	for _, tc := range []struct {
		name    string
		abandon func() error
	}{
		{"after a command", func() error { return c.Flush("small") }},
		{"after an empty dump", func() error { _, _, err := c.List("small"); return err }},
		{"after a large dump", func() error { _, _, err := c.List("big"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			abandon(tc.name, tc.abandon)
			_, entries, err := c.List("big")
			if err != nil {
				t.Fatalf("List after the abandoned call: %v", err)
			}
			if len(entries) != n {
				t.Errorf("List after the abandoned call: %d entries, want %d", len(entries), n)
			}
			names, err := c.ListNames()
			if err != nil || !slices.Equal(names, []string{"big", "small"}) {
				t.Errorf("ListNames after the abandoned call: %v, %v; want [big small]", names, err)
			}
		})
	}
}
