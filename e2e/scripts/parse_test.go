package scripts

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"mvdan.cc/sh/v3/syntax"
)

// root is the repository's root.
const root = "../.."

// script is one parsed shell script (or one Makefile recipe line) with its
// top-level variables.
type script struct {
	rel     string
	line    int // the line of rel where the parsed text starts (recipes)
	file    *syntax.File
	shebang string // the first line
	vars    map[string]string
	arrays  map[string][]string
}

// use is one simple command a script runs: its words, resolved.
type use struct {
	args  []string
	where string
}

func parseScript(t *testing.T, rel string) *script {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return parseSource(t, rel, 1, string(b), nil)
}

// parseSource parses src, the text of rel from line on, with vars known
// before its own assignments (a Makefile's variables).
func parseSource(t *testing.T, rel string, line int, src string, vars map[string]string) *script {
	t.Helper()
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), rel)
	if err != nil {
		t.Fatalf("parse %s:%d: %v", rel, line, err)
	}
	s := &script{rel: rel, line: line, file: f, vars: map[string]string{}, arrays: map[string][]string{}}
	s.shebang, _, _ = strings.Cut(src, "\n")
	for k, v := range vars {
		s.vars[k] = v
	}
	for _, st := range f.Stmts {
		call, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || len(call.Args) > 0 {
			continue
		}
		for _, a := range call.Assigns {
			s.assign(a)
		}
	}
	return s
}

// assign records a top-level assignment; the first one of a name wins
// (X=${X:-default} sets the default, later ones are the script's state).
func (s *script) assign(a *syntax.Assign) {
	name := a.Name.Value
	if _, ok := s.vars[name]; ok {
		return
	}
	if _, ok := s.arrays[name]; ok {
		return
	}
	if a.Array != nil {
		var elems []string
		for _, e := range a.Array.Elems {
			if p := soleParam(e.Value); p != nil && p.Index != nil {
				elems = append(elems, s.arrays[p.Param.Value]...)
				continue
			}
			elems = append(elems, s.str(e.Value))
		}
		s.arrays[name] = elems
		return
	}
	// A value the test cannot compute (ROOT=$(cd ... && pwd)) stays $NAME.
	if a.Value == nil {
		return
	}
	if v := s.str(a.Value); !strings.Contains(v, "$?") {
		s.vars[name] = v
	}
}

// soleParam returns the word's parameter expansion when it is the word's only part.
func soleParam(w *syntax.Word) *syntax.ParamExp {
	if len(w.Parts) != 1 {
		return nil
	}
	part := w.Parts[0]
	if dq, ok := part.(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
		part = dq.Parts[0]
	}
	p, _ := part.(*syntax.ParamExp)
	return p
}

// str is the word with the script's variables substituted: an unknown
// variable stays $NAME, a default expansion of an unknown one gives its
// default, and anything else (a command substitution, an operator) gives "$?".
func (s *script) str(w *syntax.Word) string {
	var b strings.Builder
	for _, p := range w.Parts {
		s.part(&b, p)
	}
	return b.String()
}

func (s *script) part(b *strings.Builder, p syntax.WordPart) {
	switch p := p.(type) {
	case *syntax.Lit:
		b.WriteString(p.Value)
	case *syntax.SglQuoted:
		b.WriteString(p.Value)
	case *syntax.DblQuoted:
		for _, q := range p.Parts {
			s.part(b, q)
		}
	case *syntax.ParamExp:
		if p.Param == nil || p.Index != nil || p.Length || p.Excl || p.Slice != nil || p.Repl != nil {
			b.WriteString("$?")
			return
		}
		if v, ok := s.vars[p.Param.Value]; ok && (p.Exp == nil || isDefault(p.Exp)) {
			b.WriteString(v)
			return
		}
		switch {
		case p.Exp == nil:
			b.WriteString("$" + p.Param.Value)
		case isDefault(p.Exp) && p.Exp.Word != nil:
			b.WriteString(s.str(p.Exp.Word))
		default:
			b.WriteString("$?")
		}
	default:
		b.WriteString("$?")
	}
}

func isDefault(e *syntax.Expansion) bool {
	return e.Op == syntax.DefaultUnset || e.Op == syntax.DefaultUnsetOrNull
}

