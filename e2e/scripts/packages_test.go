package scripts

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCommandPackages checks the declared packages against this machine's
// dpkg where it runs: the required ones are Priority required, and each
// command of an installed package (the installers' COMMANDS and
// everywhere) is that package's file.
func TestCommandPackages(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("no dpkg-query: not a Debian system")
	}
	required := slices.Sorted(maps.Keys(debianRequired))
	out, err := exec.Command("dpkg-query", append([]string{"-W", "-f=${Package} ${Priority}\n"}, required...)...).Output()
	if err != nil {
		t.Fatalf("dpkg-query %v: %v", required, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if pkg, prio, _ := strings.Cut(line, " "); prio != "required" {
			t.Errorf("package %s: priority %q, not required: not on every Debian system", pkg, prio)
		}
	}
	r := loadRepo(t)
	type decl struct{ pkg, by string }
	commands := map[string][]decl{}
	for cmd, pkg := range everywhere {
		commands[cmd] = append(commands[cmd], decl{pkg, "everywhere"})
	}
	for _, in := range installers {
		c, _ := r.declared(t, in.script)
		for cmd, pkg := range c {
			commands[cmd] = append(commands[cmd], decl{pkg, in.script + "'s COMMANDS"})
		}
	}
	var pkgs []string
	for _, ds := range commands {
		for _, d := range ds {
			if d.pkg != "go" && !slices.Contains(pkgs, d.pkg) {
				pkgs = append(pkgs, d.pkg)
			}
		}
	}
	installed := installedPackages(pkgs)
	paths := map[string][]string{} // command -> its file, and the file it links to
	for cmd, ds := range commands {
		if !slices.ContainsFunc(ds, func(d decl) bool { return installed[d.pkg] }) {
			continue
		}
		path := systemPath(cmd)
		if path == "" {
			t.Errorf("%s is installed but %s is in none of /usr/sbin, /usr/bin, /sbin, /bin", ds[0].pkg, cmd)
			continue
		}
		paths[cmd] = []string{path}
		if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
			paths[cmd] = append(paths[cmd], real) // /usr/bin/awk -> mawk (alternatives)
		}
	}
	var files []string
	for _, p := range paths {
		files = append(files, p...)
	}
	owners := fileOwners(files)
	checked := 0
	for cmd, ds := range commands {
		for _, d := range ds {
			if !installed[d.pkg] || paths[cmd] == nil {
				continue
			}
			var all []string
			for _, p := range paths[cmd] {
				all = append(all, owners[p]...)
			}
			if !slices.Contains(all, d.pkg) {
				t.Errorf("%s: %v belongs to %v, not to %s as %s says", cmd, paths[cmd], all, d.pkg, d.by)
			}
			checked++
		}
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
