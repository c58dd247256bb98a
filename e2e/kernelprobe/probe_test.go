package kernelprobe

import (
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// TestResolveIPVSFamily loads ip_vs and resolves the "IPVS" generic-netlink
// family from inside a fresh network namespace.
func TestResolveIPVSFamily(t *testing.T) {
	if out, err := exec.Command("modprobe", "ip_vs").CombinedOutput(); err != nil {
		nstest.Missing(t, "the ip_vs module (modprobe ip_vs: %v: %s)", err, out)
	}
	ns := nstest.New(t)
	c, err := genetlink.Dial(&netlink.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatalf("dial generic netlink: %v", err)
	}
	defer c.Close()
	f, err := c.GetFamily("IPVS")
	if errors.Is(err, os.ErrNotExist) {
		nstest.Missing(t, "the IPVS generic-netlink family")
	}
	if err != nil {
		t.Fatalf("resolve IPVS family: %v", err)
	}
	if f.ID == 0 || f.Version != 1 {
		t.Fatalf("IPVS family %+v: want a non-zero ID and version 1", f)
	}
	t.Logf("IPVS family: id %d, version %d", f.ID, f.Version)
}
