package nftables

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"golang.org/x/sys/unix"
)

// MinKernel is the oldest kernel kube-proxy's nftables mode runs on
// (utilkernel.NFTablesKubeProxyKernelVersion): older kernels lack
// expressions and set features its ruleset uses.
const MinKernel = "5.13"

// checkKernel checks that the kernel can run the ruleset before anything
// is written: its version (unless skipVersion), nf_tables itself, and
// every object and expression of the ruleset in each family (probeKernel).
func checkKernel(k kernel, skipVersion bool, cfg *Config) error {
	if !skipVersion {
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			return fmt.Errorf("nftables: read the kernel version: %w", err)
		}
		release := string(bytes.TrimRight(u.Release[:], "\x00"))
		if !versionAtLeast(release, MinKernel) {
			return fmt.Errorf("nftables: kernel %s is older than %s, the oldest kube-proxy's nftables mode runs on", release, MinKernel)
		}
	}
	if _, err := k.generation(); err != nil {
		return fmt.Errorf("nftables: the kernel does not answer nf_tables requests (no nf_tables module?): %w", err)
	}
	for _, f := range []struct {
		on  bool
		fam nft.Family
	}{{cfg.IPv4, nft.FamilyIPv4}, {cfg.IPv6, nft.FamilyIPv6}} {
		if f.on {
			if err := probeKernel(k, f.fam, cfg.Ruleset); err != nil {
				return err
			}
		}
	}
	return nil
}

// versionAtLeast compares the leading "major.minor" of a kernel release
// ("6.18.0-1-amd64") with min.
func versionAtLeast(release, min string) bool {
	have, want := majorMinor(release), majorMinor(min)
	if have[0] != want[0] {
		return have[0] > want[0]
	}
	return have[1] >= want[1]
}

func majorMinor(v string) [2]int {
	var out [2]int
	parts := strings.SplitN(v, ".", 3)
	for i := 0; i < 2 && i < len(parts); i++ {
		p := parts[i]
		end := 0
		for end < len(p) && p[end] >= '0' && p[end] <= '9' {
			end++
		}
		out[i], _ = strconv.Atoi(p[:end])
	}
	return out
}
