package bench

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// syscallCounter counts this process's send and receive system calls
// (sendto, recvfrom, sendmsg, recvmsg) with perf counters on the kernel's
// syscall tracepoints, as `perf stat -e syscalls:sys_enter_sendto` does, to
// measure libraries that keep no counters (moby/ipvs). It runs inside the
// VM only; elsewhere, or when the kernel lacks the tracepoints, it counts
// nothing and stop returns 0.
type syscallCounter struct {
	fds []int
}

const tracefs = "/sys/kernel/tracing"

func startSyscallTrace(b *testing.B) *syscallCounter {
	if !nstest.InVM() {
		return &syscallCounter{}
	}
	if _, err := os.Stat(filepath.Join(tracefs, "events")); err != nil {
		if err := unix.Mount("nodev", tracefs, "tracefs", 0, ""); err != nil {
			b.Logf("no syscall counting: mount tracefs: %v", err)
			return &syscallCounter{}
		}
	}
	var ids []uint64
	for _, name := range []string{"sendto", "recvfrom", "sendmsg", "recvmsg"} {
		raw, err := os.ReadFile(filepath.Join(tracefs, "events", "syscalls", "sys_enter_"+name, "id"))
		if err != nil {
			b.Logf("no syscall counting: %v", err)
			return &syscallCounter{}
		}
		id, _ := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
		ids = append(ids, id)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		b.Logf("no syscall counting: %v", err)
		return &syscallCounter{}
	}
	c := &syscallCounter{}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		for _, id := range ids {
			attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: id, Bits: unix.PerfBitInherit}
			attr.Size = uint32(unsafe.Sizeof(attr))
			fd, err := unix.PerfEventOpen(&attr, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
			if err != nil {
				c.close()
				b.Logf("no syscall counting: perf_event_open: %v", err)
				return &syscallCounter{}
			}
			c.fds = append(c.fds, fd)
		}
	}
	return c
}

func (c *syscallCounter) close() {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	c.fds = nil
}

// stop returns the system calls counted since start (0 when not counting).
func (c *syscallCounter) stop() uint64 {
	var n uint64
	buf := make([]byte, 8)
	for _, fd := range c.fds {
		if k, err := unix.Read(fd, buf); err == nil && k == 8 {
			n += binary.NativeEndian.Uint64(buf)
		}
	}
	c.close()
	return n
}
