package ipset_test

import (
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
