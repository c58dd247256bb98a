package ipsettest

import (
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/proxysinks/proxysinks/netlinkraw"
	"github.com/proxysinks/proxysinks/netlinkraw/internal/fault"
	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
)

// faults are the failures a test asked the Fake to inject, each with the
// error *ipset.Conn returns for it on a real socket. They fire in the order
// the Fake meets them, once per count; then the Fake behaves normally.
type faults struct {
	mu sync.Mutex
	// fail fails an operation (a command, or one entry of Add or Del)
	// with its error, unapplied.
	fail fault.Nth[error]
	// lost calls are applied but their answer is lost: they fail with a
	// reply timeout.
	lost fault.Count[struct{}]
	// recv calls are applied but fail with its errno (ENOBUFS: the
	// answers were lost to a full receive buffer).
	recv fault.Count[syscall.Errno]
	// interrupt dumps are still to be marked interrupted.
	interrupt int
}

// next is called for each operation before it is applied: non-nil fails it.
func (f *faults) next() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err, _ := f.fail.Next()
	return err
}

// answer is called with the result of an applied call: a lost reply or a
// failed receive replaces it.
func (f *faults) answer(op, obj string, err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.lost.Next(); ok {
		return opErr(op, obj, netlinkraw.ReplyError(os.ErrDeadlineExceeded, netlinkraw.DefaultReplyTimeout))
	}
	if errno, ok := f.recv.Next(); ok {
		return opErr(op, obj, nlcore.ReceiveError(errno))
	}
	return err
}

// dump is called for each dump: it fails when every attempt the client
// would make is interrupted, as *ipset.Conn gives up after
// netlinkraw.MaxDumpAttempts.
func (f *faults) dump(op, obj string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.interrupt >= netlinkraw.MaxDumpAttempts {
		f.interrupt -= netlinkraw.MaxDumpAttempts
		return opErr(op, obj, fmt.Errorf("%w (%d times)", netlinkraw.ErrDumpInterrupted, netlinkraw.MaxDumpAttempts))
	}
	f.interrupt = 0 // the client's retries used them up
	return nil
}

// FailNth makes the nth operation from now on (1: the next; a command
// counts one, Add and Del count one per entry) fail with err without
// being applied: an entry's failure is reported in the call's
// *ipset.BatchError at its index, the other entries applied; a command's
// is the call's error. err is what the kernel would answer, e.g.
// ipset.ErrHashFull or syscall.ENOMEM. n <= 0 cancels it.
func (f *Fake) FailNth(n int, err error) {
	f.faults.mu.Lock()
	defer f.faults.mu.Unlock()
	f.faults.fail.Arm(n, err)
}

// DropReplies makes the next n calls lose their answer: each is applied
// but fails with an error matching netlinkraw.ErrReplyTimeout, as a call
// on a real connection does when the kernel's reply is lost or comes after
// the reply timeout.
func (f *Fake) DropReplies(n int) {
	f.faults.mu.Lock()
	defer f.faults.mu.Unlock()
	f.faults.lost.Arm(n, struct{}{})
}

// FailReceives makes the next n calls applied but failed with errno, as a
// receive fails on a real connection: syscall.ENOBUFS when the kernel's
// answers overran the socket's receive buffer and were lost.
func (f *Fake) FailReceives(n int, errno syscall.Errno) {
	f.faults.mu.Lock()
	defer f.faults.mu.Unlock()
	f.faults.recv.Arm(n, errno)
}

// InterruptDumps marks the next n dump attempts interrupted
// (NLM_F_DUMP_INTR). Like *ipset.Conn, a dump (Header, List, ListNames) is
// tried again up to netlinkraw.MaxDumpAttempts times: fewer interrupts
// than that only cost retries; that many fail the call with
// netlinkraw.ErrDumpInterrupted.
func (f *Fake) InterruptDumps(n int) {
	f.faults.mu.Lock()
	defer f.faults.mu.Unlock()
	f.faults.interrupt = max(n, 0)
}

// ClearFaults cancels every pending injected fault.
func (f *Fake) ClearFaults() {
	f.faults.mu.Lock()
	defer f.faults.mu.Unlock()
	f.faults.fail, f.faults.lost, f.faults.recv = fault.Nth[error]{}, fault.Count[struct{}]{}, fault.Count[syscall.Errno]{}
	f.faults.interrupt = 0
}

// Create implements ipset.Client.
func (f *Fake) Create(s ipset.Set, opts ...ipset.Option) error {
	if err := f.faults.next(); err != nil {
		return opErr("create", "set "+s.Name, err)
	}
	return f.faults.answer("create", "set "+s.Name, f.doCreate(s, opts...))
}

// Destroy implements ipset.Client.
func (f *Fake) Destroy(name string, opts ...ipset.Option) error {
	if err := f.faults.next(); err != nil {
		return opErr("destroy", "set "+name, err)
	}
	return f.faults.answer("destroy", "set "+name, f.doDestroy(name, opts...))
}

// Flush implements ipset.Client.
func (f *Fake) Flush(name string) error {
	if err := f.faults.next(); err != nil {
		return opErr("flush", "set "+name, err)
	}
	return f.faults.answer("flush", "set "+name, f.doFlush(name))
}

// Rename implements ipset.Client.
func (f *Fake) Rename(from, to string) error {
	if err := f.faults.next(); err != nil {
		return opErr("rename", "set "+from+" to "+to, err)
	}
	return f.faults.answer("rename", "set "+from+" to "+to, f.doRename(from, to))
}

// Swap implements ipset.Client.
func (f *Fake) Swap(a, b string) error {
	if err := f.faults.next(); err != nil {
		return opErr("swap", "sets "+a+" and "+b, err)
	}
	return f.faults.answer("swap", "sets "+a+" and "+b, f.doSwap(a, b))
}

// Header implements ipset.Client.
func (f *Fake) Header(name string) (ipset.Header, error) {
	if err := f.faults.dump("header", "set "+name); err != nil {
		return ipset.Header{}, err
	}
	h, err := f.doHeader(name)
	if err = f.faults.answer("header", "set "+name, err); err != nil {
		return ipset.Header{}, err
	}
	return h, nil
}

// List implements ipset.Client.
func (f *Fake) List(name string) (ipset.Header, []ipset.Entry, error) {
	if err := f.faults.dump("list", "set "+name); err != nil {
		return ipset.Header{}, nil, err
	}
	h, entries, err := f.doList(name)
	if err = f.faults.answer("list", "set "+name, err); err != nil {
		return ipset.Header{}, nil, err
	}
	return h, entries, nil
}

// ListNames implements ipset.Client.
func (f *Fake) ListNames() ([]string, error) {
	if err := f.faults.dump("list", "set names"); err != nil {
		return nil, err
	}
	names, err := f.doListNames()
	if err = f.faults.answer("list", "set names", err); err != nil {
		return nil, err
	}
	return names, nil
}

// Add implements ipset.Client.
func (f *Fake) Add(set string, entries []ipset.Entry, opts ...ipset.Option) error {
	return f.faults.answer("add", "entries of set "+set, f.doAdd(set, entries, opts...))
}

// Del implements ipset.Client.
func (f *Fake) Del(set string, entries []ipset.Entry, opts ...ipset.Option) error {
	return f.faults.answer("del", "entries of set "+set, f.doDel(set, entries, opts...))
}
