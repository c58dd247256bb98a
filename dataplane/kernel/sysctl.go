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

// Setting is one sysctl and the value IPVS mode needs.
type Setting struct {
	Name  string
	Value int
}

// IPVSSysctls returns the sysctls kube-proxy's IPVS mode sets on a kernel of
// the given version. The vs/* ones exist only once ip_vs is loaded.
func IPVSSysctls(v Version, strictARP bool) []Setting {
	s := []Setting{
		{"net/ipv4/vs/conntrack", 1},
		{"net/ipv4/vs/expire_nodest_conn", 1},
		{"net/ipv4/vs/expire_quiescent_template", 1},
		{"net/ipv4/ip_forward", 1},
	}
	// Between 4.1 and 5.9, conn_reuse_mode=1 delays reused connections by a
	// second; later kernels fixed it.
	if v.AtLeast(4, 1) && !v.AtLeast(5, 9) {
		s = append(s, Setting{"net/ipv4/vs/conn_reuse_mode", 0})
	}
	if strictARP {
		s = append(s, Setting{"net/ipv4/conf/all/arp_ignore", 1}, Setting{"net/ipv4/conf/all/arp_announce", 2})
	}
	return s
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
