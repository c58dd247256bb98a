package runtime_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/proxysinks/proxysinks/sinks/kpconfig"
	"github.com/proxysinks/proxysinks/sinks/runtime"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the generated part of docs/kube-proxy-migration.md")

// migrationDoc is the operator page whose tables are generated from the
// sinks' tables.
var migrationDoc = filepath.Join("..", "..", "docs", "kube-proxy-migration.md")

// generatedMark starts the generated part of migrationDoc; everything
// after it is generatedTables' output.
const generatedMark = "<!-- Generated from the sinks' tables by `go test ./sinks/runtime -run TestMigrationDoc -update-docs`; do not edit below. -->\n"

// TestMigrationDoc: the tables of docs/kube-proxy-migration.md are the
// sinks' tables (kube-proxy's flags, the configuration fields, the feature
// gates); -update-docs rewrites them.
func TestMigrationDoc(t *testing.T) {
	b, err := os.ReadFile(migrationDoc)
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := strings.Cut(string(b), generatedMark)
	if !ok {
		t.Fatalf("%s lacks the line %q", migrationDoc, generatedMark)
	}
	want := head + generatedMark + generatedTables(t)
	if *updateDocs {
		if err := os.WriteFile(migrationDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("%s differs from the tables (-tables +doc); run go test ./sinks/runtime -run TestMigrationDoc -update-docs:\n%s", migrationDoc, diff)
	}
}

// modeColumns returns one sink per mode (sinks of one mode must have one
// table) and the columns' headings.
func modeColumns(t *testing.T) ([]runtime.Sink, []string) {
	t.Helper()
	var sinks []runtime.Sink
	var heads []string
	for _, s := range registered {
		i := slices.IndexFunc(sinks, func(o runtime.Sink) bool { return o.Mode == s.Mode })
		if i < 0 {
			sinks = append(sinks, s)
			heads = append(heads, fmt.Sprintf("%s mode (%s", s.Mode, s.Name))
			continue
		}
		if a, b := describeTable(sinks[i].Table()), describeTable(s.Table()); a != b {
			t.Fatalf("%s and %s are both %s sinks with different tables", sinks[i].Name, s.Name, s.Mode)
		}
		heads[i] += ", " + s.Name
	}
	for i := range heads {
		heads[i] += ")"
	}
	return sinks, heads
}

// describeTable is a table's classes in text, to compare two tables.
func describeTable(t runtime.Table) string {
	var b strings.Builder
	for _, f := range t.Flags {
		fmt.Fprintf(&b, "%v %s %s %s %t\n", f.Flag.Names(), f.Class, f.Why, f.File, f.OverFile)
	}
	for _, f := range t.Fields {
		fmt.Fprintf(&b, "%s %v %s %s %s %s\n", f.Name, f.Covers(), f.Class, f.Flag, f.Why, f.Accepts)
	}
	return b.String()
}

func row(cells ...string) string {
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(c, "|", `\|`)
	}
	return "| " + strings.Join(cells, " | ") + " |\n"
}

