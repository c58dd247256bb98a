package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	mobyipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// The IPVS write benchmarks: create N services with 10 destinations each,
// through netlinkraw/ipvs batched (Apply), netlinkraw/ipvs one operation at
// a time, and github.com/moby/ipvs (kube-proxy's library) as the baseline,
// in the same run. Every iteration programs a fresh network namespace:
// IPVS keeps removed destinations in a trash list that slows later
// creations, so reusing a namespace would measure that instead.
//
// They need IPVS: run them in the VM (see e2e/README.md) or on a
// host with ip_vs. Elsewhere they skip.

const destsPerService = 10

// workload is the services and destinations one iteration creates.
type workload struct {
	svcs  []ipvs.Service
	dests [][]ipvs.Destination
	ops   []ipvs.Op
	moby  []*mobyipvs.Service
	mobyD [][]*mobyipvs.Destination
}

func newWorkload(n int) *workload {
	w := &workload{}
	for i := range n {
		s := ipvs.Service{Protocol: ipvs.TCP, Address: netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)}), Port: 80, Scheduler: "rr"}
		ms := &mobyipvs.Service{AddressFamily: unix.AF_INET, Protocol: unix.IPPROTO_TCP, Address: net.IP(s.Address.AsSlice()),
			Port: 80, SchedName: "rr", Netmask: 0xffffffff}
		w.svcs = append(w.svcs, s)
		w.moby = append(w.moby, ms)
		w.ops = append(w.ops, ipvs.Op{Kind: ipvs.OpCreateService, Service: s})
		var ds []ipvs.Destination
		var mds []*mobyipvs.Destination
		for j := range destsPerService {
			k := i*destsPerService + j
			d := ipvs.Destination{Address: netip.AddrFrom4([4]byte{10, 128 + byte(k>>16), byte(k >> 8), byte(k)}), Port: 8080, Weight: 1}
			ds = append(ds, d)
			mds = append(mds, &mobyipvs.Destination{AddressFamily: unix.AF_INET, Address: net.IP(d.Address.AsSlice()), Port: 8080, Weight: 1})
			w.ops = append(w.ops, ipvs.Op{Kind: ipvs.OpCreateDestination, Service: s, Destination: d})
		}
		w.dests = append(w.dests, ds)
		w.mobyD = append(w.mobyD, mds)
	}
	return w
}

var probe struct {
	once     sync.Once
	err      error
	baseline int
}

// requireIPVS skips the benchmark without IPVS (failing inside the VM).
func requireIPVS(b *testing.B) {
	probe.once.Do(func() {
		ns := nstest.New(b)
		var c *ipvs.Conn
		c, probe.err = ipvs.Dial(&ipvs.Options{NetNS: ns.FD()})
		if errors.Is(probe.err, ipvs.ErrNotSupported) {
			_ = exec.Command("modprobe", "ip_vs").Run()
			c, probe.err = ipvs.Dial(&ipvs.Options{NetNS: ns.FD()})
		}
		if probe.err == nil {
			c.Close()
			// Load the scheduler now, not during the first measurement.
			_ = exec.Command("modprobe", "ip_vs_rr").Run()
			probe.baseline = ipvsBaseline()
		}
	})
	if probe.err != nil {
		nstest.Missing(b, "IPVS: %v", probe.err)
	}
}

func BenchmarkIPVSCreate(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		w := newWorkload(n)
		b.Run(fmt.Sprintf("services=%d/ours-batched", n), func(b *testing.B) { benchOurs(b, w, true, nil) })
		// The same with a smaller receive buffer, which caps batches at
		// 512 messages (the floor sends 500): shows what batch size costs.
		b.Run(fmt.Sprintf("services=%d/ours-batched-512", n), func(b *testing.B) {
			benchOurs(b, w, true, &ipvs.Options{ReceiveBuffer: 512 << 10})
		})
		b.Run(fmt.Sprintf("services=%d/ours-one-by-one", n), func(b *testing.B) { benchOurs(b, w, false, nil) })
		b.Run(fmt.Sprintf("services=%d/moby-ipvs", n), func(b *testing.B) { benchMoby(b, w) })
	}
}

func benchOurs(b *testing.B, w *workload, batched bool, opts *ipvs.Options) {
	requireIPVS(b)
	b.ReportAllocs()
	var sys, sends uint64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		waitIPVSIdle(b, probe.baseline)
		ns := newNetNS(b)
		o := ipvs.Options{}
		if opts != nil {
			o = *opts
		}
		o.NetNS = ns.fd
		c, err := ipvs.Dial(&o)
		if err != nil {
			b.Fatal(err)
		}
		before := c.Counters()
		tr := startSyscallTrace(b)
		b.StartTimer()
		if batched {
			err = c.Apply(w.ops)
		} else {
			for k, s := range w.svcs {
				if err = c.CreateService(s); err != nil {
					break
				}
				for _, d := range w.dests[k] {
					if err = c.CreateDestination(s, d); err != nil {
						break
					}
				}
			}
		}
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		traced := tr.stop()
		after := c.Counters()
		counted := after.Sendmsg + after.Recvmsg - before.Sendmsg - before.Recvmsg
		if traced > 0 {
			// The kernel's count confirms the client's own.
			b.Logf("%d send/receive system calls counted by the client, %d traced by the kernel", counted, traced)
		}
		sys += counted
		sends += after.Sendmsg - before.Sendmsg
		c.Close()
		ns.close()
	}
	b.ReportMetric(float64(sys)/float64(b.N), "syscalls/op")
	b.ReportMetric(float64(sends)/float64(b.N), "sendmsg/op")
	b.ReportMetric(float64(len(w.ops)), "kernel-ops/op")
}

