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
