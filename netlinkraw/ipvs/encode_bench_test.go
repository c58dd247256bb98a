package ipvs

import "testing"

// BenchmarkEncode measures the client's share of Apply: validating and
// encoding the operations (10,000 services with 10 destinations each),
// without the kernel.
func BenchmarkEncode(b *testing.B) {
	ops := floorOps(10000, 10)
	c := &Conn{family: 0x1d}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		c.enc.b = c.enc.b[:0]
		for k := range ops {
			if err := c.encodeOp(&ops[k], uint32(k)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ops)), "ns/kernel-op")
}
