package scripts

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// installer is a script a make target runs to install what others need:
// it declares PACKAGES (the Debian packages it installs) and COMMANDS
// (command:package, every host command that the scripts and recipes of
// the targets reaching it run, beyond those of everywhere).
type installer struct {
	script string
	// forTests: PACKAGES also holds packages that only the Go tests run
	// (qemu, ipvsadm, ...), which no script or recipe runs.
	forTests bool
}

var installers = []installer{
	{script: "scripts/deps.sh", forTests: true},
	{script: "scripts/kinddeps.sh"},
}

// builders are the scripts that build the binaries scripts run from
// .cache, by the directory under .cache, with the array naming them.
var builders = []struct{ dir, script, array string }{
	{"kube/", "scripts/kubebin.sh", "BINARIES"},
	{"kind/bin/", "scripts/kindbin.sh", "ALL"},
}

// everywhere are the commands a fresh machine has before any make target,
// with their package: Debian's packages of Priority required (checked with
// dpkg-query where it runs) and the repository's prerequisites.
var everywhere = map[string]string{
	"apt-get": "apt", "apt-cache": "apt", "bash": "bash", "dpkg-deb": "dpkg", "dpkg-query": "dpkg",
	"awk": "mawk", "diff": "diffutils", "grep": "grep", "sed": "sed", "tar": "tar", "gzip": "gzip",
	"xargs": "findutils", "find": "findutils", "setsid": "util-linux", "unshare": "util-linux",
	"basename": "coreutils", "cat": "coreutils", "chmod": "coreutils", "cp": "coreutils", "cut": "coreutils",
	"date": "coreutils", "dirname": "coreutils", "du": "coreutils", "env": "coreutils", "id": "coreutils",
	"install": "coreutils", "ln": "coreutils", "ls": "coreutils", "mkdir": "coreutils", "mktemp": "coreutils",
	"mv": "coreutils", "nice": "coreutils", "nohup": "coreutils", "numfmt": "coreutils", "realpath": "coreutils", "rm": "coreutils",
	"rmdir": "coreutils", "seq": "coreutils", "sha256sum": "coreutils", "sleep": "coreutils", "sort": "coreutils",
	"stat": "coreutils", "tail": "coreutils", "tee": "coreutils", "touch": "coreutils", "tr": "coreutils",
	"wc": "coreutils", "head": "coreutils", "uniq": "coreutils",
	// The prerequisites: a clone (git), the Go toolchain (go, gofmt), make,
	// and sudo for scripts/deps.sh run by a user other than root.
	"git": "git", "go": "go", "gofmt": "go", "make": "make", "sudo": "sudo",
}

// debianRequired are packages of Priority "required" in Debian: every
// Debian system has them (checked with dpkg-query where it runs).
var debianRequired = map[string]bool{
	"apt": true, "bash": true, "coreutils": true, "debianutils": true, "diffutils": true,
	"dpkg": true, "findutils": true, "grep": true, "gzip": true, "mawk": true, "mount": true,
	"sed": true, "tar": true, "util-linux": true,
}

// prerequisites are what the repository needs before any make target (see everywhere).
var prerequisites = map[string]bool{"git": true, "go": true, "make": true, "sudo": true}

// builtins are bash's builtins and the words that are not commands.
var builtins = map[string]bool{
	".": true, ":": true, "[": true, "break": true, "cd": true, "command": true, "continue": true,
	"declare": true, "echo": true, "eval": true, "exec": true, "exit": true, "export": true,
	"false": true, "kill": true, "local": true, "printf": true, "pwd": true, "read": true,
	"readonly": true, "return": true, "set": true, "shift": true, "source": true, "test": true,
	"trap": true, "true": true, "type": true, "unset": true, "wait": true,
	"$@": true, // a wrapper function's arguments: its callers' commands
}

// dynamic are the command words the test cannot resolve (a function's
// local variable), with the host command each runs.
var dynamic = map[string]string{
	// busybox_links (scripts/kindimage.sh): the host's busybox, copied into an image's root.
	"$r/bin/busybox": "busybox",
}

// repo is what the Makefile's targets run: the Makefile and every script
// they reach.
type repo struct {
	mk        *makefile
	recipes   map[string][]*script // target -> its recipe lines
	scripts   map[string]*script
	functions map[string]bool
	wrappers  map[string]bool
}

// reach is what one make target runs, its prerequisites and the targets
// and scripts it runs included.
type reach struct {
	uses       []use
	scripts    map[string]bool
	installers map[string]bool
	targets    map[string]bool
}

