// Package nstest gives kernel tests a fresh network namespace of their own,
// so that nothing a test programs can reach the host's namespace.
//
// A namespace is created by unshare(2) on a locked OS thread that is thrown
// away afterwards; the test keeps a file descriptor to it and t.Cleanup closes
// it, which destroys the namespace and everything in it. Work that must run
// inside (exec'ing ipset or iptables, opening sockets) goes through Do.
//
// A test whose requirements are missing (not root, no namespaces, a kernel
// feature absent) is skipped with a message naming what is missing. Inside the
// project's test VM (PROXYSINKS_VM=1) the same conditions fail the test
// instead: there, everything must be present, and a skip would hide a broken
// image.
package nstest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// VMEnv is the environment variable the test VM sets to "1" in its guest.
const VMEnv = "PROXYSINKS_VM"

// InVM reports whether the test runs inside the project's real-kernel VM.
func InVM() bool { return os.Getenv(VMEnv) == "1" }

// Missing stops the test because what it needs is not there: a skip on a
// developer machine, a failure in the VM, where every requirement must hold.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := "missing: " + fmt.Sprintf(format, args...)
	if InVM() {
		t.Fatal(msg + " (fatal inside the test VM)")
	}
	t.Skip(msg)
}

// NetNS is a network namespace owned by one test.
type NetNS struct {
	fd int
}

// New creates a fresh network namespace with its loopback link up, and
// destroys it when the test ends. It calls Missing when the process may not
// create namespaces.
func New(t testing.TB) *NetNS {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "root privileges (CAP_SYS_ADMIN) to create a network namespace")
	}
	ns, err := Create()
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) {
			Missing(t, "network namespaces: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	return ns
}

// Create makes a fresh network namespace with lo up, for code that manages
// its lifetime itself (a benchmark creates one per iteration); Close
// destroys it. Tests use New.
func Create() (*NetNS, error) {
	fd, err := create()
	if err != nil {
		return nil, fmt.Errorf("nstest: create network namespace: %w", err)
	}
	ns := &NetNS{fd: fd}
	if err := ns.Do(loopbackUp); err != nil {
		ns.Close()
		return nil, fmt.Errorf("nstest: bring up lo in the new namespace: %w", err)
	}
	return ns, nil
}

// Close releases the namespace; the kernel destroys it once nothing else
// holds it.
func (n *NetNS) Close() { unix.Close(n.fd) }

// create unshares a network namespace on a locked thread and returns a file
// descriptor for it. The thread stays locked when its goroutine returns, so
// the runtime discards it instead of reusing a thread in the wrong namespace.
func create() (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- result{-1, fmt.Errorf("unshare(CLONE_NEWNET): %w", err)}
			return
		}
		fd, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			err = fmt.Errorf("open namespace: %w", err)
		}
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}

// FD returns a file descriptor of the namespace, for APIs that take one
// (for example netlink.Config.NetNS). It stays valid until the test ends.
func (n *NetNS) FD() int { return n.fd }

// Path returns a path that opens the namespace, for tools such as nsenter
// --net=PATH.
func (n *NetNS) Path() string { return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), n.fd) }

// Do runs f on an OS thread that has entered the namespace. Sockets f opens
// and processes f starts belong to the namespace. The thread is discarded
// afterwards.
func (n *NetNS) Do(f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			ch <- fmt.Errorf("nstest: setns: %w", err)
			return
		}
		ch <- f()
	}()
	return <-ch
}

// Run runs a command inside the namespace and returns its combined output. A
// non-zero exit is an error that carries the output.
func (n *NetNS) Run(name string, args ...string) (string, error) {
	var out []byte
	err := n.Do(func() error {
		var err error
		out, err = exec.Command(name, args...).CombinedOutput()
		return err
	})
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// MustRun is Run that fails the test on error.
func (n *NetNS) MustRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := n.Run(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// LookPath returns the path of a command the test needs, or calls Missing.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "command %q (run make deps)", name)
	}
	return p
}

// loopbackUp sets the IFF_UP flag on lo in the calling thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}
