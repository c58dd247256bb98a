package netlinkraw

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// DefaultReplyTimeout is how long the clients of this module (ipvs, ipset,
// link) wait for each reply datagram from the kernel unless configured
// otherwise. The kernel handles a request within the sendmsg that carries
// it, so replies are normally waiting before the wait starts; the limit is
// there for a lost reply, which would otherwise block the caller forever.
const DefaultReplyTimeout = time.Minute

// ErrReplyTimeout matches (errors.Is) the error of a call whose kernel reply
// did not come within the reply timeout. The operations it had not seen
// answered may or may not have been applied: read the kernel's state before
// relying on them. The same connection works for later calls (late replies
// to an abandoned request are skipped). os.ErrDeadlineExceeded matches too.
var ErrReplyTimeout = errors.New("no reply from the kernel")

// ErrDumpInterrupted matches the error of a dump the kernel marked
// inconsistent (NLM_F_DUMP_INTR: its table changed while it was read) on
// every attempt; the clients restart an interrupted dump a few times before
// giving up with it.
var ErrDumpInterrupted = errors.New("dump interrupted by concurrent changes")

// MaxDumpAttempts is how many times the clients run an interrupted dump
// before giving up with ErrDumpInterrupted.
const MaxDumpAttempts = 10

// ReplyTimeout returns the wait for one reply datagram for a configured
// value: zero means DefaultReplyTimeout, negative means no limit (0).
func ReplyTimeout(configured time.Duration) time.Duration {
	switch {
	case configured == 0:
		return DefaultReplyTimeout
	case configured < 0:
		return 0
	}
	return configured
}

// ReplyDeadline returns the deadline of a wait that starts now: the zero
// time (no deadline) when timeout is not positive.
func ReplyDeadline(timeout time.Duration) time.Time {
	if timeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(timeout)
}

// ReplyError returns err, a failed wait for a reply, as the error the
// clients return: a passed deadline becomes an error matching both
// ErrReplyTimeout and the original error chain.
func ReplyError(err error, timeout time.Duration) error {
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	return &timeoutError{timeout: timeout, err: err}
}

type timeoutError struct {
	timeout time.Duration
	err     error
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("%v within %v", ErrReplyTimeout, e.timeout)
}

func (e *timeoutError) Unwrap() []error { return []error{ErrReplyTimeout, e.err} }