func loadRepo(t *testing.T) *repo {
	t.Helper()
	r := &repo{mk: parseMakefile(t, "Makefile"), recipes: map[string][]*script{}, scripts: map[string]*script{},
		functions: map[string]bool{}, wrappers: map[string]bool{}}
	for name, ru := range r.mk.rules {
		for _, l := range ru.recipe {
			r.recipes[name] = append(r.recipes[name], parseSource(t, "Makefile", l.line, l.text, nil))
		}
	}
	// Every script under scripts/, reached or not, so none escapes the check.
	files, err := filepath.Glob(filepath.Join(root, "scripts", "*.sh"))
	if err != nil || len(files) == 0 {
		t.Fatalf("scripts/*.sh: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		r.script(t, "scripts/"+filepath.Base(f))
	}
	return r
}

// script returns the parsed script rel, parsing it once.
func (r *repo) script(t *testing.T, rel string) *script {
	t.Helper()
	if s := r.scripts[rel]; s != nil {
		return s
	}
	s := parseScript(t, rel)
	r.scripts[rel] = s
	for _, f := range s.functions() {
		r.functions[f] = true
	}
	for _, f := range s.wrapperFunctions() {
		r.wrappers[f] = true
	}
	return s
}

// reach returns what make target runs.
func (r *repo) reach(t *testing.T, target string) *reach {
	t.Helper()
	re := &reach{scripts: map[string]bool{}, installers: map[string]bool{}, targets: map[string]bool{}}
	var visitTarget func(string)
	var visitScript func(string)
	follow := func(uses []use) {
		for _, u := range uses {
			re.uses = append(re.uses, u)
			if u.args[0] == "make" {
				for _, a := range u.args[1:] {
					if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
						visitTarget(a)
					}
				}
			}
			for _, cmd := range chain(u.args, r.wrappers) {
				if rel, ok := repoPath(cmd); ok && strings.HasPrefix(rel, "scripts/") {
					visitScript(rel)
				}
			}
		}
	}
	visitScript = func(rel string) {
		if re.scripts[rel] {
			return
		}
		re.scripts[rel] = true
		for _, in := range installers {
			if in.script == rel {
				re.installers[rel] = true
			}
		}
		s := r.script(t, rel)
		follow(s.interpreter())
		follow(s.commands(t, s.file))
		for _, src := range s.sourced() {
			if p, ok := repoPath(src.args[0]); ok {
				visitScript(p)
			}
		}
	}
	visitTarget = func(name string) {
		if re.targets[name] {
			return
		}
		ru := r.mk.rules[name]
		if ru == nil {
			t.Errorf("make %s: no such target (run by make %s)", name, target)
			return
		}
		re.targets[name] = true
		for _, p := range ru.prereqs {
			visitTarget(p)
		}
		for _, s := range r.recipes[name] {
			follow(s.commands(t, s.file))
		}
	}
	visitTarget(target)
	return re
}

// declared returns an installer's COMMANDS (command -> package) and PACKAGES.
func (r *repo) declared(t *testing.T, rel string) (map[string]string, []string) {
	t.Helper()
	s := r.script(t, rel)
	commands := map[string]string{}
	for _, e := range s.arrays["COMMANDS"] {
		cmd, pkg, ok := strings.Cut(e, ":")
		if !ok || cmd == "" || pkg == "" {
			t.Fatalf("%s: COMMANDS entry %q is not command:package", rel, e)
		}
		commands[cmd] = pkg
	}
	if len(commands) == 0 || len(s.arrays["PACKAGES"]) == 0 {
		t.Fatalf("%s: no COMMANDS or PACKAGES array", rel)
	}
	return commands, s.arrays["PACKAGES"]
}

// installedBy returns the targets whose own recipe runs the installer.
func (r *repo) installedBy(t *testing.T, rel string) []string {
	t.Helper()
	var out []string
	for _, name := range r.mk.order {
		for _, s := range r.recipes[name] {
			for _, u := range s.commands(t, s.file) {
				for _, c := range chain(u.args, r.wrappers) {
					if p, ok := repoPath(c); ok && p == rel && !slices.Contains(out, name) {
						out = append(out, name)
					}
				}
			}
		}
	}
	return out
}

// hostCommand resolves a command word of re to the host command it runs
// ("" for builtins, functions and the repository's own files, checked
// here: a script that exists, a binary a builder or the target builds).
func (r *repo) hostCommand(t *testing.T, re *reach, cmd, where string) string {
	t.Helper()
	if builtins[cmd] || r.functions[cmd] {
		return ""
	}
	if rel, ok := repoPath(cmd); ok {
		r.checkRepoFile(t, re, rel, where)
		return ""
	}
	if c, ok := dynamic[cmd]; ok {
		return c
	}
	if strings.HasPrefix(cmd, "/") {
		cmd = filepath.Base(cmd)
	}
	if strings.ContainsAny(cmd, "$/") {
		t.Errorf("%s runs %q: cannot tell which command (add it to the test's dynamic table)", where, cmd)
		return ""
	}
	return cmd
}

