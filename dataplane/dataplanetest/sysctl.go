package dataplanetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/proxysinks/proxysinks/host/kernel"
)

// HostSysctl returns a kernel.Sysctl over a /proc/sys of the test's own
// that dataplane.HostFamilies reads as a host with IPv6 on (IPv4 and IPv6)
// or off (IPv4 only), whatever the machine running the test has.
func HostSysctl(t testing.TB, ipv6 bool) kernel.Sysctl {
	t.Helper()
	s := kernel.Sysctl{Root: t.TempDir()}
	p := filepath.Join(s.Root, "net/ipv6/conf/all/disable_ipv6")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	v := "1\n"
	if ipv6 {
		v = "0\n"
	}
	if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}
