// Package kernel reads and prepares the running kernel for any sink: its
// version, the modules it has (loaded with modprobe when missing, with a
// clear error naming what could not be loaded and how to load it) and
// integer sysctls, written only when they differ. Which modules and
// sysctls a sink needs is the sink's (dataplane for the IPVS sinks).
package kernel

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Version is a kernel release's numeric part, e.g. 6.1.0 of
// "6.1.0-57-cloud-amd64".
type Version struct{ Major, Minor, Patch int }

// ParseVersion parses the leading numbers of a kernel release string.
func ParseVersion(release string) (Version, error) {
	num := release
	if i := strings.IndexFunc(release, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }); i >= 0 {
		num = release[:i]
	}
	parts := strings.Split(strings.TrimSuffix(num, "."), ".")
	if len(parts) < 2 {
		return Version{}, fmt.Errorf("kernel: cannot parse version %q", release)
	}
	var v [3]int
	for i := 0; i < len(parts) && i < 3; i++ {
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return Version{}, fmt.Errorf("kernel: cannot parse version %q", release)
		}
		v[i] = n
	}
	return Version{v[0], v[1], v[2]}, nil
}

// AtLeast reports whether v >= major.minor.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// String returns "major.minor.patch".
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Release returns the running kernel's release string (uname -r).
func Release() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("kernel: uname: %w", err)
	}
	return unix.ByteSliceToString(u.Release[:]), nil
}

// Running returns the running kernel's version.
func Running() (Version, error) {
	r, err := Release()
	if err != nil {
		return Version{}, err
	}
	return ParseVersion(r)
}
