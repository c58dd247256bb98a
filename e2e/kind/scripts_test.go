package kind

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"mvdan.cc/sh/v3/syntax"
)

// root is the repository's root.
const root = "../.."

// entryScripts are the scripts make kind-deps and make kind-e2e run; the
// scripts they run or source are found from them.
var entryScripts = []string{"scripts/kinddeps.sh", "scripts/kind-e2e.sh"}

// installer is the script of make kind-deps, holding PACKAGES and COMMANDS.
const installer = "scripts/kinddeps.sh"

// builtins are bash's builtins and the words that are not commands.
var builtins = map[string]bool{
	".": true, ":": true, "[": true, "break": true, "cd": true, "command": true, "continue": true,
	"declare": true, "echo": true, "eval": true, "exec": true, "exit": true, "export": true,
	"false": true, "kill": true, "local": true, "printf": true, "pwd": true, "read": true,
	"readonly": true, "return": true, "set": true, "shift": true, "source": true, "test": true,
	"trap": true, "true": true, "type": true, "unset": true, "wait": true,
}

// debianRequired are packages of Priority "required" in Debian: every
// Debian system has them (checked with dpkg-query where it runs).
var debianRequired = map[string]bool{
	"apt": true, "bash": true, "coreutils": true, "debianutils": true, "diffutils": true,
	"dpkg": true, "findutils": true, "grep": true, "gzip": true, "mount": true, "sed": true,
	"tar": true, "util-linux": true,
}

// prerequisites are what the repository needs before any make target.
var prerequisites = map[string]bool{"go": true}

// dynamic are the command words the test cannot resolve (a function's
// local variable), with the host command each runs.
var dynamic = map[string]string{
	// busybox_links (scripts/kindimage.sh): the host's busybox, copied into an image's root.
	"$r/bin/busybox": "busybox",
}

// script is one parsed shell script with its top-level variables.
type script struct {
	rel    string
	file   *syntax.File
	vars   map[string]string
	arrays map[string][]string
}

// use is one host command a script runs.
type use struct {
	cmd   string
	where string
}

func parseScript(t *testing.T, rel string) *script {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(string(b)), rel)
	if err != nil {
		t.Fatalf("parse %s: %v", rel, err)
	}
	s := &script{rel: rel, file: f, vars: map[string]string{}, arrays: map[string][]string{}}
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

// commands returns the command words of every simple command in node (trap
// handlers parsed too), resolved, each with its line. Wrappers (env, nohup,
// setsid, xargs, exec, command) give the command they run as well.
func (s *script) commands(t *testing.T, node syntax.Node) []use {
	t.Helper()
	var out []use
	syntax.Walk(node, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		where := fmt.Sprintf("%s:%d", s.rel, call.Args[0].Pos().Line())
		args := make([]string, len(call.Args))
		for i, a := range call.Args {
			args[i] = s.str(a)
		}
		for len(args) > 0 {
			out = append(out, use{cmd: args[0], where: where})
			args = wrapped(args)
		}
		if call.Args[0].Lit() == "trap" && len(call.Args) > 1 {
			f, err := syntax.NewParser().Parse(strings.NewReader(s.str(call.Args[1])), where)
			if err != nil {
				t.Fatalf("%s: trap handler: %v", where, err)
			}
			out = append(out, s.commands(t, f)...)
		}
		return true
	})
	return out
}

// wrapped returns the command line a wrapper command runs (nil if args is
// not a wrapper's).
func wrapped(args []string) []string {
	rest := args[1:]
	switch args[0] {
	case "env":
		for len(rest) > 0 && (strings.Contains(rest[0], "=") || strings.HasPrefix(rest[0], "-")) {
			rest = rest[1:]
		}
	case "nohup", "setsid", "exec":
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
		return nil
	}
	return rest
}

// kit is what the kit's scripts run on the host.
type kit struct {
	scripts   map[string]*script
	functions map[string]bool
	uses      []use
	built     []string // scripts/kindbin.sh's binaries
}

