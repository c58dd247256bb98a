package ipvs_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

var modprobeOnce sync.Once

// dialKernel returns a connection to IPVS in a fresh network namespace,
// loading ip_vs first if needed. Without IPVS in the kernel it calls
// nstest.Missing: a skip on a developer machine, a failure in the VM.
func dialKernel(t *testing.T) *ipvs.Conn {
	t.Helper()
	c, _ := dialKernelNS(t)
	return c
}

// dialKernelNS is dialKernel that also returns the namespace.
func dialKernelNS(t *testing.T) (*ipvs.Conn, *nstest.NetNS) {
	t.Helper()
	ns := nstest.New(t)
	c, err := ipvs.Dial(&ipvs.Options{NetNS: ns.FD()})
	if errors.Is(err, ipvs.ErrNotSupported) {
		// The kernel autoloads ip_vs only for the initial namespace.
		modprobeOnce.Do(func() { _ = exec.Command("modprobe", "ip_vs").Run() })
		c, err = ipvs.Dial(&ipvs.Options{NetNS: ns.FD()})
	}
	if errors.Is(err, ipvs.ErrNotSupported) {
		nstest.Missing(t, "IPVS in the kernel: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ns
}

// kernelSchedulers lists the IPVS schedulers the running kernel has, as
// modules or built in.
func kernelSchedulers(t *testing.T) []string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("/lib/modules", unix.ByteSliceToString(u.Release[:]))
	names := map[string]bool{"rr": true} // every kernel with IPVS has rr
	add := func(p string) {
		base := filepath.Base(p)
		if !strings.HasPrefix(base, "ip_vs_") {
			return
		}
		n := strings.TrimPrefix(base, "ip_vs_")
		n = n[:strings.Index(n+".ko", ".ko")]
		switch n {
		case "ftp", "pe_sip", "":
			return
		}
		names[n] = true
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "/ipvs/") {
			add(p)
		}
		return nil
	})
	if b, err := os.ReadFile(filepath.Join(dir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			if strings.Contains(l, "/ipvs/") {
				add(l)
			}
		}
	}
	var out []string
	for n := range names {
		out = append(out, n)
	}
	slices.Sort(out)
	t.Logf("schedulers of this kernel: %v", out)
	return out
}

func TestContractKernel(t *testing.T) {
	dialKernel(t) // skip early, once, without IPVS
	scheds := kernelSchedulers(t)
	loadSchedulers(t, scheds)
	contract(t, target{dial: dialKernel, schedulers: scheds})
}

// loadSchedulers loads the scheduler modules up front, as a sink must at
// startup. Left to the kernel, the first service with a new scheduler loads
// its module (request_module) while holding IPVS's mutex; a module that
// registers per-namespace state (lblc, lblcr) then waits for the namespace
// lock, which the cleanup of a dying namespace holds while it waits for
// IPVS's mutex: a deadlock this suite ran into when namespaces of earlier
// subtests were still being destroyed.
func loadSchedulers(t *testing.T, names []string) {
	if _, err := exec.LookPath("modprobe"); err != nil {
		t.Logf("no modprobe: scheduler modules load on demand")
		return
	}
	for _, n := range append(names, "pe_sip") {
		if out, err := exec.Command("modprobe", "ip_vs_"+n).CombinedOutput(); err != nil {
			t.Logf("modprobe ip_vs_%s: %v: %s", n, err, out)
		}
	}
}
