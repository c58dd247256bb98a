package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// netNS is a network namespace created for one benchmark iteration and
// destroyed at its end, so that iterations do not share IPVS state.
type netNS struct{ fd int }

func newNetNS(b *testing.B) *netNS {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread stays locked in the new namespace and is discarded.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- result{-1, err}
			return
		}
		// IPVS refuses IPv4 destinations in a namespace whose local
		// routing table does not exist yet: bring lo up, as on any node.
		if err := loopbackUp(); err != nil {
			ch <- result{-1, err}
			return
		}
		fd, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		ch <- result{fd, err}
	}()
	r := <-ch
	if r.err != nil {
		b.Fatalf("create network namespace: %v", r.err)
	}
	return &netNS{fd: r.fd}
}

// loopbackUp sets IFF_UP on lo in the calling thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

func (n *netNS) path() string { return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), n.fd) }

func (n *netNS) close() { unix.Close(n.fd) }

// ipvsRefs returns the ip_vs module's reference count: one per service in
// any namespace, plus a constant.
func ipvsRefs() (int, error) {
	b, err := os.ReadFile("/sys/module/ip_vs/refcnt")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// waitIPVSIdle waits until the kernel has destroyed the services of earlier
// iterations' namespaces: namespace cleanup runs asynchronously, late, and
// holds IPVS's mutex while it flushes, which would slow the next
// measurement. It waits for ip_vs's reference count to come back to
// baseline, at most 5 minutes.
func waitIPVSIdle(b *testing.B, baseline int) {
	start := time.Now()
	for {
		n, err := ipvsRefs()
		if err != nil || n <= baseline {
			if d := time.Since(start); d > time.Second {
				b.Logf("waited %v for earlier namespaces to be destroyed", d.Round(time.Millisecond))
			}
			return
		}
		if time.Since(start) > 5*time.Minute {
			b.Logf("ip_vs still holds %d references (baseline %d) after 5 minutes; going on", n, baseline)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ipvsBaseline is ip_vs's reference count with no services anywhere: from
// $PROXYSINKS_IPVS_REFS (set by BenchmarkIPVSInVM right after loading the
// modules), else the current count.
func ipvsBaseline() int {
	if v, err := strconv.Atoi(os.Getenv("PROXYSINKS_IPVS_REFS")); err == nil {
		return v
	}
	n, _ := ipvsRefs()
	return n
}
