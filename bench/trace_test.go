package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// syscallTrace counts this process's send and receive system calls
// (sendto, recvfrom, sendmsg, recvmsg) with the kernel's raw_syscalls
// tracepoint, to measure libraries that keep no counters (moby/ipvs). It
// is used inside the VM only; elsewhere it counts nothing.
type syscallTrace struct {
	dir string
}

const tracefs = "/sys/kernel/tracing"

func writeTrace(name, v string) error {
	return os.WriteFile(filepath.Join(tracefs, name), []byte(v), 0o644)
}

func startSyscallTrace(b *testing.B) *syscallTrace {
	if !nstest.InVM() {
		return &syscallTrace{}
	}
	if _, err := os.Stat(filepath.Join(tracefs, "events")); err != nil {
		if err := unix.Mount("nodev", tracefs, "tracefs", 0, ""); err != nil {
			b.Logf("no syscall tracing: mount tracefs: %v", err)
			return &syscallTrace{}
		}
	}
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		b.Logf("no syscall tracing: %v", err)
		return &syscallTrace{}
	}
	var pids []string
	for _, t := range tids {
		pids = append(pids, t.Name())
	}
	filter := fmt.Sprintf("id == %d || id == %d || id == %d || id == %d", unix.SYS_SENDTO, unix.SYS_RECVFROM, unix.SYS_SENDMSG, unix.SYS_RECVMSG)
	for _, step := range [][2]string{
		{"tracing_on", "0"},
		{"events/raw_syscalls/sys_enter/enable", "0"},
		{"buffer_size_kb", "4096"},
		{"trace", ""},
		{"options/event-fork", "1"},
		{"set_event_pid", strings.Join(pids, " ")},
		{"events/raw_syscalls/sys_enter/filter", filter},
		{"events/raw_syscalls/sys_enter/enable", "1"},
		{"tracing_on", "1"},
	} {
		if err := writeTrace(step[0], step[1]); err != nil {
			b.Logf("no syscall tracing: %s: %v", step[0], err)
			return &syscallTrace{}
		}
	}
	return &syscallTrace{dir: tracefs}
}

// stop ends the trace and returns the number of system calls counted: the
// events in the ring buffers plus those overwritten.
func (t *syscallTrace) stop() uint64 {
	if t.dir == "" {
		return 0
	}
	_ = writeTrace("tracing_on", "0")
	_ = writeTrace("events/raw_syscalls/sys_enter/enable", "0")
	cpus, _ := filepath.Glob(filepath.Join(tracefs, "per_cpu", "cpu*", "stats"))
	var n uint64
	for _, f := range cpus {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(l, ":")
			if ok && (k == "entries" || k == "overrun") {
				x, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				n += x
			}
		}
	}
	_ = writeTrace("set_event_pid", "")
	_ = writeTrace("events/raw_syscalls/sys_enter/filter", "0")
	return n
}
