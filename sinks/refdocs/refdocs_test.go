package refdocs

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/proxysinks/proxysinks/sinks/httpserve"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/runtime"
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

// TestSinksComplete: Sinks has one sink per binary under sinks/ (a main
// package whose directory is the sink's name).
func TestSinksComplete(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	var mains, names []string
	for _, d := range dirs {
		mains = append(mains, filepath.Base(filepath.Dir(d)))
	}
	for _, s := range Sinks() {
		names = append(names, s.Name)
	}
	slices.Sort(mains)
	slices.Sort(names)
	if diff := cmp.Diff(mains, names); diff != "" {
		t.Errorf("sinks (-binaries +Sinks):\n%s", diff)
	}
}

// TestMetricsForms: a name two sinks serve in different forms has a row
// per form, each naming its sinks; one all serve alike says "all".
func TestMetricsForms(t *testing.T) {
	mk := func(name string, labels ...string) runtime.Sink {
		return runtime.Sink{Name: name, Mode: "iptables", Metrics: func(reg prometheus.Registerer, _ func(httpserve.TextSource)) error {
			return reg.Register(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "shared_thing", Help: "Thing."}, labels))
		}}
	}
	sinks := []runtime.Sink{mk("a", "x"), mk("b"), mk("c", "x")}
	page, err := MetricsPage(sinks)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `shared_thing` | gauge | `x` | a, c | Thing. |\n",
		"| `shared_thing` | gauge | — | b | Thing. |\n",
		"| `proxysinks_quarantined_objects` | gauge | `kind` | all |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
}

// TestJoinModes: per-mode values collapse to one when they agree.
func TestJoinModes(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, "—"},
		{[]string{"ipvs mode: `1`"}, "`1`"},
		{[]string{"ipvs mode: `1`", "nftables mode: `1`"}, "`1`"},
		{[]string{"ipvs mode: `1`", "nftables mode: `2`"}, "ipvs mode: `1`; nftables mode: `2`"},
	} {
		if got := joinModes(c.in); got != c.want {
			t.Errorf("joinModes(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestFieldCellOf: a field classed by its group says so; a group classed
// field by field points to the fields.
func TestFieldCellOf(t *testing.T) {
	fields := []kpconfig.Field{
		{Name: "ipvs", Class: kpconfig.Ignored, Why: "another mode's", Paths: []string{"ipvs.scheduler"}},
		{Name: "nftables.syncPeriod", Class: kpconfig.Honoured, Flag: "sync-period"},
	}
	for name, want := range map[string]string{
		"ipvs.scheduler":      "ignored: another mode's (all of `ipvs`)",
		"nftables.syncPeriod": "honoured: `--sync-period`",
		"nftables":            "field by field: the `nftables.*` rows",
	} {
		if got := fieldCellOf(fields, name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