// commands returns every simple command in node (trap handlers parsed
// too), its words resolved, each with its line; a command run only in the
// then-branch of an if whose condition checks for it (`command -v NAME`)
// is optional, and left out.
func (s *script) commands(t *testing.T, node syntax.Node) []use {
	return s.guardedCommands(t, node, nil)
}

// guardedCommands is commands, leaving out the commands named in
// optional.
func (s *script) guardedCommands(t *testing.T, node syntax.Node, optional map[string]bool) []use {
	t.Helper()
	var out []use
	syntax.Walk(node, func(n syntax.Node) bool {
		if ic, ok := n.(*syntax.IfClause); ok && len(ic.Cond) > 0 {
			inner := maps.Clone(optional)
			for _, c := range s.guardedCommands(t, &syntax.Block{Stmts: ic.Cond}, optional) {
				if len(c.args) > 2 && c.args[0] == "command" && c.args[1] == "-v" {
					if inner == nil {
						inner = map[string]bool{}
					}
					inner[c.args[2]] = true
				}
			}
			out = append(out, s.guardedCommands(t, &syntax.Block{Stmts: ic.Cond}, optional)...)
			out = append(out, s.guardedCommands(t, &syntax.Block{Stmts: ic.Then}, inner)...)
			if ic.Else != nil {
				out = append(out, s.guardedCommands(t, ic.Else, optional)...)
			}
			return false
		}
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 || slices.ContainsFunc(call.Args, func(w *syntax.Word) bool { return optional[w.Lit()] }) {
			return true
		}
		where := fmt.Sprintf("%s:%d", s.rel, s.line+int(call.Args[0].Pos().Line())-1)
		args := make([]string, len(call.Args))
		for i, a := range call.Args {
			args[i] = s.str(a)
		}
		out = append(out, use{args: args, where: where})
		if call.Args[0].Lit() == "trap" && len(call.Args) > 1 {
			f, err := syntax.NewParser().Parse(strings.NewReader(s.str(call.Args[1])), where)
			if err != nil {
				t.Fatalf("%s: trap handler: %v", where, err)
			}
			out = append(out, s.guardedCommands(t, f, optional)...)
		}
		return true
	})
	return out
}

// wrapperFunctions returns the script's functions that run their
// arguments as a command ("$@" as a command word, as_root in
// scripts/deps.sh).
func (s *script) wrapperFunctions() []string {
	var out []string
	syntax.Walk(s.file, func(n syntax.Node) bool {
		fn, ok := n.(*syntax.FuncDecl)
		if !ok {
			return true
		}
		syntax.Walk(fn.Body, func(m syntax.Node) bool {
			if call, ok := m.(*syntax.CallExpr); ok && len(call.Args) > 0 {
				if p := soleParam(call.Args[0]); p != nil && p.Param != nil && p.Param.Value == "@" {
					out = append(out, fn.Name.Value)
				}
			}
			return true
		})
		return false
	})
	return out
}

// functions returns the names of the script's functions.
func (s *script) functions() []string {
	var out []string
	syntax.Walk(s.file, func(n syntax.Node) bool {
		if fn, ok := n.(*syntax.FuncDecl); ok {
			out = append(out, fn.Name.Value)
		}
		return true
	})
	return out
}

// sourced returns the words naming the files the script sources (". FILE").
func (s *script) sourced() []use {
	var out []use
	syntax.Walk(s.file, func(n syntax.Node) bool {
		if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 1 && (call.Args[0].Lit() == "." || call.Args[0].Lit() == "source") {
			out = append(out, use{args: []string{s.str(call.Args[1])}, where: fmt.Sprintf("%s:%d", s.rel, s.line+int(call.Pos().Line())-1)})
		}
		return true
	})
	return out
}

// chain returns the commands a command line runs: its first word and, for
// a wrapper (env, nohup, setsid, xargs, exec, command, sudo, time, or a
// function of wrappers), the command line it wraps, and so on.
func chain(args []string, wrappers map[string]bool) []string {
	var out []string
	for len(args) > 0 {
		out = append(out, args[0])
		args = wrapped(args, wrappers)
	}
	return out
}

