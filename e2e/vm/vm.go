// Package vm boots Debian's cloud kernel under qemu (TCG, no KVM needed) with
// an initramfs holding busybox, the kernel modules the project needs (IPVS,
// ipset, netfilter, bridges, dummy and veth links), ipvsadm, ipset, iptables
// and ip, and runs one command inside: typically a static Go test binary.
//
// The build machines' kernel has no IPVS and no dummy links; every test that
// needs them runs here. The base image is built once per content hash and
// cached under .cache/vm; a run costs one boot plus the command. The guest's
// console output is streamed back, and its exit status comes back through a
// marker line. A guest that hangs is killed after a timeout, and one that
// crashes (kernel panic) is reported as such.
package vm

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrTimeout is returned when the guest did not finish in time and was killed.
var ErrTimeout = errors.New("vm: guest did not finish in time and was killed (hung guest?)")

// ErrNoStatus is returned when the guest stopped without reporting the exit
// status of its command: a kernel panic, a crash of init, or qemu failing.
var ErrNoStatus = errors.New("vm: guest stopped without reporting an exit status (kernel panic or crash?)")

// Options configures one run. The zero value is usable.
type Options struct {
	// CacheDir holds the kernel unpacked by `make deps` and the cached base
	// images. Default: the .cache directory at the workspace root, or
	// $PROXYSINKS_CACHE.
	CacheDir string
	// Timeout bounds the whole run, boot included. Default: 10 minutes.
	Timeout time.Duration
	// Output receives the guest's console, one line at a time, without the
	// exit marker. Default: os.Stdout.
	Output io.Writer
	// Files are host files copied into the guest's /job/bin, executable and on
	// $PATH, keyed by their guest name.
	Files map[string]string
	// WorkDir is a host directory copied to /job/work, the command's working
	// directory (for example a Go package's testdata). Optional.
	WorkDir string
	// Env holds extra NAME=value pairs exported to the command.
	Env []string
	// CPUs and MemoryMB size the guest. Defaults: 2 and 2048.
	CPUs, MemoryMB int
	// NIC, when not nil, gives the guest a network card. Default: the guest
	// has no network device at all.
	NIC *NIC
}

// NIC is a virtio network card on qemu's user-mode network with
// restrict=on: the guest's eth0 gets GuestAddr and reaches nothing of the
// host or beyond except the forwarded ports.
type NIC struct {
	// Forwards connect TCP addresses on the guest's network to host
	// addresses.
	Forwards []Forward
}

// GuestAddr is the guest's address on its NIC (qemu's user-mode network is
// 10.0.2.0/24).
const GuestAddr = "10.0.2.15/24"

// Forward makes the guest's connections to Guest (an address on
// 10.0.2.0/24 other than the guest's own and qemu's .2 and .3, for example
// 10.0.2.100:6443) reach Host (for example 127.0.0.1:34567) on the host:
// qemu starts busybox nc on the host for each connection.
type Forward struct {
	Guest, Host string
}

// args returns qemu's arguments for the NIC.
func (n *NIC) args() ([]string, error) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		return nil, errors.New("vm: busybox not found (run make deps: busybox-static)")
	}
	netdev := "user,id=n0,restrict=on"
	for _, f := range n.Forwards {
		gh, gp, err := net.SplitHostPort(f.Guest)
		if err != nil {
			return nil, fmt.Errorf("vm: forward guest address %q: %w", f.Guest, err)
		}
		hh, hp, err := net.SplitHostPort(f.Host)
		if err != nil {
			return nil, fmt.Errorf("vm: forward host address %q: %w", f.Host, err)
		}
		netdev += fmt.Sprintf(",guestfwd=tcp:%s:%s-cmd:%s nc %s %s", gh, gp, busybox, hh, hp)
	}
	return []string{"-netdev", netdev, "-device", "virtio-net-pci,netdev=n0,romfile="}, nil
}

// nicSetup is the guest's shell code bringing eth0 up.
const nicSetup = "modprobe virtio_pci && modprobe virtio_net && ip link set eth0 up && ip addr add " + GuestAddr + " dev eth0 || { echo 'vm: NIC setup failed'; exit 125; }\n"

func (o *Options) defaults() error {
	if o.CacheDir == "" {
		dir, err := DefaultCacheDir()
		if err != nil {
			return err
		}
		o.CacheDir = dir
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Output == nil {
		o.Output = os.Stdout
	}
	if o.CPUs == 0 {
		o.CPUs = 2
	}
	if o.MemoryMB == 0 {
		o.MemoryMB = 2048
	}
	return nil
}

// DefaultCacheDir returns $PROXYSINKS_CACHE, or .cache at the workspace root
// (the directory holding go.work, searched upwards from the working
// directory).
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("PROXYSINKS_CACHE"); d != "" {
		return d, nil
	}
	root, err := WorkspaceRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache"), nil
}

// WorkspaceRoot returns the directory holding go.work, searched upwards from
// the working directory.
func WorkspaceRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("vm: no go.work above the working directory; run from inside the proxysinks checkout")
		}
		dir = parent
	}
}

