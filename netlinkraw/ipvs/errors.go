package ipvs

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrNotSupported is returned by Dial when the kernel has no IPVS: the
// generic netlink family "IPVS" does not exist in the namespace. The
// kernel loads ip_vs on demand only from the initial network namespace.
var ErrNotSupported = errors.New("ipvs: the kernel has no IPVS (load the ip_vs module: modprobe ip_vs)")

var errEINVAL error = unix.EINVAL

// OpKind is the kind of a write operation.
type OpKind uint8

// Write operations; each is one generic netlink message.
const (
	OpCreateService OpKind = iota + 1
	OpUpdateService
	OpRemoveService
	OpCreateDestination
	OpUpdateDestination
	OpRemoveDestination
)

var opNames = [...]string{
	OpCreateService:     "create service",
	OpUpdateService:     "update service",
	OpRemoveService:     "remove service",
	OpCreateDestination: "create destination",
	OpUpdateDestination: "update destination",
	OpRemoveDestination: "remove destination",
}

// String returns the operation's name as it appears in errors.
func (k OpKind) String() string {
	if int(k) < len(opNames) && opNames[k] != "" {
		return opNames[k]
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

func (k OpKind) isDestination() bool {
	return k == OpCreateDestination || k == OpUpdateDestination || k == OpRemoveDestination
}

// Error is the error of one operation: what was asked, on which object, and
// why it failed. Err is usually a unix.Errno from the kernel, so
// errors.Is(err, unix.EEXIST) works; client-side validation failures match
// unix.EINVAL.
type Error struct {
	// Op names the operation ("create destination", "list services", ...).
	Op string
	// Service is the service the operation addressed, if any.
	Service *ServiceKey
	// Destination is the destination the operation addressed, if any.
	Destination *DestinationKey
	// Index is the position of the operation in the slice given to Apply.
	Index int
	// Err is the cause.
	Err error
}

// Error formats the error as
// "ipvs: create destination 10.244.1.5:8080 on TCP/10.96.0.10:53: file exists".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("ipvs: ")
	b.WriteString(e.Op)
	switch {
	case e.Destination != nil && e.Service != nil:
		b.WriteString(" " + e.Destination.String() + " on " + e.Service.String())
	case e.Service != nil:
		b.WriteString(" " + e.Service.String())
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	if h := hint(e.Op, e.Err); h != "" {
		b.WriteString(" (" + h + ")")
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// hint explains the errno values IPVS gives a meaning of its own.
func hint(op string, err error) string {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return ""
	}
	switch {
	case errno == unix.ESRCH:
		return "no such service"
	case errno == unix.ENOENT && strings.HasSuffix(op, "destination"):
		return "no such destination"
	case errno == unix.ENOENT && strings.HasSuffix(op, "service"):
		return "unknown scheduler or persistence engine"
	case errno == unix.ERANGE:
		return "weight above 2^31-1 or lower threshold above upper threshold"
	case errno == unix.EPERM:
		return "needs CAP_NET_ADMIN"
	}
	return ""
}

func opError(op OpKind, index int, s Service, d *Destination, err error) *Error {
	k := s.Key()
	e := &Error{Op: op.String(), Service: &k, Index: index, Err: err}
	if d != nil {
		dk := d.Key()
		e.Destination = &dk
	}
	return e
}

// BatchError is returned by Apply when some operations failed. The others
// were applied.
type BatchError struct {
	// Errors has one entry per operation given to Apply: nil where the
	// operation succeeded, an *Error where it failed.
	Errors []error
	// Failed is the number of non-nil entries of Errors.
	Failed int
}

// Error summarizes the failures, naming the first few.
func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ipvs: %d of %d operations failed", e.Failed, len(e.Errors))
	shown := 0
	for _, err := range e.Errors {
		if err == nil {
			continue
		}
		if shown == 3 {
			b.WriteString("; ...")
			break
		}
		b.WriteString("; ")
		b.WriteString(strings.TrimPrefix(err.Error(), "ipvs: "))
		shown++
	}
	return b.String()
}

// Unwrap returns the failed operations' errors, so that errors.Is and
// errors.As look into them.
func (e *BatchError) Unwrap() []error {
	out := make([]error, 0, e.Failed)
	for _, err := range e.Errors {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}
