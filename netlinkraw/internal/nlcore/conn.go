package nlcore

import (
	"errors"
	"fmt"
	"time"

	"github.com/proxysinks/proxysinks/netlinkraw"
)

// Conn is the request/answer machinery over one Transport: sequence
// numbers, the reply timeout, late replies skipped by sequence number, and
// the bookkeeping of dumps a call gave up on. It is not safe for
// concurrent use: the clients serialize their calls.
type Conn struct {
	T Transport
	// Ctr counts the traffic.
	Ctr Counters
	// Enc is a scratch encoder for requests and dumps.
	Enc Encoder
	// Seq is the next sequence number (0 is skipped).
	Seq uint32
	// Timeout bounds each wait for a reply datagram (0: none); see
	// netlinkraw.ReplyTimeout.
	Timeout time.Duration
	// SendBuf and RecvBuf are the socket's buffer sizes as getsockopt
	// reports them (0: unknown, not a socket); Transact raises them for
	// a large transaction.
	SendBuf, RecvBuf int

	// abandoned is the sequence number of the message ending the answer
	// to a dump that a call gave up on before that answer ended (0: none);
	// see dumpOnce.
	abandoned uint32
	// abandonedUnit is set when the abandoned dump went unfenced over a
	// transport of whole dumps: its answer is the next receive that is
	// empty or names it.
	abandonedUnit bool
	// stale is set when a call gave up waiting (a failed receive): late
	// answers may be on their way. Over a transport of whole dumps, dumps
	// are fenced until one sees its fence answered (see dumpOnce).
	stale bool
}

// NewConn returns a Conn over t with the reply timeout configured (see
// netlinkraw.ReplyTimeout).
func NewConn(t Transport, timeout time.Duration) *Conn {
	return &Conn{T: t, Seq: 1, Timeout: netlinkraw.ReplyTimeout(timeout)}
}

// NextSeq returns n consecutive sequence numbers, skipping 0 and keeping
// them contiguous across the wrap.
func (c *Conn) NextSeq(n int) uint32 {
	if c.Seq == 0 || c.Seq > ^uint32(0)-uint32(n) {
		c.Seq = 1
	}
	s := c.Seq
	c.Seq += uint32(n)
	return s
}

// Send sends b, msgs complete messages, in one sendmsg.
func (c *Conn) Send(b []byte, msgs int) error {
	c.Ctr.MessagesSent += uint64(msgs)
	return c.T.Send(b, &c.Ctr)
}

// Receive waits for the next reply unit, within the reply timeout. It
// notices the end of an abandoned dump's answer, whichever call reads it.
// A passed deadline is an error matching netlinkraw.ErrReplyTimeout.
func (c *Conn) Receive() ([]Message, error) {
	msgs, err := c.T.Receive(netlinkraw.ReplyDeadline(c.Timeout), &c.Ctr)
	c.Ctr.MessagesReceived += uint64(len(msgs))
	if err != nil {
		// The call gives up: answers to it may still come.
		c.stale = true
	}
	if c.abandoned != 0 && err == nil {
		// A whole unfenced dump is one receive: empty, or naming it.
		if c.abandonedUnit && len(msgs) == 0 {
			c.abandoned = 0
		}
		for _, m := range msgs {
			if m.Seq == c.abandoned && (c.abandonedUnit || m.Type == TypeDone || m.Type == TypeError) {
				c.abandoned = 0
			}
		}
	}
	return msgs, netlinkraw.ReplyError(err, c.Timeout)
}

// Collect reads answers until fn reports the exchange done, calling it for
// every message numbered first..last; the other messages are late answers
// to requests a call gave up on, and are skipped.
func (c *Conn) Collect(first, last uint32, fn func(m *Message) (done bool, err error)) error {
	for {
		msgs, err := c.Receive()
		if err != nil {
			return err
		}
		for i := range msgs {
			if msgs[i].Seq-first > last-first {
				continue
			}
			done, err := fn(&msgs[i])
			if err != nil || done {
				return err
			}
		}
	}
}

// Request sends the one message encoded in c.Enc, numbered seq, and waits
// for its answer: with reply set, the first message of type replyType,
// returned as a copy; otherwise its ACK. A kernel error is returned as
// Message.Err.
func (c *Conn) Request(seq uint32, reply bool, replyType uint16) ([]byte, error) {
	if err := c.Send(c.Enc.B, 1); err != nil {
		return nil, err
	}
	var out []byte
	err := c.Collect(seq, seq, func(m *Message) (bool, error) {
		switch {
		case m.Type == TypeError:
			return true, m.Err()
		case reply && m.Type == replyType:
			out = append([]byte(nil), m.Data...)
			return true, nil
		}
		return false, nil
	})
	return out, err
}

// finishAbandoned reads the rest of the answer to a dump that an earlier
// call gave up on (a reply timeout, a failed receive), skipping it, until
// its end: the kernel keeps producing such a dump for the socket, and
// refuses a new one with EBUSY until it is read. The kernel produces the
// rest as it is read, so this takes no longer than reading it. An end that
// does not come within the reply timeout is taken as lost and the caller
// goes on (a kernel still busy then answers EBUSY: an error, never a
// wrong answer); another failure fails the call and is retried by the next.
func finishAbandoned(c *Conn) error {
	for c.abandoned != 0 {
		if _, err := c.Receive(); err != nil {
			if errors.Is(err, netlinkraw.ErrReplyTimeout) {
				c.abandoned = 0
				return nil
			}
			return fmt.Errorf("finish reading the answer to an abandoned dump: %w", err)
		}
	}
	return nil
}