// wrapped returns the command line a wrapper command runs (nil if args is
// not a wrapper's).
func wrapped(args []string, wrappers map[string]bool) []string {
	rest, name := args[1:], args[0]
	if strings.HasPrefix(name, "/") {
		name = filepath.Base(name) // #!/usr/bin/env bash
	}
	switch name {
	case "env":
		for len(rest) > 0 && (strings.Contains(rest[0], "=") || strings.HasPrefix(rest[0], "-")) {
			rest = rest[1:]
		}
	case "nohup", "setsid", "exec", "sudo", "time":
		for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
			rest = rest[1:]
		}
	case "command":
		if len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
			return nil // command -v: a probe
		}
	case "xargs":
		for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
			if slices.Contains([]string{"-n", "-I", "-P", "-L", "-d", "-s", "-a"}, rest[0]) {
				rest = rest[1:]
			}
			rest = rest[1:]
		}
	default:
		if !wrappers[args[0]] {
			return nil
		}
	}
	return rest
}

// interpreter returns the commands of the script's #! line.
func (s *script) interpreter() []use {
	shebang, ok := strings.CutPrefix(s.shebang, "#!")
	if !ok {
		return nil // sourced only
	}
	return []use{{args: strings.Fields(shebang), where: s.rel + ":1"}}
}

// repoPath returns the repository-relative path of a command word that
// names a file of the repository: from its root ($ROOT or $top, as the
// scripts name it) or relative to it (the Makefile's recipes and the
// scripts that cd to the root run ./scripts/x.sh and bin/x).
func repoPath(word string) (string, bool) {
	for _, p := range []string{"$ROOT/", "$top/", "./"} {
		if rest, ok := strings.CutPrefix(word, p); ok {
			return rest, true
		}
	}
	if strings.Contains(word, "/") && !strings.HasPrefix(word, "/") && !strings.HasPrefix(word, "$") {
		return word, true
	}
	return "", false
}

// TestParseWalk: the parse finds what it should in a script of every form
// the scripts use (wrappers, functions, substitutions, traps, variables
// with defaults, built binaries), so the checks can fail; a command run
// only where an if's condition found it (command -v) is left out.
func TestParseWalk(t *testing.T) {
	src := `ROOT=$(pwd)
GO=${GO:-go}
DOCKER=${DOCKER:-/usr/bin/docker}
BIN=$ROOT/.cache/kind/bin/v1
KIND=$BIN/kind
f() { local r=$1; "$r/bin/busybox" --list; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
trap 'rm -rf "$x"; pkill y' EXIT
x=$(mktemp -d) && setsid nohup dockerd >/dev/null &
env A=b apt-get install -y foo | grep -q bar
(cd /tmp && "$GO" build) || "$DOCKER" info
echo "$(seq 3)" <(sha256sum a)
ls | xargs -n 1 basename
command -v probe >/dev/null
"$KIND" create
"$ROOT/scripts/other.sh"
as_root depmod -a
if [ -n "$x" ] && command -v systemctl >/dev/null; then as_root systemctl stop p; touch y; else rmdir z; fi
cat <<EOF
not a command
EOF
`
	s := parseSource(t, "t.sh", 1, src, nil)
	wrappers := map[string]bool{}
	for _, w := range s.wrapperFunctions() {
		wrappers[w] = true
	}
	if diff := cmp.Diff([]string{"as_root"}, s.wrapperFunctions()); diff != "" {
		t.Errorf("wrapper functions (-want +got):\n%s", diff)
	}
	var got []string
	for _, u := range s.commands(t, s.file) {
		got = append(got, chain(u.args, wrappers)...)
	}
	want := []string{"pwd", "$r/bin/busybox", "[", "id", "$@", "sudo", "$@", "trap", "rm", "pkill", "mktemp", "setsid", "nohup", "dockerd",
		"env", "apt-get", "grep", "cd", "go", "/usr/bin/docker", "echo", "seq", "sha256sum",
		"ls", "xargs", "basename", "command", "$ROOT/.cache/kind/bin/v1/kind", "$ROOT/scripts/other.sh", "as_root", "depmod", "cat",
		// The if: systemctl only where the condition found it.
		"[", "command", "touch", "rmdir"}
	// Order: as syntax.Walk visits (a statement before its redirections' and arguments' substitutions).
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}