// load parses the entry scripts and every script they run or source.
func load(t *testing.T) *kit {
	t.Helper()
	k := &kit{scripts: map[string]*script{}, functions: map[string]bool{}}
	queue := slices.Clone(entryScripts)
	for len(queue) > 0 {
		rel := queue[0]
		queue = queue[1:]
		if k.scripts[rel] != nil {
			continue
		}
		s := parseScript(t, rel)
		k.scripts[rel] = s
		k.uses = append(k.uses, interpreter(t, rel)...)
		syntax.Walk(s.file, func(n syntax.Node) bool {
			if fn, ok := n.(*syntax.FuncDecl); ok {
				k.functions[fn.Name.Value] = true
			}
			return true
		})
		for _, u := range s.commands(t, s.file) {
			k.uses = append(k.uses, u)
			if repo, ok := repoPath(u.cmd); ok && strings.HasPrefix(repo, "scripts/") {
				queue = append(queue, repo)
			}
		}
		// Sourced files: ". FILE".
		syntax.Walk(s.file, func(n syntax.Node) bool {
			if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 1 && (call.Args[0].Lit() == "." || call.Args[0].Lit() == "source") {
				if repo, ok := repoPath(s.str(call.Args[1])); ok {
					queue = append(queue, repo)
				}
			}
			return true
		})
	}
	kb := k.scripts["scripts/kindbin.sh"]
	if kb == nil {
		t.Fatal("scripts/kindbin.sh: not run by the kit's scripts")
	}
	k.built = kb.arrays["ALL"]
	if len(k.built) == 0 {
		t.Fatal("scripts/kindbin.sh: no ALL array (the binaries it builds)")
	}
	return k
}

// interpreter returns the commands of the script's #! line.
func interpreter(t *testing.T, rel string) []use {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	shebang, ok := strings.CutPrefix(line, "#!")
	if !ok {
		return nil // sourced only
	}
	var out []use
	for _, f := range strings.Fields(shebang) {
		out = append(out, use{cmd: f, where: rel + ":1"})
	}
	return out
}

// repoPath returns the repository-relative path of a word starting at the
// repository's root ($ROOT or $top, as the scripts name it).
func repoPath(word string) (string, bool) {
	for _, p := range []string{"$ROOT/", "$top/"} {
		if rest, ok := strings.CutPrefix(word, p); ok {
			return rest, true
		}
	}
	return "", false
}

// hostCommands resolves every use to a host command name; it reports
// words it cannot resolve and calls of kit binaries kindbin.sh does not build.
func (k *kit) hostCommands(t *testing.T) map[string][]string {
	t.Helper()
	host := map[string][]string{}
	for _, u := range k.uses {
		cmd := u.cmd
		if builtins[cmd] || k.functions[cmd] {
			continue
		}
		if repo, ok := repoPath(cmd); ok {
			if strings.Contains(repo, "/.cache/") || strings.HasPrefix(repo, ".cache/") {
				if !strings.Contains(repo, "kind/bin/") || !slices.Contains(k.built, filepath.Base(repo)) {
					t.Errorf("%s runs %s, which scripts/kindbin.sh does not build (ALL: %v)", u.where, cmd, k.built)
				}
				continue
			}
			if _, err := os.Stat(filepath.Join(root, repo)); err != nil {
				t.Errorf("%s runs %s: %v", u.where, cmd, err)
			}
			continue
		}
		if c, ok := dynamic[cmd]; ok {
			cmd = c
		} else if strings.HasPrefix(cmd, "/") {
			cmd = filepath.Base(cmd)
		}
		if strings.ContainsAny(cmd, "$/") {
			t.Errorf("%s runs %q: cannot tell which command (add it to the test's dynamic table)", u.where, cmd)
			continue
		}
		host[cmd] = append(host[cmd], u.where)
	}
	return host
}