// generatedTables renders the sinks' tables as Markdown.
func generatedTables(t *testing.T) string {
	sinks, heads := modeColumns(t)
	tables := make([]runtime.Table, len(sinks))
	for i, s := range sinks {
		tables[i] = s.Table()
	}
	var b strings.Builder
	b.WriteString("\n## kube-proxy's flags\n\nEvery flag of kube-proxy v1.37.2, as each sink takes it. \"With --config\" is kube-proxy's precedence, which the sinks follow: a flag that maps onto the file is dropped (logged once) when `--config` is given.\n\n")
	b.WriteString(row(append(append([]string{"flag"}, heads...), "with --config")...))
	b.WriteString(row(slices.Repeat([]string{"---"}, len(heads)+2)...))
	for _, k := range kubeProxyV1372Flags {
		cells := []string{"`--" + k.name + "`"}
		var files []string // the fields of the modes, the first mode's first
		seen := map[string]bool{}
		for mi, tb := range tables {
			i := slices.IndexFunc(tb.Flags, func(f runtime.Flag) bool { return slices.Contains(f.Flag.Names(), k.name) })
			if i < 0 {
				cells = append(cells, "not yet: waits for the "+pendingFlags[k.name]+" change (today an unknown flag, exit 2)")
				continue
			}
			f := tb.Flags[i]
			cells = append(cells, flagCell(f, k.name))
			switch {
			case f.File == "" || f.OverFile || seen[f.File]:
			case len(files) == 0:
				files = append(files, "`"+f.File+"`")
			default:
				files = append(files, sinks[mi].Mode+" mode: `"+f.File+"`")
			}
			seen[f.File] = true
		}
		switch {
		case k.withConfig:
			cells = append(cells, "applies")
		case len(files) > 1:
			cells = append(cells, "dropped: the file's "+files[0]+" ("+strings.Join(files[1:], "; ")+")")
		case len(files) == 1:
			cells = append(cells, "dropped: the file's "+files[0])
		default:
			cells = append(cells, "dropped")
		}
		b.WriteString(row(cells...))
	}
	b.WriteString("\n## KubeProxyConfiguration fields\n\nEvery field of kubeproxy.config.k8s.io/v1alpha1 (a group covers the fields under it). Honoured fields set the sink's flag named; ignored ones are logged once at start; refused ones stop the sink with exit status 2 and a message naming the field.\n\n")
	b.WriteString(row(append([]string{"field"}, heads...)...))
	b.WriteString(row(slices.Repeat([]string{"---"}, len(heads)+1)...))
	var names []string
	for _, tb := range tables {
		for _, f := range tb.Fields {
			if !slices.Contains(names, f.Name) {
				names = append(names, f.Name)
			}
		}
	}
	for _, name := range names {
		cells := []string{"`" + name + "`"}
		for _, tb := range tables {
			i := slices.IndexFunc(tb.Fields, func(f kpconfig.Field) bool { return f.Name == name })
			if i < 0 {
				cells = append(cells, "(classed under another entry)")
				continue
			}
			cells = append(cells, fieldCell(tb.Fields[i]))
		}
		b.WriteString(row(cells...))
	}
	b.WriteString("\n## Feature gates\n\n`featureGates` in the file and `--feature-gates` are checked against kube-proxy v1.37.2's gates that change what it programs on Linux, or that it locks. Any other gate is accepted and logged once.\n\n")
	b.WriteString(row(append([]string{"gate", "in kube-proxy"}, heads...)...))
	b.WriteString(row(slices.Repeat([]string{"---"}, len(heads)+2)...))
	for _, g := range kpconfig.Gates {
		cells := []string{"`" + g.Name + "`", g.Does}
		for _, s := range sinks {
			var parts []string
			for _, v := range []bool{true, false} {
				w, err := kpconfig.CheckGates(s.Mode, map[string]bool{g.Name: v})
				switch {
				case err != nil:
					parts = append(parts, fmt.Sprintf("%t: refused (%s)", v, g.Why))
				case len(w) > 0:
					parts = append(parts, fmt.Sprintf("%t: ignored", v))
				default:
					parts = append(parts, fmt.Sprintf("%t: honoured", v))
				}
			}
			cells = append(cells, strings.Join(parts, "; "))
		}
		b.WriteString(row(cells...))
	}
	return b.String()
}

func flagCell(f runtime.Flag, name string) string {
	alias := ""
	if f.Name() != name {
		alias = " (as `--" + f.Name() + "`)"
	}
	switch f.Class {
	case kpconfig.Honoured:
		return "honoured" + alias
	case kpconfig.Refused:
		why := f.Why
		if why == "" {
			why = "does not apply to this proxy mode"
		}
		return "refused" + alias + ": " + why
	}
	return fmt.Sprintf("%s%s: %s", f.Class, alias, f.Why)
}

func fieldCell(f kpconfig.Field) string {
	switch {
	case f.Class == kpconfig.Honoured && f.Flag != "" && f.Accepts != "":
		return "honoured: `--" + f.Flag + "`; takes " + f.Accepts + ", refuses others"
	case f.Class == kpconfig.Honoured && f.Flag != "":
		return "honoured: `--" + f.Flag + "`"
	case f.Class == kpconfig.Honoured && f.Accepts != "":
		return "honoured: takes " + f.Accepts + ", refuses others"
	case f.Class == kpconfig.Honoured:
		return "honoured"
	}
	return fmt.Sprintf("%s: %s", f.Class, f.Why)
}
