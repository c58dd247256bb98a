// Package version says which build of a sink is running: the release
// version (set at link time), the commit it was built from and the Go
// version. Every sink prints it for --version and exports it in /metrics
// as proxysinks_build_info.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release version, set at link time:
//
//	go build -ldflags "-X github.com/proxysinks/proxysinks/sinks/version.Version=v0.1.0"
//
// `make build` and `make image` set it from `git describe`.
var Version = "dev"

// Commit is the commit the binary was built from, set at link time like
// Version; when empty, the VCS revision Go stamped into the binary is used.
var Commit = ""

// Info is a build's identity.
type Info struct {
	Version string
	// Commit is the commit set at link time, else the VCS revision Go
	// stamped into the binary, with "-dirty" when the tree had changes;
	// "unknown" when the binary was built without either.
	Commit    string
	GoVersion string
}

// Get returns the running binary's build information.
func Get() Info {
	info := Info{Version: Version, Commit: "unknown", GoVersion: runtime.Version()}
	if Commit != "" {
		info.Commit = Commit
		return info
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		info.Commit = rev
		if modified == "true" {
			info.Commit += "-dirty"
		}
	}
	return info
}

// String is the --version line: "v0.1.0 (commit 1a2b3c4, go1.26.8)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s)", i.Version, i.Commit, i.GoVersion)
}
