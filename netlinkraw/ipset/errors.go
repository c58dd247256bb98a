package ipset

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// Errno is one of ipset's private kernel error codes (4096 and up). Type-
// specific codes (4352 and up) mean different things for hash and bitmap
// sets; this package gives each meaning its own Errno (the bitmap ones are
// offset by bitmapErrOffset) so errors.Is tells them apart.
type Errno int

// ipset's private error codes, from ip_set.h.
const (
	ErrProtocol        Errno = 4097 // the kernel rejected the message's attributes
	ErrFindType        Errno = 4098 // set type not supported
	ErrMaxSets         Errno = 4099 // maximal number of sets reached
	ErrBusy            Errno = 4100 // set in use by a kernel component
	ErrExistSetName2   Errno = 4101 // the second set does not exist
	ErrTypeMismatch    Errno = 4102 // the two sets differ in type or family
	ErrExist           Errno = 4103 // element already exists / does not exist
	ErrInvalidCIDR     Errno = 4104
	ErrInvalidNetmask  Errno = 4105
	ErrInvalidFamily   Errno = 4106
	ErrTimeout         Errno = 4107 // set has no timeout support
	ErrReferenced      Errno = 4108 // set is referenced
	ErrIPAddrIPv4      Errno = 4109
	ErrIPAddrIPv6      Errno = 4110
	ErrCounter         Errno = 4111 // set has no counter support
	ErrComment         Errno = 4112 // set has no comment support
	ErrInvalidMarkmask Errno = 4113
	ErrSkbInfo         Errno = 4114

	// Hash types (ip_set_hash.h).
	ErrHashFull             Errno = 4352 // set is full
	ErrHashElem             Errno = 4353 // zero-valued element
	ErrInvalidProto         Errno = 4354
	ErrMissingProto         Errno = 4355
	ErrHashRangeUnsupported Errno = 4356
	ErrHashRange            Errno = 4357

	// Bitmap types (ip_set_bitmap.h), offset so they differ from hash codes.
	ErrBitmapRange     Errno = 4352 + bitmapErrOffset // element out of the set's range
	ErrBitmapRangeSize Errno = 4353 + bitmapErrOffset // range too large
)

// bitmapErrOffset separates bitmap type-specific codes from hash ones.
const bitmapErrOffset = 1 << 16

const typeSpecific = 4352

var errnoText = map[Errno]string{
	ErrProtocol:             "kernel rejected the message (protocol error: missing or invalid attribute for this set type)",
	ErrFindType:             "set type not supported",
	ErrMaxSets:              "maximal number of sets reached",
	ErrBusy:                 "set is busy (in use by a kernel component)",
	ErrExistSetName2:        "second set does not exist",
	ErrTypeMismatch:         "sets differ in type or family",
	ErrExist:                "element already exists",
	ErrInvalidCIDR:          "invalid CIDR prefix length",
	ErrInvalidNetmask:       "invalid netmask",
	ErrInvalidFamily:        "invalid family",
	ErrTimeout:              "set has no timeout support",
	ErrReferenced:           "set is referenced by a kernel component",
	ErrIPAddrIPv4:           "invalid IPv4 address",
	ErrIPAddrIPv6:           "invalid IPv6 address",
	ErrCounter:              "set has no counter support",
	ErrComment:              "set has no comment support",
	ErrInvalidMarkmask:      "invalid markmask",
	ErrSkbInfo:              "set has no skbinfo support",
	ErrHashFull:             "set is full",
	ErrHashElem:             "zero-valued element cannot be stored",
	ErrInvalidProto:         "invalid protocol",
	ErrMissingProto:         "protocol missing",
	ErrHashRangeUnsupported: "range not supported",
	ErrHashRange:            "invalid range",
	ErrBitmapRange:          "element is out of the range of the set",
	ErrBitmapRangeSize:      "range exceeds the size limit of the set type",
}

// Error returns a readable text for the code.
func (e Errno) Error() string {
	if s, ok := errnoText[e]; ok {
		return s
	}
	return "ipset error " + strconv.Itoa(int(e))
}

// errnoFromKernel turns a positive kernel error code into a Go error: an
// Errno for ipset's private codes, a syscall.Errno otherwise. bitmap says
// whether type-specific codes come from a bitmap set.
func errnoFromKernel(code int, bitmap bool) error {
	if code < 4096 {
		return syscall.Errno(code)
	}
	if code >= typeSpecific && bitmap {
		return Errno(code + bitmapErrOffset)
	}
	return Errno(code)
}

// IsNotExist reports whether err says a set or an element does not exist.
func IsNotExist(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, ErrNotFound)
}

// ErrNotFound is reported for Del of an absent element (the kernel's
// ErrExist code on delete). errors.Is(err, ErrExist) also holds.
var ErrNotFound = &notFound{}

type notFound struct{}

func (*notFound) Error() string        { return "element does not exist" }
func (*notFound) Is(target error) bool { return target == ErrExist }

// OpError is the error of one operation on one object.
type OpError struct {
	// Op is the operation: "create", "destroy", "add", ...
	Op string
	// Object names what was operated on: a set, or an entry and its set.
	Object string
	// Err is the cause: an Errno, a syscall.Errno or a local error.
	Err error
}

// Error formats the error as "ipset: OP OBJECT: CAUSE".
func (e *OpError) Error() string {
	return "ipset: " + e.Op + " " + e.Object + ": " + describe(e.Err)
}

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// describe gives friendlier texts for the errnos the kernel uses on sets.
func describe(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		switch en {
		case syscall.ENOENT:
			return "set does not exist"
		case syscall.EEXIST:
			return "set already exists"
		}
	}
	return err.Error()
}

// EntryError is the failure of one entry of a batch.
type EntryError struct {
	// Index is the position of the entry in the slice passed to Add or Del.
	Index int
	// Entry is that entry.
	Entry Entry
	// Err is the cause.
	Err error
}

// BatchError reports the entries of an Add or Del that failed; the others
// were applied.
type BatchError struct {
	// Op is "add" or "del"; Set is the set name.
	Op, Set string
	// Failed lists the failing entries in input order.
	Failed []EntryError
}

// Error summarizes the failures.
func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ipset: %s: %d of the entries failed on set %s", e.Op, len(e.Failed), e.Set)
	for i, f := range e.Failed {
		if i == 3 {
			fmt.Fprintf(&b, "; ...")
			break
		}
		fmt.Fprintf(&b, "; entry %d (%s): %s", f.Index, f.Entry, describe(f.Err))
	}
	return b.String()
}

// Unwrap returns the causes, so errors.Is(err, ipset.ErrExist) works on a
// batch.
func (e *BatchError) Unwrap() []error {
	out := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		out[i] = f.Err
	}
	return out
}