func benchMoby(b *testing.B, w *workload) {
	requireIPVS(b)
	b.ReportAllocs()
	var sys uint64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		waitIPVSIdle(b, probe.baseline)
		ns := newNetNS(b)
		h, err := mobyipvs.New(ns.path())
		if err != nil {
			b.Fatal(err)
		}
		tr := startSyscallTrace(b)
		b.StartTimer()
		for k, s := range w.moby {
			if err = h.NewService(s); err != nil {
				break
			}
			for _, d := range w.mobyD[k] {
				if err = h.NewDestination(s, d); err != nil {
					break
				}
			}
		}
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		sys += tr.stop()
		h.Close()
		ns.close()
	}
	if sys > 0 {
		b.ReportMetric(float64(sys)/float64(b.N), "syscalls/op")
	}
	b.ReportMetric(float64(len(w.ops)), "kernel-ops/op")
}

// netNS is a network namespace created for one benchmark iteration and
// destroyed at its end, so that iterations do not share IPVS state. Its lo
// is up: IPVS refuses IPv4 destinations in a namespace whose lo never was.
type netNS struct {
	*nstest.NetNS
	fd int
}

func newNetNS(b *testing.B) *netNS {
	ns, err := nstest.Create()
	if err != nil {
		b.Fatal(err)
	}
	return &netNS{NetNS: ns, fd: ns.FD()}
}

func (n *netNS) path() string { return n.Path() }

func (n *netNS) close() { n.Close() }

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
// $PROXYSINKS_IPVS_REFS (set by e2e/vmtests TestIPVSBenchVM right after loading the
// modules), else the current count.
func ipvsBaseline() int {
	if v, err := strconv.Atoi(os.Getenv("PROXYSINKS_IPVS_REFS")); err == nil {
		return v
	}
	n, _ := ipvsRefs()
	return n
}

// syscallCounter counts this process's send and receive system calls
// (sendto, recvfrom, sendmsg, recvmsg) with perf counters on the kernel's
// syscall tracepoints, as `perf stat -e syscalls:sys_enter_sendto` does, to
// measure libraries that keep no counters (moby/ipvs). It runs inside the
// VM only; elsewhere, or when the kernel lacks the tracepoints, it counts
// nothing and stop returns 0.
type syscallCounter struct {
	fds []int
}

const tracefs = "/sys/kernel/tracing"

func startSyscallTrace(b *testing.B) *syscallCounter {
	if !nstest.InVM() {
		return &syscallCounter{}
	}
	if _, err := os.Stat(filepath.Join(tracefs, "events")); err != nil {
		if err := unix.Mount("nodev", tracefs, "tracefs", 0, ""); err != nil {
			b.Logf("no syscall counting: mount tracefs: %v", err)
			return &syscallCounter{}
		}
	}
	var ids []uint64
	for _, name := range []string{"sendto", "recvfrom", "sendmsg", "recvmsg"} {
		raw, err := os.ReadFile(filepath.Join(tracefs, "events", "syscalls", "sys_enter_"+name, "id"))
		if err != nil {
			b.Logf("no syscall counting: %v", err)
			return &syscallCounter{}
		}
		id, _ := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
		ids = append(ids, id)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		b.Logf("no syscall counting: %v", err)
		return &syscallCounter{}
	}
	c := &syscallCounter{}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		for _, id := range ids {
			attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: id, Bits: unix.PerfBitInherit}
			attr.Size = uint32(unsafe.Sizeof(attr))
			fd, err := unix.PerfEventOpen(&attr, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
			if err != nil {
				c.close()
				b.Logf("no syscall counting: perf_event_open: %v", err)
				return &syscallCounter{}
			}
			c.fds = append(c.fds, fd)
		}
	}
	return c
}

func (c *syscallCounter) close() {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	c.fds = nil
}

// stop returns the system calls counted since start (0 when not counting).
func (c *syscallCounter) stop() uint64 {
	var n uint64
	buf := make([]byte, 8)
	for _, fd := range c.fds {
		if k, err := unix.Read(fd, buf); err == nil && k == 8 {
			n += binary.NativeEndian.Uint64(buf)
		}
	}
	c.close()
	return n
}
