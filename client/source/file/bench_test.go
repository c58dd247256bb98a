package file

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/proxysinks/proxysinks/client/internal/cputime"
	"github.com/proxysinks/proxysinks/client/internal/gen"
)

// writeCluster writes the generated cluster as one multi-document file.
func writeCluster(b *testing.B, dir string, n int, asJSON bool) string {
	svcs, slices := gen.Cluster(n, 10)
	var buf bytes.Buffer
	for i := range svcs {
		for _, o := range []any{svcs[i], slices[i]} {
			var data []byte
			var err error
			if asJSON {
				data, err = json.Marshal(o)
			} else {
				data, err = yaml.Marshal(o)
			}
			if err != nil {
				b.Fatal(err)
			}
			buf.WriteString("---\n")
			buf.Write(data)
			buf.WriteByte('\n')
		}
	}
	name := "cluster.yaml"
	if asJSON {
		name = "cluster.json"
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkLoad is the file path at startup: read and decode a manifest of
// n services and n EndpointSlices (10 endpoints each), apply the node-local
// rules and take the first full snapshot. The YAML case is dominated by
// YAML decoding; JSON documents (also accepted) skip it.
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, format := range []string{"yaml", "json"} {
			b.Run(fmt.Sprintf("services=%d/%s", n, format), func(b *testing.B) {
				path := writeCluster(b, b.TempDir(), n, format == "json")
				fi, _ := os.Stat(path)
				var heap float64
				var cpu time.Duration
				for b.Loop() {
					b.StopTimer()
					before := cputime.HeapMB()
					c0 := cputime.Now()
					b.StartTimer()
					src := New(Config{Path: path, NodeName: "node-1"})
					s, err := src.Load()
					b.StopTimer()
					cpu += cputime.Now() - c0
					if err != nil || s.Len() != n {
						b.Fatalf("load: %d services, %v", s.Len(), err)
					}
					heap = cputime.HeapMB() - before
					runtime.KeepAlive(src)
					b.StartTimer()
				}
				b.ReportMetric(heap, "heap-MB")
				b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
				b.ReportMetric(float64(fi.Size())/(1<<20), "file-MB")
			})
		}
	}
}
