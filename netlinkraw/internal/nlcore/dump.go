package nlcore

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw"
)

// DumpRequest describes a dump: the request's message type and extra
// flags (FlagRequest and FlagDump are added), its payload, and what to do
// with the answer.
type DumpRequest struct {
	Type  uint16
	Flags uint16
	// Payload appends the request's payload (family header and
	// attributes) to e.
	Payload func(e *Encoder)
	// Reset is called before each attempt (an interrupted dump is run
	// again from the start).
	Reset func()
	// Each is called for every message of the answer that is not a
	// netlink control message; the first error it returns is the dump's,
	// after the whole answer has been read.
	Each func(m *Message) error
}

// errNoDumpAnswer is the error of a dump whose answer never came although
// the kernel answered the request sent after it (a fenced dump, below).
var errNoDumpAnswer = fmt.Errorf("%w: the dump's answer is missing (the request after it was answered)", netlinkraw.ErrReplyTimeout)

// Dump runs a dump. A dump the kernel marks interrupted (NLM_F_DUMP_INTR:
// its table changed while it was read) is run again, up to
// netlinkraw.MaxDumpAttempts times, then fails with
// netlinkraw.ErrDumpInterrupted. A kernel error is returned as a plain
// unix.Errno (with the extended-ACK text wrapped around it if any).
func (c *Conn) Dump(r DumpRequest) error {
	for attempt := 1; ; attempt++ {
		if r.Reset != nil {
			r.Reset()
		}
		intr, err := c.dumpOnce(&r)
		if err != nil {
			return err
		}
		if !intr {
			return nil
		}
		if attempt == netlinkraw.MaxDumpAttempts {
			return fmt.Errorf("%w (%d times)", netlinkraw.ErrDumpInterrupted, attempt)
		}
	}
}

// dumpState is what one dump attempt has seen of its answer.
type dumpState struct {
	seq, end uint32 // the dump request's number; the one whose answer ends it
	fenced   bool
	intr     bool
	first    error // a decoding error; the dump is drained regardless
	answered bool  // fenced: this dump's answer (or error) was seen
	failed   error // fenced: the kernel's error for the dump request
}

// dumpOnce runs one dump.
//
// A dump's answer is known complete when the message that ends it arrives:
// NLMSG_DONE (or an error) carrying the dump's sequence number. A transport
// that returns whole dumps (ConnTransport: netlink.Conn hides NLMSG_DONE,
// so an empty dump is an empty receive that names no request) cannot see
// it. There, once a call has given up waiting (c.stale: a late answer,
// perhaps an empty one, may still come), the dump request is followed, in
// the same send, by a fence (an NLMSG_NOOP asking for an ACK, which the
// kernel answers after the dump) and the dump ends with the fence's ACK:
// an empty receive before it is this dump's empty answer, and no answer at
// all before it is an error. The fence answered, everything sent before it
// has been read, and dumps go unfenced again (one receive each, as over a
// socket).
//
// A dump given up on before its end (a reply timeout, a failed receive)
// is recorded in c.abandoned; the next dump first reads the rest of it
// (finishAbandoned). Otherwise the kernel, still producing the old dump
// for this socket, would refuse the new one with EBUSY, and a fenceless
// old empty answer could pass for the new dump's.
func (c *Conn) dumpOnce(r *DumpRequest) (intr bool, err error) {
	if err := finishAbandoned(c); err != nil {
		return false, err
	}
	whole := c.T.WholeDumps()
	st := dumpState{fenced: whole && c.stale}
	n := 1
	if st.fenced {
		n = 2
	}
	st.seq = c.NextSeq(n)
	st.end = st.seq + uint32(n) - 1
	c.Enc.Reset()
	off := c.Enc.BeginMessage(r.Type, FlagRequest|FlagDump|r.Flags, st.seq)
	if r.Payload != nil {
		r.Payload(&c.Enc)
	}
	c.Enc.EndMessage(off)
	if st.fenced {
		c.Enc.Fence(st.end)
	}
	if err := c.Send(c.Enc.B, n); err != nil {
		return false, err
	}
	for {
		msgs, err := c.Receive()
		if err != nil {
			c.abandoned, c.abandonedUnit = st.end, whole && !st.fenced
			return false, err
		}
		if len(msgs) == 0 && whole {
			if !st.fenced {
				return st.intr, st.first // an empty dump: nothing stale can pass for it
			}
			st.answered = true // this dump's empty answer (older ones were read)
			continue
		}
		for i := range msgs {
			if done, err := c.dumpMessage(r, &st, &msgs[i]); done || err != nil {
				return st.intr, err
			}
		}
		if st.answered && whole && !st.fenced {
			return st.intr, st.first // the whole dump came in this receive
		}
	}
}

// dumpMessage handles one message of a dump's answer: done reports the
// dump's end, with its error.
func (c *Conn) dumpMessage(r *DumpRequest, st *dumpState, m *Message) (done bool, err error) {
	if st.fenced && m.Seq == st.end && m.Type == TypeError {
		c.stale = false
		switch {
		case st.failed != nil:
			return true, st.failed
		case !st.answered:
			return true, errNoDumpAnswer
		}
		return true, st.first
	}
	if m.Seq != st.seq {
		return false, nil // a stale reply of an abandoned request
	}
	st.answered = true
	if m.Flags&FlagDumpIntr != 0 {
		st.intr = true
	}
	switch m.Type {
	case TypeError:
		if m.Errno != 0 {
			if st.fenced {
				st.failed = m.Err()
				return false, nil
			}
			return true, m.Err()
		}
		if !st.fenced {
			return true, st.first
		}
	case TypeDone:
		if len(m.Data) >= 4 {
			if e := -int32(Native.Uint32(m.Data)); e > 0 {
				return true, unix.Errno(e)
			}
		}
		return true, st.first
	case TypeNoop, TypeOverrun:
	default:
		if err := r.Each(m); err != nil && st.first == nil {
			st.first = err
		}
	}
	return false, nil
}
