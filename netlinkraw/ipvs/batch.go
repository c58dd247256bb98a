package ipvs

import (
	"errors"
	"fmt"

	uapi "github.com/proxysinks/proxysinks/netlinkraw/internal/ipvsuapi"
	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
)

// Op is one write operation for Apply. Service is the whole service for
// OpCreateService and OpUpdateService; the other kinds use only its key.
// Destination is used by the destination kinds (only its key for
// OpRemoveDestination).
type Op struct {
	Kind        OpKind
	Service     Service
	Destination Destination
}

// String describes the operation as error messages do.
func (o Op) String() string {
	if o.Kind.isDestination() {
		return o.Kind.String() + " " + o.Destination.String() + " on " + o.Service.String()
	}
	return o.Kind.String() + " " + o.Service.String()
}

// encodeOp appends the message of op to e; on a validation error it
// appends nothing.
func encodeOp(e *nlcore.Encoder, family uint16, op *Op, seq uint32) error {
	var (
		cmd      uint8
		fullSvc  bool
		dest     bool
		fullDest bool
		s        service
		d        destination
		err      error
	)
	switch op.Kind {
	case OpCreateService:
		cmd, fullSvc = uapi.CmdNewService, true
	case OpUpdateService:
		cmd, fullSvc = uapi.CmdSetService, true
	case OpRemoveService:
		cmd = uapi.CmdDelService
	case OpCreateDestination:
		cmd, dest, fullDest = uapi.CmdNewDest, true, true
	case OpUpdateDestination:
		cmd, dest, fullDest = uapi.CmdSetDest, true, true
	case OpRemoveDestination:
		cmd, dest = uapi.CmdDelDest, true
	default:
		return invalidf("unknown operation kind %d", op.Kind)
	}
	if s, err = checkService(&op.Service, fullSvc); err != nil {
		return err
	}
	if dest {
		if d, err = checkDestination(&op.Destination); err != nil {
			return err
		}
	}
	off := e.BeginMessage(family, nlcore.FlagRequest, seq)
	e.Genl(cmd, uapi.GenlVersion)
	encodeService(e, s, fullSvc)
	if dest {
		encodeDestination(e, d, fullDest)
	}
	e.EndMessage(off)
	return nil
}

// Apply performs ops in order, in as few sendmsg calls as the socket
// buffers allow. Only the last message of each sendmsg asks for an ACK:
// the kernel processes every message of a sendmsg in order, answers each
// failed one with an error carrying its sequence number, and the final
// ACK proves the rest succeeded. While the kernel works through one
// sendmsg, another goroutine encodes the next.
//
// A failed operation does not stop the others. If some fail, Apply
// returns a *BatchError holding one *Error per operation (nil for those
// that succeeded); errors.Is(err, unix.EEXIST) asks whether any failed
// that way. Any other error means the connection failed and the outcome
// of the unacknowledged operations is unknown.
func (c *Conn) Apply(ops []Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var be *BatchError
	fail := func(i int, err error) {
		if be == nil {
			be = &BatchError{Errors: make([]error, len(ops))}
		}
		if be.Errors[i] == nil {
			be.Failed++
		}
		op := ops[i]
		var d *Destination
		if op.Kind.isDestination() {
			d = &op.Destination
		}
		be.Errors[i] = opError(op.Kind, i, op.Service, d, err)
	}
	done := 0 // operations before this index have been answered
	process := func(ch *chunk) error {
		for _, f := range ch.invalid {
			fail(f.index, f.err)
		}
		if len(ch.idx) > 0 {
			if err := c.nl.Send(ch.e.B, len(ch.idx)); err != nil {
				return c.transportError(err, done, len(ops), be)
			}
			if err := c.awaitChunk(ch, fail); err != nil {
				return c.transportError(err, done, len(ops), be)
			}
		}
		done = ch.end
		return nil
	}
	if len(ops) <= c.maxMsgs {
		// Most likely one sendmsg: no goroutine.
		for i := 0; i < len(ops); {
			i = c.chunks[0].fill(c, ops, i)
			if err := process(&c.chunks[0]); err != nil {
				return err
			}
		}
	} else if err := c.pipeline(ops, process); err != nil {
		return err
	}
	if be != nil {
		return be
	}
	return nil
}

