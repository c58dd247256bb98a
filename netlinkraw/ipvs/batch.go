package ipvs

import (
	"fmt"
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

// encodeOp appends the message of op to c.enc; on a validation error it
// appends nothing.
func (c *Conn) encodeOp(op *Op, seq uint32) error {
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
		cmd, fullSvc = cmdNewService, true
	case OpUpdateService:
		cmd, fullSvc = cmdSetService, true
	case OpRemoveService:
		cmd = cmdDelService
	case OpCreateDestination:
		cmd, dest, fullDest = cmdNewDest, true, true
	case OpUpdateDestination:
		cmd, dest, fullDest = cmdSetDest, true, true
	case OpRemoveDestination:
		cmd, dest = cmdDelDest, true
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
	off := c.enc.beginMessage(c.family, flagRequest, seq, cmd)
	c.enc.service(s, fullSvc)
	if dest {
		c.enc.destination(d, fullDest)
	}
	c.enc.endMessage(off)
	return nil
}

// Apply performs ops in order, in as few sendmsg calls as the socket
// buffers allow. Only the last message of each sendmsg asks for an ACK:
// the kernel processes every message of a sendmsg in order, answers each
// failed one with an error carrying its sequence number, and the final
// ACK proves the rest succeeded.
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
	for i := 0; i < len(ops); {
		// Encode as many operations as fit one sendmsg.
		c.enc.b = c.enc.b[:0]
		c.chunk = c.chunk[:0]
		base := c.nextSeq(c.maxMsgs)
		lastOff := 0
		for i < len(ops) && len(c.chunk) < c.maxMsgs {
			mark := len(c.enc.b)
			if err := c.encodeOp(&ops[i], base+uint32(len(c.chunk))); err != nil {
				c.enc.b = c.enc.b[:mark]
				fail(i, err)
				i++
				continue
			}
			if len(c.enc.b) > c.maxBytes && len(c.chunk) > 0 {
				c.enc.b = c.enc.b[:mark]
				break
			}
			lastOff = mark
			c.chunk = append(c.chunk, i)
			i++
		}
		if len(c.chunk) == 0 {
			continue
		}
		last := base + uint32(len(c.chunk)-1)
		// Ask for an ACK on the last message only.
		native.PutUint16(c.enc.b[lastOff+6:], flagRequest|flagAck)
		c.ctr.MessagesSent += uint64(len(c.chunk))
		if err := c.t.send(c.enc.b); err != nil {
			return c.transportError(err, done, len(ops))
		}
		if err := c.awaitChunk(base, last, fail); err != nil {
			return c.transportError(err, done, len(ops))
		}
		done = i
	}
	if be != nil {
		return be
	}
	return nil
}

// awaitChunk reads replies until the one for sequence number last, calling
// fail for every error that answers a message of the chunk.
func (c *Conn) awaitChunk(base, last uint32, fail func(int, error)) error {
	for {
		msgs, err := c.t.receive()
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.typ != typeError || m.seq-base > last-base {
				continue // not ours: a stale reply of an abandoned request
			}
			if m.errno != 0 {
				fail(c.chunk[m.seq-base], errnoError(m))
			}
			if m.seq == last {
				return nil
			}
		}
	}
}

func (c *Conn) transportError(err error, done, total int) error {
	return fmt.Errorf("ipvs: apply: %w (%d of %d operations answered; the rest may or may not be applied)", err, done, total)
}