// checkRepoFile checks a repository file a script runs: under .cache, one
// its builder builds; under bin/, one the target's go build writes; else
// a file of the tree.
func (r *repo) checkRepoFile(t *testing.T, re *reach, rel, where string) {
	t.Helper()
	if cached, ok := strings.CutPrefix(rel, ".cache/"); ok {
		for _, b := range builders {
			if strings.HasPrefix(cached, b.dir) {
				built := r.script(t, b.script).arrays[b.array]
				if !slices.Contains(built, filepath.Base(rel)) {
					t.Errorf("%s runs %s, which %s does not build (%s: %v)", where, rel, b.script, b.array, built)
				}
				return
			}
		}
		t.Errorf("%s runs %s: no script builds .cache/%s", where, rel, cached)
		return
	}
	if strings.HasPrefix(rel, "bin/") {
		if !slices.Contains(goBuilt(re.uses), rel) {
			t.Errorf("%s runs %s, which no go build -o of its target writes", where, rel)
		}
		return
	}
	if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
		t.Errorf("%s runs %s: %v", where, rel, err)
	}
}

// goBuilt returns the files go build -o writes in uses: -o FILE, or
// -o DIR/ with one file per package named after its directory.
func goBuilt(uses []use) []string {
	var out []string
	for _, u := range uses {
		if len(u.args) < 2 || u.args[0] != "go" || u.args[1] != "build" {
			continue
		}
		var dir string
		var pkgs []string
		for i := 2; i < len(u.args); i++ {
			switch a := u.args[i]; {
			case a == "-o" && i+1 < len(u.args):
				i++
				if o := strings.TrimPrefix(u.args[i], "./"); strings.HasSuffix(o, "/") {
					dir = o
				} else {
					out = append(out, o)
				}
			case a == "-ldflags" || a == "-tags":
				i++
			case !strings.HasPrefix(a, "-"):
				pkgs = append(pkgs, a)
			}
		}
		if dir != "" {
			for _, p := range pkgs {
				out = append(out, dir+filepath.Base(p))
			}
		}
	}
	return out
}

// TestInstalledCommands: every host command that a make target runs (its
// recipe, its prerequisites, the targets and scripts it runs, every
// script under scripts/ reached) is on every fresh machine (everywhere) or
// named in the COMMANDS of an installer the target runs (make deps or
// deps-vm: scripts/deps.sh; make kind-deps: scripts/kinddeps.sh) with a
// package that installer installs; and nothing an installer declares is
// unused. So a missing install step fails here before it fails a user on
// a fresh machine.
func TestInstalledCommands(t *testing.T) {
	r := loadRepo(t)
	missing := map[string]map[string][]string{} // command -> where -> targets
	used := map[string]map[string]bool{}        // installer -> commands its targets run
	reached := map[string]bool{}
	var table []string
	for _, target := range r.mk.order {
		re := r.reach(t, target)
		for s := range re.scripts {
			reached[s] = true
		}
		declared := map[string]string{} // command -> installer
		for in := range re.installers {
			commands, _ := r.declared(t, in)
			for c := range commands {
				declared[c] = in
			}
		}
		byInstaller := map[string][]string{}
		for _, u := range re.uses {
			for _, word := range chain(u.args, r.wrappers) {
				cmd := r.hostCommand(t, re, word, u.where)
				if cmd == "" {
					continue
				}
				if in, ok := declared[cmd]; ok {
					if used[in] == nil {
						used[in] = map[string]bool{}
					}
					used[in][cmd] = true
					if !slices.Contains(byInstaller[in], cmd) {
						byInstaller[in] = append(byInstaller[in], cmd)
					}
					continue
				}
				if _, ok := everywhere[cmd]; ok {
					continue
				}
				if missing[cmd] == nil {
					missing[cmd] = map[string][]string{}
				}
				if !slices.Contains(missing[cmd][u.where], target) {
					missing[cmd][u.where] = append(missing[cmd][u.where], target)
				}
			}
		}
		line := "make " + target + ":"
		for _, in := range slices.Sorted(maps.Keys(byInstaller)) {
			slices.Sort(byInstaller[in])
			line += fmt.Sprintf(" [%s by make %s: %s]", in, strings.Join(r.installedBy(t, in), "/"), strings.Join(byInstaller[in], " "))
		}
		table = append(table, line)
	}
	for _, cmd := range slices.Sorted(maps.Keys(missing)) {
		for _, where := range slices.Sorted(maps.Keys(missing[cmd])) {
			t.Errorf("%s runs %s (make %s), which is not on every Debian system and which no installer those targets run names in its COMMANDS (%s)",
				where, cmd, strings.Join(missing[cmd][where], ", make "), installerScripts())
		}
	}
	for rel := range r.scripts {
		if !reached[rel] {
			t.Errorf("%s: no make target runs it (so nothing here checks what it needs)", rel)
		}
	}
	for _, in := range installers {
		checkInstaller(t, r, in, used[in.script])
	}
	t.Logf("installed commands by target (everywhere's commands left out):\n%s", strings.Join(table, "\n"))
}