// Run boots the VM, runs command with /bin/sh inside and returns its exit
// status. The error is non-nil when the guest could not be started, timed
// out (ErrTimeout) or stopped without a status (ErrNoStatus); a command that
// fails is a non-zero status with a nil error.
func Run(ctx context.Context, command string, opt Options) (int, error) {
	if err := opt.defaults(); err != nil {
		return -1, err
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return -1, errors.New("vm: qemu-system-x86_64 not found (run make deps)")
	}
	k, err := FindKernel(opt.CacheDir)
	if err != nil {
		return -1, err
	}
	base, err := BuildBase(opt.CacheDir, k)
	if err != nil {
		return -1, err
	}
	tmp, err := os.MkdirTemp("", "proxysinks-vm-")
	if err != nil {
		return -1, err
	}
	defer os.RemoveAll(tmp)

	marker := "PROXYSINKS-EXIT-" + nonce()
	initrd := filepath.Join(tmp, "initrd.cpio")
	if err := buildJob(tmp, base, initrd, command, marker, opt); err != nil {
		return -1, err
	}

	args := []string{
		"-nodefaults", "-no-reboot", "-display", "none",
		"-accel", "tcg,thread=multi",
		"-smp", strconv.Itoa(opt.CPUs), "-m", strconv.Itoa(opt.MemoryMB),
		"-kernel", k.Vmlinuz(), "-initrd", initrd,
		// loglevel=5 lets the kernel's own warnings through, and with
		// them the stack of a soft lockup (printed at the default level,
		// 4); softlockup_all_cpu_backtrace adds every CPU's stack, so a
		// hung guest's console says where it hung. cryptomgr.notests=1
		// skips the crypto self-tests at boot (no test here needs them):
		// once, on a loaded host, a guest's boot spun for minutes in
		// alg_test (a soft lockup on one vCPU under TCG).
		"-append", "console=ttyS0 quiet loglevel=5 softlockup_all_cpu_backtrace=1 panic=-1 cryptomgr.notests=1 rdinit=/init",
		"-serial", "stdio",
	}
	if opt.NIC != nil {
		nic, err := opt.NIC.args()
		if err != nil {
			return -1, err
		}
		args = append(args, nic...)
	}
	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, args...)
	cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	var qemuErr strings.Builder
	cmd.Stderr = &qemuErr
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("vm: start qemu: %w", err)
	}
	done := make(chan scanResult, 1)
	go func() { done <- scan(pr, marker, opt.Output) }()
	waitErr := cmd.Wait()
	pw.Close()
	r := <-done

	last := strings.Join(r.tail, "\n")
	switch {
	case r.found:
		return r.status, nil
	case ctx.Err() == context.DeadlineExceeded:
		return -1, fmt.Errorf("%w after %s; last console lines:\n%s", ErrTimeout, opt.Timeout, last)
	case ctx.Err() != nil:
		return -1, fmt.Errorf("vm: run cancelled: %w", ctx.Err())
	case waitErr != nil:
		return -1, fmt.Errorf("vm: qemu failed: %v: %s", waitErr, strings.TrimSpace(qemuErr.String()))
	default:
		return -1, fmt.Errorf("%w; last console lines:\n%s", ErrNoStatus, last)
	}
}

// scanResult is what scan found on the console.
type scanResult struct {
	status int      // the command's exit status, if found
	found  bool     // whether the marker line was seen
	tail   []string // the last console lines, for error messages
}

// scan copies console lines to out until the marker line, and keeps the last
// lines for error messages.
func scan(r io.Reader, marker string, out io.Writer) (res scanResult) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for s.Scan() {
		line := strings.TrimRight(s.Text(), "\r")
		if res.found {
			continue // the kernel's power-down messages
		}
		if v, ok := strings.CutPrefix(line, marker+"="); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				res.status, res.found = n, true
				continue
			}
		}
		fmt.Fprintln(out, line)
		res.tail = append(res.tail, line)
		if len(res.tail) > 20 {
			res.tail = res.tail[1:]
		}
	}
	io.Copy(io.Discard, r)
	return res
}

// buildJob writes the per-run archive (command, environment, files) and
// appends it to a copy of the base image: the kernel unpacks concatenated
// cpio archives in order.
func buildJob(tmp, base, initrd, command, marker string, opt Options) error {
	stage := filepath.Join(tmp, "stage")
	job := filepath.Join(stage, "job")
	if err := os.MkdirAll(filepath.Join(job, "bin"), 0o755); err != nil {
		return err
	}
	if opt.NIC != nil {
		command = nicSetup + command
	}
	if err := os.WriteFile(filepath.Join(job, "cmd.sh"), []byte(command+"\n"), 0o755); err != nil {
		return err
	}
	env := []string{"marker=" + shellQuote(marker), "export " + "PROXYSINKS_VM=1"}
	for _, kv := range opt.Env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return fmt.Errorf("vm: bad environment entry %q (want NAME=value)", kv)
		}
		env = append(env, "export "+name+"="+shellQuote(val))
	}
	if err := os.WriteFile(filepath.Join(job, "env"), []byte(strings.Join(env, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	for name, host := range opt.Files {
		if strings.Contains(name, "/") {
			return fmt.Errorf("vm: file name %q must not contain a slash", name)
		}
		dst := filepath.Join(job, "bin", name)
		if err := copyFile(host, dst); err != nil {
			return fmt.Errorf("vm: copy %s into the guest: %w", host, err)
		}
		if err := os.Chmod(dst, 0o755); err != nil {
			return err
		}
	}
	if opt.WorkDir != "" {
		if err := os.CopyFS(filepath.Join(job, "work"), os.DirFS(opt.WorkDir)); err != nil {
			return fmt.Errorf("vm: copy %s into the guest: %w", opt.WorkDir, err)
		}
	}
	overlay := filepath.Join(tmp, "job.cpio")
	if err := writeCPIO(stage, overlay); err != nil {
		return err
	}
	out, err := os.Create(initrd)
	if err != nil {
		return err
	}
	defer out.Close()
	for _, p := range []string{base, overlay} {
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, in)
		in.Close()
		if err != nil {
			return err
		}
	}
	return out.Close()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func nonce() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
