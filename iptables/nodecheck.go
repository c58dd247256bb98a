package iptables

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/proxysinks/proxysinks/host/xtables"
)

// IPTablesVersioner can query the current iptables version.
type IPTablesVersioner interface {
	// GetVersion returns "X.Y.Z".
	GetVersion() (string, error)
}

// KernelCompatTester tests whether the required kernel capabilities are
// present to run the iptables proxier.
type KernelCompatTester interface {
	IsCompatible() error
}

// LinuxKernelCompatTester is the KernelCompatTester of Linux: it checks that
// the kernel has the netfilter sysctls the Proxier relies on.
type LinuxKernelCompatTester struct{}

// IsCompatible returns an error naming the missing kernel feature, if any.
func (LinuxKernelCompatTester) IsCompatible() error {
	const routeLocalnet = "/proc/sys/net/ipv4/conf/all/route_localnet"
	if _, err := os.Stat(routeLocalnet); err != nil {
		return fmt.Errorf("iptables: kernel lacks %s: %w", routeLocalnet, err)
	}
	return nil
}

// MinIPTablesVersion is the oldest iptables the Proxier's rules work with:
// iptables-restore --noflush with -w and the comment match.
const MinIPTablesVersion = "1.4.11"

// CanUseIPTablesProxier reports whether this node can run the Proxier: an
// iptables at least MinIPTablesVersion and a compatible kernel. It returns
// false with the reason as error otherwise.
func CanUseIPTablesProxier(iptver IPTablesVersioner, kcompat KernelCompatTester) (bool, error) {
	v, err := iptver.GetVersion()
	if err != nil {
		return false, fmt.Errorf("iptables: get version: %w", err)
	}
	have, err := parseVersion(v)
	if err != nil {
		return false, err
	}
	want, _ := parseVersion(MinIPTablesVersion)
	for i := range want {
		if have[i] != want[i] {
			if have[i] < want[i] {
				return false, fmt.Errorf("iptables: version %s is older than %s", v, MinIPTablesVersion)
			}
			break
		}
	}
	if err := kcompat.IsCompatible(); err != nil {
		return false, err
	}
	return true, nil
}

func parseVersion(v string) ([3]int, error) {
	var out [3]int
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) != 3 {
		return out, fmt.Errorf("iptables: malformed version %q, want X.Y.Z", v)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, fmt.Errorf("iptables: malformed version %q, want X.Y.Z", v)
		}
		out[i] = n
	}
	return out, nil
}

// ExecVersioner asks the iptables binary of a backend for its version.
type ExecVersioner struct {
	Backend xtables.Backend
	// Run runs the command; nil means xtables.Exec.
	Run xtables.Runner
}

var versionRE = regexp.MustCompile(`v([0-9]+\.[0-9]+\.[0-9]+)`)

// GetVersion returns the version iptables prints ("iptables v1.8.9
// (nf_tables)" gives "1.8.9").
func (e ExecVersioner) GetVersion() (string, error) {
	run := e.Run
	if run == nil {
		run = xtables.Exec
	}
	name := "iptables"
	if e.Backend != "" {
		name = "iptables-" + string(e.Backend)
	}
	out, err := run(name, []string{"--version"}, nil)
	if err != nil {
		return "", err
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("iptables: no version in %q", strings.TrimSpace(string(out)))
	}
	return string(m[1]), nil
}
