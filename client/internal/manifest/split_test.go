package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// readerSplit is the reference: apimachinery's YAMLReader.
func readerSplit(data []byte) ([]string, error) {
	var out []string
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		chunk, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, string(chunk))
	}
}

func checkSplit(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := readerSplit(data)
	chunks, err := Split(data)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: err %v, want %v", data, err, wantErr)
	}
	if err != nil {
		var se *SeparatorError
		if !errors.As(err, &se) || se.Index != len(want) || err.Error() != wantErr.Error() {
			t.Fatalf("%q: err %v (%+v), want %v after %d documents", data, err, se, wantErr, len(want))
		}
		return
	}
	var got []string
	for _, c := range chunks {
		got = append(got, string(c))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%q (-YAMLReader +Split):\n%s", data, diff)
	}
}

func TestSplit(t *testing.T) {
	for _, data := range []string{
		"", "\n", "a: 1", "a: 1\n---\nb: 2\n", "---\na\n---\n---\n", "a\r\nb\r\n---\r\nc",
		"--- # c\na\n", "---x\n", "a\n----\n", "a\n--- \t\nb", " ---\n", "a\r", "a\r\r\n",
		"a\n---", "x\n" + string(bytes.Repeat([]byte("y"), 10000)) + "\r\n---\nz",
	} {
		checkSplit(t, []byte(data))
	}
}

// FuzzSplit is the differential test of Split against apimachinery's
// YAMLReader. Seeds are in testdata/fuzz/FuzzSplit.
func FuzzSplit(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) { checkSplit(t, data) })
}
