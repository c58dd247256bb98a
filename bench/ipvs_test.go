package bench

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"sync"
	"testing"

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
// They need IPVS: run them in the VM (see netlinkraw/README.md) or on a
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
