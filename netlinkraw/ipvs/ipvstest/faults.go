package ipvstest

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/fault"
)

// faults are the failures a test asked the fake to inject. They are
// counted across the Kernel's connections, in the order the fake meets
// them; each fires once per count and then the fake behaves normally again.
type faults struct {
	// fail fails an IPVS command with its errno, unapplied.
	fail fault.Nth[unix.Errno]
	// drop loses reply datagrams.
	drop fault.Count[struct{}]
	// delay holds reply datagrams back for its duration.
	delay fault.Count[time.Duration]
	// recv fails receives with its errno, the queued replies lost with
	// them.
	recv fault.Count[unix.Errno]
}

// command is called for each IPVS command before it is run: a non-zero
// errno fails it.
func (f *faults) command() unix.Errno {
	errno, _ := f.fail.Next()
	return errno
}

// datagram decides the fate of a reply datagram about to be queued: lost,
// or ready at some time (zero: at once).
func (f *faults) datagram() (lost bool, readyAt time.Time) {
	if _, ok := f.drop.Next(); ok {
		return true, time.Time{}
	}
	if d, ok := f.delay.Next(); ok {
		return false, time.Now().Add(d)
	}
	return false, time.Time{}
}

// receive returns the errno a receive must fail with (0: none).
func (f *faults) receive() unix.Errno {
	errno, _ := f.recv.Next()
	return errno
}

// FailNth makes the nth IPVS command the fake processes from now on (1:
// the next one, counted across batches and connections) fail with errno
// without being applied, the way the kernel answers a failed operation: an
// error reply carrying its sequence number, the other operations of the
// batch processed as usual. n <= 0 cancels it.
func (k *Kernel) FailNth(n int, errno unix.Errno) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults.fail.Arm(n, errno)
}

// DropReplies loses the next n reply datagrams (error replies, ACKs,
// answers, dump parts), as if the kernel never sent them: a client
// waiting for one waits until its read deadline.
func (k *Kernel) DropReplies(n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults.drop.Arm(n, struct{}{})
}

// DelayReplies holds each of the next n reply datagrams back for d before
// it can be received (the datagrams behind it wait too). A d longer than
// the client's reply timeout makes the client give up; the late replies
// then arrive for a request it abandoned.
func (k *Kernel) DelayReplies(n int, d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults.delay.Arm(n, d)
}

// FailReceives makes the next n receives (on any connection) fail with
// errno, and loses the replies queued on that connection at that moment.
// unix.ENOBUFS is what a socket returns when the kernel dropped replies
// because its receive buffer was full.
func (k *Kernel) FailReceives(n int, errno unix.Errno) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults.recv.Arm(n, errno)
}

// ClearFaults cancels every pending injected fault (InterruptDumps
// included).
func (k *Kernel) ClearFaults() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults = faults{}
	k.interrupt = 0
}
