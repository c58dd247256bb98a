package refdocs

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the generated pages ("+Command+")")

// root is the repository's root, from this package's directory.
var root = filepath.Join("..", "..")

// TestPages: every generated page in the tree is what the code generates;
// -update writes them.
func TestPages(t *testing.T) {
	pages, err := Pages(Sinks())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		path := filepath.Join(root, p.Path)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(p.Content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v; run %s", p.Path, err, Command)
			continue
		}
		if diff := cmp.Diff(p.Content, string(b)); diff != "" {
			t.Errorf("%s differs from what the code generates (-code +file); run %s:\n%s", p.Path, Command, diff)
		}
	}
}
