package scripts

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// makefile is the repository's Makefile: its variables and its rules,
// each recipe line expanded as make would hand it to the shell.
type makefile struct {
	vars  map[string]string
	rules map[string]*rule
	order []string // targets as the Makefile defines them
}

// rule is one target: its prerequisites and its recipe's lines.
type rule struct {
	prereqs []string
	recipe  []recipeLine
}

// recipeLine is one recipe line (continuations joined), expanded.
type recipeLine struct {
	text string
	line int
}

var (
	assignRe = regexp.MustCompile(`^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(?::=|\?=|=)\s*(.*)$`)
	ruleRe   = regexp.MustCompile(`^([A-Za-z0-9_.-]+)\s*:([^=].*)?$`)
)

func parseMakefile(t *testing.T, rel string) *makefile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return parseMake(string(b))
}

// parseMake parses the Makefile forms this repository uses: variables
// (=, :=, ?=, export), rules with prerequisites, tab-indented recipes with
// backslash continuations, comments.
func parseMake(src string) *makefile {
	m := &makefile{vars: map[string]string{"MAKE": "make"}, rules: map[string]*rule{}}
	lines := strings.Split(src, "\n")
	var cur *rule
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "\t") && cur != nil {
			start := i + 1
			text := strings.TrimPrefix(l, "\t")
			for strings.HasSuffix(text, "\\") && i+1 < len(lines) {
				i++
				text = strings.TrimSuffix(text, "\\") + " " + strings.TrimLeft(lines[i], "\t ")
			}
			cur.recipe = append(cur.recipe, recipeLine{text: strings.TrimLeft(text, "@-+"), line: start})
			continue
		}
		if strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "" {
			continue
		}
		if a := assignRe.FindStringSubmatch(l); a != nil {
			if _, ok := m.vars[a[1]]; !ok || !strings.Contains(l, "?=") {
				m.vars[a[1]] = a[2]
			}
			cur = nil
			continue
		}
		if r := ruleRe.FindStringSubmatch(l); r != nil && !strings.HasPrefix(r[1], ".") {
			cur = &rule{prereqs: strings.Fields(r[2])}
			m.rules[r[1]] = cur
			m.order = append(m.order, r[1])
			continue
		}
		cur = nil
	}
	for _, r := range m.rules {
		for i := range r.recipe {
			r.recipe[i].text = m.expand(r.recipe[i].text, 0)
		}
	}
	return m
}

// expand expands make's references in s: $$ to $, $(VAR) to the variable's
// value (empty when undefined), $(shell cmd) to the shell's $(cmd), so the
// shell parse sees its commands, and other functions ($(if ...)) to nothing.
func (m *makefile) expand(s string, depth int) string {
	if depth > 10 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end, n := i+2, 1
			for ; end < len(s) && n > 0; end++ {
				switch s[end] {
				case '(':
					n++
				case ')':
					n--
				}
			}
			inner := s[i+2 : end-1]
			switch name, rest, _ := strings.Cut(inner, " "); {
			case name == "shell":
				b.WriteString("$(" + m.expand(rest, depth+1) + ")")
			case strings.ContainsAny(inner, " ,"):
				// another function: nothing the shell runs
			default:
				b.WriteString(m.expand(m.vars[inner], depth+1))
			}
			i = end - 1
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// TestParseMake: the Makefile forms the repository uses parse into the
// recipes make would run.
func TestParseMake(t *testing.T) {
	src := "# comment\nGO ?= go\nexport CGO_ENABLED := 0\nV ?= $(shell git describe 2>/dev/null || echo dev)\n" +
		"FLAGS := -X v=$(V)\nGO ?= other\n.PHONY: a b\n\n## a: first\na: b c\n\t@$(GO) build -ldflags \"$(FLAGS)\" $(if $(SHORT),-short) ./...\n" +
		"\t$(MAKE) c\n\n## b\nb:\n\t@x=$$(ls); \\\n\t  echo $$x\nc:\n\t-DEPS=0 ./scripts/deps.sh\n"
	m := parseMake(src)
	got := map[string]rule{}
	for k, r := range m.rules {
		got[k] = *r
	}
	want := map[string]rule{
		"a": {prereqs: []string{"b", "c"}, recipe: []recipeLine{
			{text: `go build -ldflags "-X v=$(git describe 2>/dev/null || echo dev)"  ./...`, line: 11},
			{text: "make c", line: 12},
		}},
		"b": {recipe: []recipeLine{{text: "x=$(ls);  echo $x", line: 16}}},
		"c": {recipe: []recipeLine{{text: "DEPS=0 ./scripts/deps.sh", line: 19}}},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(rule{}, recipeLine{}), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, m.order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}
