package benchmatrix

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stallChildEnv makes the test binary the child of TestStallWatch.
const stallChildEnv = "PROXYSINKS_STALL_CHILD"

// TestStallWatch stops a process running a stall watch for 200 ms
// (SIGSTOP, SIGCONT): the watch must report a wake-up at least that
// late, as it would a VM whose CPUs the emulator did not run.
func TestStallWatch(t *testing.T) {
	if os.Getenv(stallChildEnv) != "" {
		stallChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStallWatch$")
	cmd.Env = append(os.Environ(), stallChildEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := bufio.NewScanner(outPipe)
	line := func() string {
		if !out.Scan() {
			t.Fatalf("child ended: %v", out.Err())
		}
		return out.Text()
	}
	realtime := line()
	if os.Geteuid() == 0 && realtime != "realtime=true" {
		t.Errorf("as root the watch's thread should be SCHED_FIFO; child says %s", realtime)
	}
	const stopped = 200 * time.Millisecond
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A stop takes effect when one thread of the child has run to take
	// the signal, which on a busy machine can be milliseconds: the watch's
	// thread keeps waking until then, so the stop is timed from when every
	// thread is stopped.
	waitStopped(t, cmd.Process.Pid)
	time.Sleep(stopped)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(in, "take")
	ns, err := strconv.ParseInt(strings.TrimPrefix(line(), "worst="), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// The thread was asleep or due when the process stopped; it woke at
	// the earliest when the process went on.
	if got := time.Duration(ns); got < stopped-stallTick {
		t.Errorf("stall watch saw %v for a process stopped %v", got, stopped)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("child: %v", err)
	}
}

// waitStopped waits until every thread of process pid is stopped.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			t.Fatalf("threads of %d: %v (%d found)", pid, err, len(tasks))
		}
		running := ""
		for _, task := range tasks {
			b, err := os.ReadFile(task)
			if err != nil {
				t.Fatal(err)
			}
			if f := statFields(string(b)); len(f) == 0 || f[0] != "T" {
				running = task
			}
		}
		if running == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not stopped 10 s after SIGSTOP", running)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// stallChild runs a watch, prints whether it is realtime, and for each
// line on stdin prints the latest wake-up since the last.
func stallChild() {
	w := startStallWatch()
	defer w.close()
	fmt.Printf("realtime=%v\n", w.realtime.Load())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Printf("worst=%d\n", w.take())
	}
}
