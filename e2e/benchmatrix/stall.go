package benchmatrix

import (
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// stallTick is how often the stall watch's thread asks to wake.
const stallTick = time.Millisecond

// stallWatch measures how long the machine stops running threads: one OS
// thread of the driver's, realtime (SCHED_FIFO) where the kernel lets it,
// sleeps stallTick at a time and records how much later than asked it
// woke. A realtime thread preempts every ordinary one, so on an idle or a
// busy machine alike it wakes within microseconds; a wake-up tens of
// milliseconds late means nothing ran: in the VM, the emulator did not
// run the guest's CPUs (TCG translation, the host's scheduler). Beside a
// change's time it tells whether that time was the proxy's or the
// machine's.
type stallWatch struct {
	worst    atomic.Int64 // the latest wake-up since the last take, in ns
	woken    atomic.Int64 // how many sleeps the thread has ended
	realtime atomic.Bool  // the thread runs SCHED_FIFO
	stop     chan struct{}
	done     chan struct{}
}

// startStallWatch starts the watch's thread; close ends it.
func startStallWatch() *stallWatch {
	w := &stallWatch{stop: make(chan struct{}), done: make(chan struct{})}
	ready := make(chan struct{})
	go w.run(ready)
	<-ready
	return w
}

func (w *stallWatch) run(ready chan<- struct{}) {
	defer close(w.done)
	// The thread is this goroutine's alone and exits with it, realtime
	// policy and all.
	runtime.LockOSThread()
	attr := unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 50}
	w.realtime.Store(unix.SchedSetAttr(0, &attr, 0) == nil)
	close(ready)
	req := unix.NsecToTimespec(int64(stallTick))
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		t0 := time.Now()
		// A blocking system call, not time.Sleep: the Go scheduler's own
		// timers and wake-ups are not what is measured.
		for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, 0, &req, nil) == unix.EINTR {
		}
		late := int64(time.Since(t0) - stallTick)
		for {
			cur := w.worst.Load()
			if late <= cur || w.worst.CompareAndSwap(cur, late) {
				break
			}
		}
		w.woken.Add(1)
	}
}

// take returns the latest wake-up since the last take and starts again.
// It first waits for the sleep in progress to end: a pause of the
// machine that has not ended yet when take is called (the thread still
// asleep, or woken but not yet run) belongs to this take, not the next.
func (w *stallWatch) take() time.Duration {
	for n := w.woken.Load(); w.woken.Load() == n; {
		select {
		case <-w.done:
			return time.Duration(w.worst.Swap(0))
		case <-time.After(100 * time.Microsecond):
		}
	}
	return time.Duration(w.worst.Swap(0))
}

// close stops the thread and waits for it.
func (w *stallWatch) close() {
	close(w.stop)
	<-w.done
}
