package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// benchSizes returns the kernel benchmarks' cluster sizes (services):
// PROXYSINKS_BENCH_SERVICES, comma-separated, default 1000.
func benchSizes(b *testing.B) []int {
	v := os.Getenv("PROXYSINKS_BENCH_SERVICES")
	if v == "" {
		return []int{1000}
	}
	var sizes []int
	for _, f := range splitComma(v) {
		n, err := strconv.Atoi(f)
		if err != nil {
			b.Fatalf("PROXYSINKS_BENCH_SERVICES: %v", err)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// timeoutRunner runs the iptables tools in ns, killing any that runs
// longer than timeout.
func timeoutRunner(ns *nstest.NetNS, timeout time.Duration) xtables.Runner {
	return func(name string, args []string, stdin []byte) ([]byte, error) {
		var out []byte
		err := ns.Do(func() error {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, name, args...)
			if stdin != nil {
				cmd.Stdin = bytes.NewReader(stdin)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			var err error
			out, err = cmd.Output()
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w", name, context.DeadlineExceeded)
			}
			if err != nil {
				return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
			}
			return nil
		})
		return out, err
	}
}

func errorsIsTimeout(err error) bool { return errors.Is(err, context.DeadlineExceeded) }

// processCPU returns the CPU time (user and system, every thread, the
// garbage collector included) the process used so far, in nanoseconds: on
// a shared machine it measures the sink's cost where wall time measures
// the load.
func processCPU() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// childCPU returns the CPU time (user and system) of the child processes
// that ended so far, in nanoseconds: the iptables-restore and
// iptables-save runs, the kernel's work on their transactions included.
func childCPU() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
