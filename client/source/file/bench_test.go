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
func writeCluster(b testing.TB, dir string, n int, asJSON bool) string {
	name := "cluster.yaml"
	if asJSON {
		name = "cluster.json"
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, clusterFile(b, n, asJSON, -1), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// clusterFile returns the generated cluster as one multi-document file;
// the slice of service edit (if any) has its first endpoint not ready.
func clusterFile(b testing.TB, n int, asJSON bool, edit int) []byte {
	svcs, slices := gen.Cluster(n, 10)
	if edit >= 0 {
		_, slices[edit] = gen.ClusterService(edit, 10, 1)
	}
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
	return buf.Bytes()
}

// BenchmarkLoad is the file path at startup: read and decode a manifest of
// n services and n EndpointSlices (10 endpoints each), apply the node-local
// rules and take the first full snapshot. decoder=fast is the source as it
// is; decoder=old is the baseline, the decoder it replaced (apimachinery's
// YAMLReader, sigs.k8s.io/yaml, encoding/json, SHA-256), in the same run.
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, format := range []string{"yaml", "json"} {
			for _, decoder := range []string{"fast", "old"} {
				b.Run(fmt.Sprintf("services=%d/%s/decoder=%s", n, format, decoder), func(b *testing.B) {
					if decoder == "old" {
						parseFn = legacyParse
						defer func() { parseFn = parseConverted }()
					}
					benchLoad(b, n, format == "json")
				})
			}
		}
	}
}

func benchLoad(b *testing.B, n int, asJSON bool) {
	path := writeCluster(b, b.TempDir(), n, asJSON)
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
}

// BenchmarkParse is the decoding part of BenchmarkLoad alone: split,
// convert and decode a manifest of n services and n EndpointSlices into
// API objects, without the node-local rules.
func BenchmarkParse(b *testing.B) {
	for _, n := range []int{10000} {
		for _, format := range []string{"yaml", "json"} {
			for _, decoder := range []string{"fast", "old"} {
				b.Run(fmt.Sprintf("services=%d/%s/decoder=%s", n, format, decoder), func(b *testing.B) {
					parse := func(name string, data []byte, prev chunkCache) (parsed, error) {
						return parseFile(name, data, prev)
					}
					if decoder == "old" {
						parse = func(name string, data []byte, prev chunkCache) (parsed, error) {
							return legacyParse(name, data, prev, options{})
						}
					}
					data, err := os.ReadFile(writeCluster(b, b.TempDir(), n, format == "json"))
					if err != nil {
						b.Fatal(err)
					}
					c0 := cputime.Now()
					for b.Loop() {
						p, err := parse("m", data, nil)
						if err != nil || len(p.docs) != 2*n || len(p.bad) > 0 {
							b.Fatalf("%d docs, %v %v", len(p.docs), err, p.bad)
						}
					}
					b.ReportMetric(float64((cputime.Now()-c0).Milliseconds())/float64(b.N), "cpu-ms/op")
				})
			}
		}
	}
}

// BenchmarkEdit is a re-read after an edit of one EndpointSlice in the
// manifest of BenchmarkLoad (10,000 services, YAML): the file changed, so
// it is split again, and only the changed document is decoded (decoder=old
// decodes them all again).
func BenchmarkEdit(b *testing.B) {
	const n = 10000
	for _, decoder := range []string{"fast", "old"} {
		b.Run(fmt.Sprintf("services=%d/yaml/decoder=%s", n, decoder), func(b *testing.B) {
			if decoder == "old" {
				parseFn = legacyParse
				defer func() { parseFn = parseConverted }()
			}
			versions := [][]byte{clusterFile(b, n, false, -1), clusterFile(b, n, false, 7)}
			path := filepath.Join(b.TempDir(), "cluster.yaml")
			if err := os.WriteFile(path, versions[0], 0o644); err != nil {
				b.Fatal(err)
			}
			src := New(Config{Path: path, NodeName: "node-1"})
			if _, err := src.Load(); err != nil {
				b.Fatal(err)
			}
			var cpu time.Duration
			i := 0
			for b.Loop() {
				b.StopTimer()
				i++
				if err := os.WriteFile(path, versions[i%2], 0o644); err != nil {
					b.Fatal(err)
				}
				c0 := cputime.Now()
				b.StartTimer()
				s, err := src.Load()
				b.StopTimer()
				cpu += cputime.Now() - c0
				if err != nil || len(s.Changes) != 1 {
					b.Fatalf("edit: changes %v, %v", s.Changes, err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}
