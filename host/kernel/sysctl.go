package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Sysctl reads and writes integer sysctls under /proc/sys. Network sysctls
// belong to the network namespace of the thread that opens them.
type Sysctl struct {
	// Root replaces /proc/sys (tests); "" is /proc/sys.
	Root string
}

func (s Sysctl) path(name string) string {
	root := s.Root
	if root == "" {
		root = "/proc/sys"
	}
	return filepath.Join(root, filepath.FromSlash(strings.ReplaceAll(name, ".", "/")))
}

// Get returns the value of a sysctl such as "net/ipv4/ip_forward".
func (s Sysctl) Get(name string) (int, error) {
	data, err := os.ReadFile(s.path(name))
	if err != nil {
		return 0, fmt.Errorf("kernel: read sysctl %s: %w", name, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("kernel: sysctl %s holds %q, not an integer", name, strings.TrimSpace(string(data)))
	}
	return v, nil
}

// Set writes a sysctl.
func (s Sysctl) Set(name string, value int) error {
	if err := os.WriteFile(s.path(name), []byte(strconv.Itoa(value)), 0o644); err != nil {
		return fmt.Errorf("kernel: set sysctl %s=%d: %w", name, value, err)
	}
	return nil
}

// EnsureSysctl sets a sysctl to value unless it already holds it, and
// reports whether it wrote.
func EnsureSysctl(s Sysctl, name string, value int) (bool, error) {
	cur, err := s.Get(name)
	if err != nil {
		return false, err
	}
	if cur == value {
		return false, nil
	}
	return true, s.Set(name, value)
}

// Setting is one sysctl and the value a sink needs in it.
type Setting struct {
	Name  string
	Value int
}

// EnsureAll applies settings in order and returns the number written. It
// stops at the first error, which names the sysctl.
func EnsureAll(s Sysctl, settings []Setting) (int, error) {
	n := 0
	for _, st := range settings {
		wrote, err := EnsureSysctl(s, st.Name, st.Value)
		if err != nil {
			return n, err
		}
		if wrote {
			n++
		}
	}
	return n, nil
}