// declared returns the installer's COMMANDS (command -> package) and PACKAGES.
func declared(t *testing.T, k *kit) (map[string]string, []string) {
	t.Helper()
	s := k.scripts[installer]
	commands := map[string]string{}
	for _, e := range s.arrays["COMMANDS"] {
		cmd, pkg, ok := strings.Cut(e, ":")
		if !ok || cmd == "" || pkg == "" {
			t.Fatalf("%s: COMMANDS entry %q is not command:package", installer, e)
		}
		commands[cmd] = pkg
	}
	if len(commands) == 0 || len(s.arrays["PACKAGES"]) == 0 {
		t.Fatalf("%s: no COMMANDS or PACKAGES array", installer)
	}
	return commands, s.arrays["PACKAGES"]
}

// TestScriptCommands: every host command the kit's scripts run is named in
// scripts/kinddeps.sh's COMMANDS, whose packages are installed by it
// (PACKAGES) or on every Debian system; nothing there is unused.
func TestScriptCommands(t *testing.T) {
	k := load(t)
	host := k.hostCommands(t)
	commands, packages := declared(t, k)
	for cmd, where := range host {
		if _, ok := commands[cmd]; !ok {
			t.Errorf("%s run %s, which %s's COMMANDS does not name (and so make kind-deps does not install)", strings.Join(where, ", "), cmd, installer)
		}
	}
	usedPackages := map[string]bool{}
	for cmd, pkg := range commands {
		usedPackages[pkg] = true
		if _, ok := host[cmd]; !ok {
			t.Errorf("%s: COMMANDS names %s, which no script of the kit runs", installer, cmd)
		}
		if !slices.Contains(packages, pkg) && !debianRequired[pkg] && !prerequisites[pkg] {
			t.Errorf("%s: %s comes from package %s, which is neither in PACKAGES nor on every Debian system", installer, cmd, pkg)
		}
	}
	for _, p := range packages {
		if !usedPackages[p] {
			t.Errorf("%s: PACKAGES installs %s, which provides no command of COMMANDS", installer, p)
		}
	}
	scripts := make([]string, 0, len(k.scripts))
	for rel := range k.scripts {
		scripts = append(scripts, rel)
	}
	slices.Sort(scripts)
	t.Logf("scripts: %v; %d host commands", scripts, len(host))
}

// TestScriptCommandsWalk: the parse finds what it should in a script of
// every form the kit uses (wrappers, functions, substitutions, traps,
// variables with defaults, kit binaries), so TestScriptCommands can fail.
func TestScriptCommandsWalk(t *testing.T) {
	src := `ROOT=$(pwd)
GO=${GO:-go}
DOCKER=${DOCKER:-/usr/bin/docker}
BIN=$ROOT/.cache/kind/bin/v1
KIND=$BIN/kind
f() { local r=$1; "$r/bin/busybox" --list; }
trap 'rm -rf "$x"; pkill y' EXIT
x=$(mktemp -d) && setsid nohup dockerd >/dev/null &
env A=b apt-get install -y foo | grep -q bar
(cd /tmp && "$GO" build) || "$DOCKER" info
echo "$(seq 3)" <(sha256sum a)
ls | xargs -n 1 basename
command -v probe >/dev/null
"$KIND" create
"$ROOT/scripts/other.sh"
cat <<EOF
not a command
EOF
`
	f, err := syntax.NewParser().Parse(strings.NewReader(src), "t.sh")
	if err != nil {
		t.Fatal(err)
	}
	s := &script{rel: "t.sh", file: f, vars: map[string]string{}, arrays: map[string][]string{}}
	for _, st := range f.Stmts {
		if call, ok := st.Cmd.(*syntax.CallExpr); ok && len(call.Args) == 0 {
			for _, a := range call.Assigns {
				s.assign(a)
			}
		}
	}
	var got []string
	for _, u := range s.commands(t, f) {
		got = append(got, u.cmd)
	}
	want := []string{"pwd", "$r/bin/busybox", "trap", "rm", "pkill", "mktemp", "setsid", "nohup", "dockerd",
		"env", "apt-get", "grep", "cd", "go", "/usr/bin/docker", "echo", "seq", "sha256sum",
		"ls", "xargs", "basename", "command", "$ROOT/.cache/kind/bin/v1/kind", "$ROOT/scripts/other.sh", "cat"}
	// Order: as syntax.Walk visits (a statement before its redirections' and arguments' substitutions).
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}

