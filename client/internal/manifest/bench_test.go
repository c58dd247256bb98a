package manifest

import (
	"bytes"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/proxysinks/proxysinks/client/internal/gen"
)

// BenchmarkConvert converts the documents of a generated cluster of 1,000
// services (2,000 documents, as sigs.k8s.io/yaml.Marshal writes them) with
// the fast path and with sigs.k8s.io/yaml.
func BenchmarkConvert(b *testing.B) {
	svcs, slices := gen.Cluster(1000, 10)
	var docs [][]byte
	size := 0
	for i := range svcs {
		for _, o := range []any{svcs[i], slices[i]} {
			d, err := yaml.Marshal(o)
			if err != nil {
				b.Fatal(err)
			}
			docs = append(docs, d)
			size += len(d)
		}
	}
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(size))
		var c Converter
		for b.Loop() {
			for _, d := range docs {
				if _, ok := c.AppendJSON(c.out[:0], d); !ok {
					b.Fatal("not on the fast path")
				}
			}
		}
	})
	b.Run("sigs.k8s.io-yaml", func(b *testing.B) {
		b.SetBytes(int64(size))
		for b.Loop() {
			for _, d := range docs {
				if _, err := yaml.YAMLToJSON(d); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("split", func(b *testing.B) {
		file := bytes.Join(docs, []byte("---\n"))
		b.SetBytes(int64(len(file)))
		for b.Loop() {
			if _, err := Split(file); err != nil {
				b.Fatal(err)
			}
		}
	})
}