// checkInstaller: each package of COMMANDS is installed by the installer
// or on every machine, each command of COMMANDS is run by a target that
// runs the installer, and (unless forTests) each package of PACKAGES
// provides a command of COMMANDS.
func checkInstaller(t *testing.T, r *repo, in installer, used map[string]bool) {
	t.Helper()
	commands, packages := r.declared(t, in.script)
	provides := map[string]bool{}
	for cmd, pkg := range commands {
		provides[pkg] = true
		if !used[cmd] {
			t.Errorf("%s: COMMANDS names %s, which no target that runs it runs", in.script, cmd)
		}
		if !slices.Contains(packages, pkg) && !debianRequired[pkg] && !prerequisites[pkg] {
			t.Errorf("%s: %s comes from package %s, which is neither in PACKAGES nor on every Debian system", in.script, cmd, pkg)
		}
	}
	if in.forTests {
		return
	}
	for _, p := range packages {
		if !provides[p] {
			t.Errorf("%s: PACKAGES installs %s, which provides no command of COMMANDS", in.script, p)
		}
	}
}

func installerScripts() string {
	var s []string
	for _, in := range installers {
		s = append(s, in.script)
	}
	return strings.Join(s, ", ")
}

// TestReach: a target reaches its prerequisites' and sub-makes' recipes,
// the scripts they run and those scripts' sourced files, and the
// installers among them; a command missing from every installer fails.
func TestReach(t *testing.T) {
	r := &repo{
		mk: parseMake("a: b\n\t$(MAKE) c\n\t./scripts/deps.sh\nb:\n\tfoo-b\nc:\n\tDEPS=0 ./scripts/kinddeps.sh\nd:\n\tlonely\n"),
		scripts: map[string]*script{
			"scripts/deps.sh":     parseSource(t, "scripts/deps.sh", 1, "ROOT=$(pwd)\n. \"$ROOT/scripts/oci.sh\"\nas_root() { \"$@\"; }\nas_root from-deps\n", nil),
			"scripts/kinddeps.sh": parseSource(t, "scripts/kinddeps.sh", 1, "ROOT=$(pwd)\nfrom-kind\n", nil),
			"scripts/oci.sh":      parseSource(t, "scripts/oci.sh", 1, "from-oci\n", nil),
		},
		recipes: map[string][]*script{}, functions: map[string]bool{}, wrappers: map[string]bool{"as_root": true},
	}
	for name, ru := range r.mk.rules {
		for _, l := range ru.recipe {
			r.recipes[name] = append(r.recipes[name], parseSource(t, "Makefile", l.line, l.text, nil))
		}
	}
	re := r.reach(t, "a")
	var got []string
	for _, u := range re.uses {
		got = append(got, chain(u.args, r.wrappers)...)
	}
	slices.Sort(got)
	want := []string{"$@", ".", "./scripts/deps.sh", "./scripts/kinddeps.sh", "as_root", "foo-b", "from-deps", "from-kind", "from-oci", "make", "pwd", "pwd"}
	if !slices.Equal(want, got) {
		t.Errorf("make a runs %v, want %v", got, want)
	}
	if !re.installers["scripts/deps.sh"] || !re.installers["scripts/kinddeps.sh"] || len(re.installers) != 2 {
		t.Errorf("make a reaches installers %v, want scripts/deps.sh and scripts/kinddeps.sh", re.installers)
	}
	if in := r.installedBy(t, "scripts/kinddeps.sh"); !slices.Equal(in, []string{"c"}) {
		t.Errorf("installedBy(kinddeps.sh) = %v, want [c]", in)
	}
	if re := r.reach(t, "d"); len(re.installers) != 0 {
		t.Errorf("make d reaches installers %v, want none", re.installers)
	}
}
