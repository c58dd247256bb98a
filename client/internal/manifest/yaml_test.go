package manifest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/proxysinks/proxysinks/client/internal/gen"
)

// checkSame converts doc with the fast path and with sigs.k8s.io/yaml: when
// the fast path accepts it, both must give the same bytes. It returns
// whether the fast path accepted it.
func checkSame(t *testing.T, doc []byte) bool {
	t.Helper()
	var c Converter
	got, ok := c.AppendJSON(nil, doc)
	if !ok {
		return false
	}
	want, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatalf("fast path accepted %q, sigs.k8s.io/yaml fails: %v\nfast path: %s", doc, err, got)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%q:\nfast path:        %s\nsigs.k8s.io/yaml: %s", doc, got, want)
	}
	if !json.Valid(got) {
		t.Fatalf("%q: invalid JSON %s", doc, got)
	}
	return true
}

// TestConvertTable: each document's result matches sigs.k8s.io/yaml, and
// the fast path takes (or leaves) the ones it should.
func TestConvertTable(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		fast bool
	}{
		{"", true},
		{"# only a comment\n\n", true},
		{"a: 1\n", true},
		{"b: 1\na: 2\n", true},
		{"a: 1\na: 2\n", false},
		{"a:\n  b: c\n  d:\n  - 1\n  - x\n", true},
		{"a:\n- 1\n- 2\nb: 3\n", true},
		{"- a\n- - b\n  - c\n- d: 1\n  e: 2\n-\n- \n", true},
		{"a: yes\nb: on\nc: off\nd: NO\ne: y\nf: ~\ng: null\nh: TRUE\ni: Yes\n", true},
		{"a: 0777\n", false},
		{"a: 1e3\n", false},
		{"a: 0x1F\n", false},
		{"a: 1_000\n", false},
		{"a: +1\n", false},
		{"a: -0\n", false},
		{"a: .5\n", false},
		{"a: .inf\n", false},
		{"a: -.inf\n", false},
		{"a: 2001-12-14\n", false},
		{"a: 12345678901234567890\n", false},
		{"a: 123456789012345678\nb: -42\nc: 0\n", true},
		{"a: 10.96.0.1\nb: 1.2.3\nc: 1h30m\nd: v1.2\n", true},
		{"a: 1.5\n", false},
		{"a: 'it''s'\nb: \"q\\\"\\\\\\n\\t/\"\nc: '<&>'\n", true},
		{"a: \"\\x41\"\n", false},
		{"a: \"\\/\"\n", false},
		{"a: b # comment\nc: d#e\n", true},
		{"a: b: c\n", false},
		{"a: b:\n", false},
		{"a: []\nb: {}\nc: [ ]\n", false},
		{"a: []\nb: {}\n", true},
		{"a: [1, 2]\n", true},
		{"a: [10.96.0.1, 'x', \"y\", yes, ~, a b ]  # c\nb: [x]\n", true},
		{"a: [1, 2,]\n", false},
		{"a: [a: 1]\n", false},
		{"a: [[1]]\n", false},
		{"a: [1, {b: 2}]\n", false},
		{"a: [1\n", false},
		{"a: [1] x\n", false},
		{"a: [1,2]\n", true},
		{"- [a, b]\n- []\n", true},
		{"a: [-1, -x, 0777]\n", false},
		{"a: {b: 1}\n", false},
		{"a: &x 1\nb: *x\n", false},
		{"a: !!str 1\n", false},
		{"a: |\n  x\n", false},
		{"a: b\n  c\n", false},
		{"<<: {a: 1}\n", false},
		{"yes: 1\n", false},
		{"80: http\n", true},
		{"'80': http\n\"x y\": z\n", true},
		{"a:\tb\n", false},
		{"a: é\n", false},
		{"--- a: 1\n", false},
		{"... a: 1\n", false},
		{"a : 1\n", false},
		{"  a: 1\n  b: 2\n", true},
		{" a: 1\nb: 2\n", false},
		{"a:\n  - 1\n   - 2\n", false},
		{"- a: 1\n   b: 2\n", false},
		{"foo\n", false},
		{"a: http://x:80/y\n", true},
		{"a: -foo\n", false},
		{"a: -x\n", false},
		{"a: -web\n", true},
		{"a: -\n", false},
		{"a: \"\"\nb: ''\n", true},
	} {
		if got := checkSame(t, []byte(tc.doc)); got != tc.fast {
			t.Errorf("%q: fast path took it: %v, want %v", tc.doc, got, tc.fast)
		}
	}
}

// TestConvertManifests: the repository's examples and the benchmarks'
// generated cluster (as sigs.k8s.io/yaml.Marshal writes it) match, and the
// generated one takes the fast path.
func TestConvertManifests(t *testing.T) {
	files, _ := filepath.Glob("../../../examples/cluster/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := Split(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range chunks {
			checkSame(t, ch)
		}
	}
	svcs, slices := gen.Cluster(50, 10)
	for i := range svcs {
		for _, o := range []any{svcs[i], slices[i]} {
			doc, err := yaml.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			if !checkSame(t, doc) {
				t.Fatalf("generated document not on the fast path:\n%s", doc)
			}
		}
	}
}

// FuzzYAMLToJSON is the differential test of the fast path: whatever it
// accepts must convert to exactly what sigs.k8s.io/yaml.YAMLToJSON gives.
// Documents come from Split, as in the file source. Seeds are in
// testdata/fuzz/FuzzYAMLToJSON.
func FuzzYAMLToJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		chunks, err := Split(data)
		if err != nil {
			return
		}
		for _, ch := range chunks {
			checkSame(t, ch)
		}
	})
}

func TestTopKind(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		kind string
		ok   bool
	}{
		{"kind: Service\nmetadata:\n  name: x\n", "Service", true},
		{"metadata:\n  name: x\n  kind: Node\nkind: 'EndpointSlice'\n", "EndpointSlice", true},
		{"kind: Service\nKind: Node\n", "", false},
		{"Kind: Service\n", "", false},
		{"kind: Service\nitems: []\n", "", false},
		{"kind: Service\nITEMS: 1\n", "", false},
		{"kind: 1\n", "", false},
		{"kind: \"a\\nb\"\n", "", false},
		{"kind: null\n", "", false},
		{"- kind: Service\n", "", false},
		{"kind: &a Service\n", "", false},
		{"b: 1\na: 2\nkind: Service\n", "Service", true},
	} {
		var c Converter
		_, _ = c.YAMLToJSON([]byte(tc.doc))
		kind, ok := c.TopKind()
		if string(kind) != tc.kind || ok != tc.ok {
			t.Errorf("%q: TopKind = %q, %v; want %q, %v", tc.doc, kind, ok, tc.kind, tc.ok)
		}
	}
}