// TestScriptPackages checks the declared packages against this machine's
// dpkg where it runs: the required ones are Priority required, and each
// command of an installed package is that package's file.
func TestScriptPackages(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("no dpkg-query: not a Debian system")
	}
	commands, _ := declared(t, load(t))
	var required []string
	for p := range debianRequired {
		required = append(required, p)
	}
	slices.Sort(required)
	out, err := exec.Command("dpkg-query", append([]string{"-W", "-f=${Package} ${Priority}\n"}, required...)...).Output()
	if err != nil {
		t.Fatalf("dpkg-query %v: %v", required, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if pkg, prio, _ := strings.Cut(line, " "); prio != "required" {
			t.Errorf("package %s: priority %q, not required: not on every Debian system", pkg, prio)
		}
	}
	var pkgs []string
	for _, pkg := range commands {
		if !prerequisites[pkg] && !slices.Contains(pkgs, pkg) {
			pkgs = append(pkgs, pkg)
		}
	}
	installed := installedPackages(pkgs)
	paths := map[string]string{} // command -> its file
	for cmd, pkg := range commands {
		if !installed[pkg] {
			continue
		}
		path := systemPath(cmd)
		if path == "" {
			t.Errorf("%s is installed but %s is in none of /usr/sbin, /usr/bin, /sbin, /bin", pkg, cmd)
			continue
		}
		paths[cmd] = path
	}
	owners := fileOwners(slices.Collect(maps.Values(paths)))
	checked := 0
	for cmd, path := range paths {
		if !slices.Contains(owners[path], commands[cmd]) {
			t.Errorf("%s: %s belongs to %v, not to %s as %s's COMMANDS says", cmd, path, owners[path], commands[cmd], installer)
		}
		checked++
	}
	t.Logf("%d commands checked against dpkg", checked)
}

// installedPackages returns which of pkgs dpkg has installed (one dpkg-query).
func installedPackages(pkgs []string) map[string]bool {
	out, _ := exec.Command("dpkg-query", append([]string{"-W", "-f=${Package} ${Status}\n"}, pkgs...)...).Output()
	installed := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if pkg, status, ok := strings.Cut(line, " "); ok && status == "install ok installed" {
			installed[pkg] = true
		}
	}
	return installed
}

// systemPath returns the command's file in the system directories.
func systemPath(cmd string) string {
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin"} {
		if path := filepath.Join(dir, cmd); fileExists(path) {
			return path
		}
	}
	return ""
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// fileOwners returns the packages owning each path (one dpkg -S), trying the
// other side of the /usr merge too (dpkg may know /bin/x for /usr/bin/x).
func fileOwners(paths []string) map[string][]string {
	alias := map[string]string{} // path dpkg may report -> path asked
	var args []string
	for _, p := range paths {
		alt := strings.TrimPrefix(p, "/usr")
		if alt == p {
			alt = "/usr" + p
		}
		alias[p], alias[alt] = p, p
		args = append(args, p, alt)
	}
	out, _ := exec.Command("dpkg", append([]string{"-S"}, args...)...).Output() // exit 1 when a path has no owner
	owners := map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		names, file, ok := strings.Cut(line, ": ")
		if !ok || strings.HasPrefix(line, "diversion") || alias[file] == "" {
			continue
		}
		for _, n := range strings.Split(names, ", ") {
			owners[alias[file]] = append(owners[alias[file]], strings.SplitN(n, ":", 2)[0])
		}
	}
	return owners
}
