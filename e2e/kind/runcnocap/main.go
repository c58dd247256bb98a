// Command runc-nocap is an OCI runtime wrapper for machines whose capability
// bounding set lacks some capabilities (here CAP_SYS_RESOURCE): runc fails
// every privileged container there with "unable to apply caps: operation not
// permitted", because a privileged container asks for all capabilities.
//
// On "create" and "run" (and "exec" with a --process file: docker exec
// --privileged) it removes the capabilities named in
// RUNC_NOCAP_DROP (default CAP_SYS_RESOURCE), or, when RUNC_NOCAP_DROP is
// "auto", those missing from its own bounding set, from every capability set
// of the bundle's config.json (or the process file), then executes the real runc (RUNC_NOCAP_RUNC,
// default /usr/sbin/runc, else runc on PATH) with the same arguments. Every
// other command goes to runc unchanged.
//
// It serves as dockerd's default runtime (scripts/docker.sh) and as the
// runc binary of containerd inside the offline kind node image.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "runc-nocap: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	runc, err := realRunc()
	if err != nil {
		return err
	}
	cmd, bundle, process := parse(args)
	if cmd == "create" || cmd == "run" || (cmd == "exec" && process != "") {
		drop, err := dropList(os.Getenv("RUNC_NOCAP_DROP"))
		if err != nil {
			return err
		}
		if cmd == "exec" {
			err = editProcess(process, drop)
		} else {
			err = editBundle(bundle, drop)
		}
		if err != nil {
			return err
		}
	}
	return syscall.Exec(runc, append([]string{runc}, args...), os.Environ())
}

// realRunc finds the runc binary to execute.
func realRunc() (string, error) {
	if p := os.Getenv("RUNC_NOCAP_RUNC"); p != "" {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc.real"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("runc")
	if err != nil {
		return "", fmt.Errorf("find runc: %w", err)
	}
	return p, nil
}