// pipeline encodes chunks of ops in a goroutine while process sends the
// previous one and reads its replies (double buffering: the kernel works
// through one sendmsg while the next is encoded).
func (c *Conn) pipeline(ops []Op, process func(*chunk) error) error {
	full := make(chan *chunk, 1)
	free := make(chan *chunk, 2)
	free <- &c.chunks[0]
	free <- &c.chunks[1]
	stop := make(chan struct{})
	go func() {
		defer close(full)
		for i := 0; i < len(ops); {
			var ch *chunk
			select {
			case ch = <-free:
			case <-stop:
				return
			}
			i = ch.fill(c, ops, i)
			select {
			case full <- ch:
			case <-stop:
				return
			}
		}
	}()
	defer func() {
		close(stop)
		for range full { // wait for the encoder to finish
		}
	}()
	for ch := range full {
		if err := process(ch); err != nil {
			return err
		}
		free <- ch
	}
	return nil
}

// chunk is the encoding of the operations one sendmsg carries.
type chunk struct {
	e       nlcore.Encoder
	idx     []int  // operation index of each message, in sequence order
	base    uint32 // sequence number of the first message
	end     int    // index of the first operation after the chunk
	invalid []invalidOp
}

// invalidOp is an operation refused before sending.
type invalidOp struct {
	index int
	err   error
}

// fill encodes as many operations from ops[i:] as fit one sendmsg and
// returns the index after the last one it took. It asks for an ACK on the
// last message. It uses c's limits, family and sequence numbers (Apply
// holds c.mu, and only the encoder touches them meanwhile).
func (ch *chunk) fill(c *Conn, ops []Op, i int) int {
	ch.e.Reset()
	ch.idx = ch.idx[:0]
	ch.invalid = ch.invalid[:0]
	ch.base = c.nl.NextSeq(c.maxMsgs)
	lastOff := 0
	for i < len(ops) && len(ch.idx) < c.maxMsgs {
		mark := len(ch.e.B)
		if err := encodeOp(&ch.e, c.family, &ops[i], ch.base+uint32(len(ch.idx))); err != nil {
			ch.e.B = ch.e.B[:mark]
			ch.invalid = append(ch.invalid, invalidOp{i, err})
			i++
			continue
		}
		if len(ch.e.B) > c.maxBytes && len(ch.idx) > 0 {
			ch.e.B = ch.e.B[:mark]
			break
		}
		lastOff = mark
		ch.idx = append(ch.idx, i)
		i++
	}
	if len(ch.idx) > 0 {
		ch.e.SetFlags(lastOff, nlcore.FlagRequest|nlcore.FlagAck)
	}
	ch.end = i
	return i
}

// awaitChunk reads replies until the one for the chunk's last message,
// calling fail for every error that answers a message of the chunk.
func (c *Conn) awaitChunk(ch *chunk, fail func(int, error)) error {
	base, last := ch.base, ch.base+uint32(len(ch.idx)-1)
	return c.nl.Collect(base, last, func(m *nlcore.Message) (bool, error) {
		if m.Type != nlcore.TypeError {
			return false, nil
		}
		if m.Errno != 0 {
			fail(ch.idx[m.Seq-base], m.Err())
		}
		return m.Seq == last, nil
	})
}

// transportError is Apply's error when the connection failed after done
// operations were answered: the failures seen so far (be, may be nil) are
// kept in the chain.
func (c *Conn) transportError(err error, done, total int, be *BatchError) error {
	err = fmt.Errorf("ipvs: apply: %w (%d of %d operations answered; the rest may or may not be applied)", err, done, total)
	if be != nil {
		return errors.Join(err, be)
	}
	return err
}
