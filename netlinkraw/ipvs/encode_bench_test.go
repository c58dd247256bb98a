package ipvs

import (
	"testing"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// BenchmarkEncode measures the client's share of Apply: validating and
// encoding the operations (10,000 services with 10 destinations each),
// without the kernel.
func BenchmarkEncode(b *testing.B) {
	ops := floorOps(10000, 10)
	var e nlcore.Encoder
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		e.Reset()
		for k := range ops {
			if err := encodeOp(&e, 0x1d, &ops[k], uint32(k)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ops)), "ns/kernel-op")
}
