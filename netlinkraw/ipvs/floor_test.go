package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"

	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// BenchmarkFloor measures the floor Apply is held to: the same operations
// as the bench module's BenchmarkIPVSCreate (N services with 10
// destinations each), encoded before the timer starts, sent 500 per
// sendmsg with NLM_F_ACK on the last message of each, the replies read
// back. Only the system calls and the kernel's work are timed. It needs
// IPVS: it runs in the VM (TestIPVSBenchVM in e2e/vmtests, and the bench
// matrix beside each IPVS sink, which sets FloorSizesEnv).
func BenchmarkFloor(b *testing.B) {
	sizes, err := floorSizes(os.Getenv(FloorSizesEnv))
	if err != nil {
		b.Fatal(err)
	}
	for _, sz := range sizes {
		name := fmt.Sprintf("services=%d/pre-encoded", sz[0])
		if sz[1] != 10 {
			name = fmt.Sprintf("services=%d/endpoints=%d/pre-encoded", sz[0], sz[1])
		}
		b.Run(name, func(b *testing.B) { benchFloor(b, sz[0], sz[1]) })
	}
}

// FloorSizesEnv overrides BenchmarkFloor's sizes: services x destinations
// per service, e.g. "10000x10,1000x100".
const FloorSizesEnv = "PROXYSINKS_FLOOR_SIZES"

// floorSizes parses FloorSizesEnv's value (empty: 1,000 and 10,000
// services of 10 destinations).
func floorSizes(v string) ([][2]int, error) {
	if v == "" {
		return [][2]int{{1000, 10}, {10000, 10}}, nil
	}
	var out [][2]int
	for _, f := range strings.Split(v, ",") {
		a, c, _ := strings.Cut(f, "x")
		n, err1 := strconv.Atoi(a)
		m, err2 := strconv.Atoi(c)
		if err1 != nil || err2 != nil || n < 1 || m < 1 || n > 1<<24 || m > 1<<20 {
			return nil, fmt.Errorf("%s: bad size %q (want NxM)", FloorSizesEnv, f)
		}
		out = append(out, [2]int{n, m})
	}
	return out, nil
}

// floorOps is n services of m destinations each (distinct addresses up to
// 2^21 services and 2^22 destinations).
func floorOps(n, m int) []Op {
	var ops []Op
	for i := range n {
		s := Service{Protocol: TCP, Address: netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)}), Port: 80, Scheduler: "rr"}
		ops = append(ops, Op{Kind: OpCreateService, Service: s})
		for j := range m {
			k := i*m + j
			d := Destination{Address: netip.AddrFrom4([4]byte{10, 128 + byte(k>>16), byte(k >> 8), byte(k)}), Port: 8080, Weight: 1}
			ops = append(ops, Op{Kind: OpCreateDestination, Service: s, Destination: d})
		}
	}
	return ops
}

func ipvsRefs() int {
	b, err := os.ReadFile("/sys/module/ip_vs/refcnt")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// floorNetNS creates a network namespace with lo up (IPVS refuses IPv4
// destinations in a namespace whose lo never was) and returns a file
// descriptor to it; closing it destroys the namespace.
func floorNetNS(b *testing.B) int {
	nstest.New(b) // only to check the privileges (and skip without)
	ns, err := nstest.Create()
	if err != nil {
		b.Fatal(err)
	}
	return ns.FD()
}

// floorBaseline is the ip_vs module's reference count with no services:
// one reference per service is added to it.
var floorBaseline struct {
	sync.Once
	refs int
}

func benchFloor(b *testing.B, n, m int) {
	b.StopTimer()
	ops := floorOps(n, m)
	const perSend = 500
	var sys uint64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		nsfd := floorNetNS(b)
		c, err := Dial(&Options{NetNS: nsfd})
		if errors.Is(err, ErrNotSupported) {
			_ = exec.Command("modprobe", "ip_vs").Run()
			c, err = Dial(&Options{NetNS: nsfd})
		}
		if errors.Is(err, ErrNotSupported) {
			nstest.Missing(b, "IPVS: %v", err)
		}
		if err != nil {
			b.Fatal(err)
		}
		floorBaseline.Do(func() {
			_ = exec.Command("modprobe", "ip_vs_rr").Run()
			if v, err := strconv.Atoi(os.Getenv("PROXYSINKS_IPVS_REFS")); err == nil {
				floorBaseline.refs = v
			} else {
				floorBaseline.refs = ipvsRefs()
			}
		})
		// Wait for earlier namespaces to be destroyed (their cleanup
		// holds IPVS's mutex).
		// Like the bench module's waitIPVSIdle: until earlier namespaces
		// are destroyed (their cleanup holds IPVS's mutex), at most 5
		// minutes.
		for start := time.Now(); ipvsRefs() > floorBaseline.refs; {
			if time.Since(start) > 5*time.Minute {
				b.Logf("ip_vs still holds %d references (baseline %d) after 5 minutes; going on", ipvsRefs(), floorBaseline.refs)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		var chunks [][]byte
		var lasts, bases []uint32
		for start := 0; start < len(ops); start += perSend {
			end := min(start+perSend, len(ops))
			var e nlcore.Encoder
			base := c.nl.NextSeq(perSend)
			lastOff := 0
			for k := range ops[start:end] {
				lastOff = len(e.B)
				if err := encodeOp(&e, c.family, &ops[start+k], base+uint32(k)); err != nil {
					b.Fatal(err)
				}
			}
			e.SetFlags(lastOff, nlcore.FlagRequest|nlcore.FlagAck)
			chunks = append(chunks, e.B)
			lasts = append(lasts, base+uint32(end-start-1))
			bases = append(bases, base)
		}
		before := c.nl.Ctr
		b.StartTimer()
		for k, chunk := range chunks {
			if err := c.nl.Send(chunk, int(lasts[k]-bases[k]+1)); err != nil {
				b.Fatal(err)
			}
			err := c.nl.Collect(bases[k], lasts[k], func(m *nlcore.Message) (bool, error) {
				if m.Type != nlcore.TypeError {
					return false, nil
				}
				if m.Errno != 0 {
					return true, fmt.Errorf("message %d failed: %w", m.Seq, m.Err())
				}
				return m.Seq == lasts[k], nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		sys += c.nl.Ctr.Sendmsg + c.nl.Ctr.Recvmsg - before.Sendmsg - before.Recvmsg
		c.Close()
		unix.Close(nsfd) // destroys the namespace (nstest's would live until the end)
	}
	b.ReportMetric(float64(sys)/float64(b.N), "syscalls/op")
	b.ReportMetric(float64(len(ops)), "kernel-ops/op")
}
