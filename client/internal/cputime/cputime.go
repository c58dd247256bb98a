// Package cputime reads the CPU time the process has used, for benchmarks
// that must stay meaningful on a busy machine: wall time per operation
// grows with other load, CPU time much less.
package cputime

import (
	"runtime"
	"syscall"
	"time"
)

// Now returns the user plus system CPU time of the process so far (all
// threads, the garbage collector's included).
func Now() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// HeapMB returns the live heap in MB after a garbage collection, for
// benchmarks that report what a structure keeps.
func HeapMB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}
