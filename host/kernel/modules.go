package kernel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// The conntrack modules: nf_conntrack_ipv4 was merged into nf_conntrack in
// Linux 4.19, so a kernel with nf_conntrack has what nf_conntrack_ipv4 gave.
const (
	ModuleNFConntrack     = "nf_conntrack"
	ModuleNFConntrackIPv4 = "nf_conntrack_ipv4"
)

// Modules reports which modules the running kernel has: loaded ones from
// /proc/modules and built-in ones from modules.builtin.
type Modules struct {
	// Root is prefixed to /proc and /lib/modules paths (tests); "" is "/".
	Root string
	// Release is the kernel release whose modules.builtin is read; "" reads
	// the running kernel's.
	Release string
	// Modprobe runs modprobe for one module; nil execs "modprobe".
	Modprobe func(module string) error
}

// Present returns the set of modules that are loaded or built in.
func (m Modules) Present() (map[string]bool, error) {
	have := map[string]bool{}
	data, err := os.ReadFile(filepath.Join(m.Root, "/proc/modules"))
	if err != nil {
		return nil, fmt.Errorf("kernel: read loaded modules: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if name, _, ok := strings.Cut(line, " "); ok {
			have[name] = true
		}
	}
	release := m.Release
	if release == "" {
		if release, err = Release(); err != nil {
			return nil, err
		}
	}
	// A kernel without modules.builtin (a custom build) simply has no
	// built-in modules listed; loaded ones still count.
	if f, err := os.Open(filepath.Join(m.Root, "/lib/modules", release, "modules.builtin")); err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			name := strings.TrimSuffix(filepath.Base(s.Text()), ".ko")
			have[strings.ReplaceAll(name, "-", "_")] = true
		}
	}
	return have, nil
}

// MissingError lists the modules that are neither loaded nor loadable.
type MissingError struct {
	Modules []string
	Causes  map[string]error
}

func (e *MissingError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kernel: required modules missing: %s (load them with: modprobe -a %s; to load them at boot, list them in a file in /etc/modules-load.d/)",
		strings.Join(e.Modules, ", "), strings.Join(e.Modules, " "))
	for _, m := range e.Modules {
		if c := e.Causes[m]; c != nil {
			fmt.Fprintf(&b, "; %s: %v", m, c)
		}
	}
	return b.String()
}

// Ensure loads each wanted module that is not present, and returns a
// *MissingError naming those that could not be loaded.
func (m Modules) Ensure(wanted []string) error {
	have, err := m.Present()
	if err != nil {
		return err
	}
	modprobe := m.Modprobe
	if modprobe == nil {
		modprobe = execModprobe
	}
	missing := &MissingError{Causes: map[string]error{}}
	for _, mod := range wanted {
		// nf_conntrack_ipv4 merged into nf_conntrack in 4.19; either will do.
		if have[mod] || (mod == ModuleNFConntrackIPv4 && have[ModuleNFConntrack]) {
			continue
		}
		if err := modprobe(mod); err != nil {
			missing.Modules = append(missing.Modules, mod)
			missing.Causes[mod] = err
		}
	}
	if len(missing.Modules) > 0 {
		sort.Strings(missing.Modules)
		return missing
	}
	return nil
}

func execModprobe(module string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("modprobe", "--", module)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return errors.New("modprobe not found")
		}
		return fmt.Errorf("modprobe %s: %w: %s", module, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
