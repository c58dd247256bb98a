package ipvstest

import (
	"time"

	"golang.org/x/sys/unix"
)

// faults are the failures a test asked the fake to inject. They are
// counted across the Kernel's connections, in the order the fake meets
// them; each fires once per count and then the fake behaves normally again.
type faults struct {
	// failIn counts down the IPVS commands processed; the one that brings
	// it to zero fails with failErrno, unapplied.
	failIn    int
	failErrno unix.Errno
	// drop is the number of reply datagrams still to lose.
	drop int
	// delayN reply datagrams are still to hold back for delay each.
	delayN int
	delay  time.Duration
	// recvN receives are still to fail with recvErrno, the queued replies
	// lost with them.
	recvN     int
	recvErrno unix.Errno
}

// command is called for each IPVS command before it is run: a non-zero
// errno fails it.
func (f *faults) command() unix.Errno {
	if f.failIn == 0 {
		return 0
	}
	f.failIn--
	if f.failIn == 0 {
		return f.failErrno
	}
	return 0
}

// datagram decides the fate of a reply datagram about to be queued: lost,
// or ready at some time (zero: at once).
func (f *faults) datagram() (lost bool, readyAt time.Time) {
	if f.drop > 0 {
		f.drop--
		return true, time.Time{}
	}
	if f.delayN > 0 {
		f.delayN--
		return false, time.Now().Add(f.delay)
	}
	return false, time.Time{}
}

// receive returns the errno a receive must fail with (0: none).
func (f *faults) receive() unix.Errno {
	if f.recvN == 0 {
		return 0
	}
	f.recvN--
	return f.recvErrno
}

// FailNth makes the nth IPVS command the fake processes from now on (1:
// the next one, counted across batches and connections) fail with errno
// without being applied, the way the kernel answers a failed operation: an
// error reply carrying its sequence number, the other operations of the
// batch processed as usual. n <= 0 cancels it.
func (k *Kernel) FailNth(n int, errno unix.Errno) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults.failIn, k.faults.failErrno = max(n, 0), errno
}

// DropReplies loses the next n reply datagrams (error replies, ACKs,
// answers, dump parts), as if the kernel never sent them: a client
// waiting for one waits until its read deadline.
func (k *Kernel) DropReplies(n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults.drop = max(n, 0)
}

// DelayReplies holds each of the next n reply datagrams back for d before
// it can be received (the datagrams behind it wait too). A d longer than
// the client's reply timeout makes the client give up; the late replies
// then arrive for a request it abandoned.
func (k *Kernel) DelayReplies(n int, d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults.delayN, k.faults.delay = max(n, 0), d
}

// FailReceives makes the next n receives (on any connection) fail with
// errno, and loses the replies queued on that connection at that moment.
// unix.ENOBUFS is what a socket returns when the kernel dropped replies
// because its receive buffer was full.
func (k *Kernel) FailReceives(n int, errno unix.Errno) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults.recvN, k.faults.recvErrno = max(n, 0), errno
}

// ClearFaults cancels every pending injected fault (InterruptDumps
// included).
func (k *Kernel) ClearFaults() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults = faults{}
	k.interrupt = 0
}
