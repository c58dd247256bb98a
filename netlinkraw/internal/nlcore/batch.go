package nlcore

import (
	"errors"
	"fmt"
	"strings"
)

// nfnetlink constants (linux/netfilter/nfnetlink.h).
const (
	NfnlMsgBatchBegin = 0x10 // NFNL_MSG_BATCH_BEGIN (NLMSG_MIN_TYPE)
	NfnlMsgBatchEnd   = 0x11 // NFNL_MSG_BATCH_END

	NfnlSubsysIPSet    = 6  // NFNL_SUBSYS_IPSET
	NfnlSubsysNFTables = 10 // NFNL_SUBSYS_NFTABLES
)

// NfnlType returns the message type of command cmd of an nfnetlink
// subsystem.
func NfnlType(subsys uint16, cmd uint8) uint16 { return subsys<<8 | uint16(cmd) }

// ErrTransactionTooLarge matches the error of a transaction that does not
// fit one sendmsg even after raising the socket's send buffer: the kernel
// applies a batch only as a whole, from one sendmsg, so it cannot be split.
var ErrTransactionTooLarge = errors.New("nfnetlink transaction larger than one sendmsg")

// BufferSetter is implemented by transports whose socket buffers can be
// resized (Socket).
type BufferSetter interface {
	SetBuffers(snd, rcv int) (gotSnd, gotRcv int, err error)
}

// TransactionError is the error of a transaction the kernel refused: none
// of its messages were applied. Errors holds the error of each message
// (nil for those the kernel did not complain about), indexed like the
// transaction's messages, so a caller maps each back to its object; Batch
// is an error the kernel gave for the transaction as a whole (for
// example a failed commit), if any.
type TransactionError struct {
	Errors []error
	Failed int
	Batch  error
	// BadAttrs holds, for the failed messages whose error named the
	// attribute at fault (extended ACKs), its offset from the start of
	// the message (Message.BadAttr); nil when none did.
	BadAttrs map[int]uint32
}

// Error lists the failed messages.
func (e *TransactionError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "transaction of %d messages refused, nothing applied", len(e.Errors))
	if e.Batch != nil {
		fmt.Fprintf(&b, ": %v", e.Batch)
	}
	for i, err := range e.Errors {
		if err != nil {
			fmt.Fprintf(&b, "; message %d: %v", i, err)
		}
	}
	return b.String()
}

// Unwrap returns the batch's and the messages' errors, for errors.Is.
func (e *TransactionError) Unwrap() []error {
	var out []error
	if e.Batch != nil {
		out = append(out, e.Batch)
	}
	for _, err := range e.Errors {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// transactionReplyCost is what one error answer to a transaction's
// message costs the receive buffer (truesize, an extended-ACK text), with
// a margin.
const transactionReplyCost = ReplyOverhead + 256

// sendLimit is the largest sendmsg a send buffer of snd bytes (as
// getsockopt reports it) takes: the kernel refuses more than snd-32.
func sendLimit(snd int) int { return snd - 32 }

// Transact sends msgs as one nfnetlink batch of subsystem subsys
// (NFNL_MSG_BATCH_BEGIN, the messages, NFNL_MSG_BATCH_END, in one
// sendmsg): the kernel applies all of them or none. The messages' types
// carry the subsystem (NfnlType); they ask for no ACK, so only failures
// are answered, and a fence (an NLMSG_NOOP asking for an ACK, sent after
// the batch) marks the end of the answers. A transaction larger than the
// socket buffers (c.SendBuf, c.RecvBuf) raises them where the transport
// allows, and is refused with ErrTransactionTooLarge where it cannot fit.
// A refused transaction is a *TransactionError mapping each error to its
// message.
func (c *Conn) Transact(subsys uint16, msgs []Request) error {
	return c.TransactWith(subsys, msgs, TransactOptions{})
}

// NfnlBatchGenID is NFNL_BATCH_GENID, the batch-begin attribute carrying
// the generation a transaction was computed against.
const NfnlBatchGenID = 1

// TransactOptions are the optional parts of a transaction (TransactWith).
type TransactOptions struct {
	// GenID, when not nil, is sent in the batch begin as NFNL_BATCH_GENID:
	// the kernel refuses the whole batch with ERESTART (in
	// TransactionError.Batch) unless the subsystem's generation is still
	// *GenID. nf_tables' generation is never 0, and 0 means "no check" to
	// the kernel.
	GenID *uint32
	// Each is called for every answer that is not an error or an ACK,
	// such as the notifications a message with FlagEcho asks for; m is
	// valid during the call only.
	Each func(m *Message)
}

// FlagEcho is NLM_F_ECHO: the kernel sends the notifications of a
// message's changes to its sender too. On the first message of an
// nf_tables batch it also makes the kernel answer the commit with the new
// generation (NFT_MSG_NEWGEN, numbered like that message).
const FlagEcho = 0x8

// TransactWith is Transact with options: a generation check and a
// callback for the kernel's other answers.
func (c *Conn) TransactWith(subsys uint16, msgs []Request, o TransactOptions) error {
	size := 2 * (HdrLen + NfgenLen)
	if o.GenID != nil {
		size += AttrHdrLen + 4
	}
	for _, m := range msgs {
		size += HdrLen + align4(len(m.Payload))
	}
	if err := c.fitTransaction(size, len(msgs)); err != nil {
		return err
	}
	begin := c.NextSeq(len(msgs) + 3)
	end, fence := begin+uint32(len(msgs))+1, begin+uint32(len(msgs))+2
	c.Enc.Reset()
	if cap(c.Enc.B) < size {
		c.Enc.B = make([]byte, 0, size) // one allocation, not a copy per growth
	}
	off := c.Enc.BeginMessage(NfnlMsgBatchBegin, FlagRequest, begin)
	c.Enc.Nfgen(0, subsys)
	if o.GenID != nil {
		c.Enc.BE32(NfnlBatchGenID, *o.GenID)
	}
	c.Enc.EndMessage(off)
	for i, m := range msgs {
		off := c.Enc.BeginMessage(m.Type, FlagRequest|m.Flags, begin+1+uint32(i))
		c.Enc.B = append(c.Enc.B, m.Payload...)
		c.Enc.EndMessage(off)
	}
	off = c.Enc.BeginMessage(NfnlMsgBatchEnd, FlagRequest, end)
	c.Enc.Nfgen(0, subsys)
	c.Enc.EndMessage(off)
	if err := c.Send(c.Enc.B, len(msgs)+2); err != nil {
		return err
	}
	// The kernel handles a batch within its sendmsg: the fence, sent
	// after it, is answered after every answer to the batch.
	c.Enc.Reset()
	c.Enc.Fence(fence)
	if err := c.Send(c.Enc.B, 1); err != nil {
		return err
	}
	te := &TransactionError{Errors: make([]error, len(msgs))}
	err := c.Collect(begin, fence, func(m *Message) (bool, error) {
		switch {
		case m.Type != TypeError:
			if o.Each != nil {
				o.Each(m)
			}
		case m.Seq == fence:
			return true, nil
		case m.Errno == 0:
		case m.Seq == begin || m.Seq == end:
			te.Batch = errors.Join(te.Batch, m.Err())
		default:
			if i := m.Seq - begin - 1; te.Errors[i] == nil {
				te.Errors[i] = m.Err()
				te.Failed++
				if m.BadAttr != 0 {
					if te.BadAttrs == nil {
						te.BadAttrs = map[int]uint32{}
					}
					te.BadAttrs[int(i)] = m.BadAttr
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("nfnetlink transaction of %d messages: %w (its outcome is unknown)", len(msgs), err)
	}
	if te.Failed == 0 && te.Batch == nil {
		return nil
	}
	return te
}

// fitTransaction makes sure a transaction of size bytes and n messages fits
// one sendmsg, and that the receive buffer holds an error for each of its
// messages, raising the buffers where the transport allows.
func (c *Conn) fitTransaction(size, n int) error {
	replies := n * transactionReplyCost
	needSnd := c.SendBuf > 0 && size > sendLimit(c.SendBuf)
	needRcv := c.RecvBuf > 0 && replies > c.RecvBuf
	if !needSnd && !needRcv {
		return nil
	}
	if bs, ok := c.T.(BufferSetter); ok {
		snd, rcv := 0, 0
		if needSnd {
			snd = size + 32 + 4096
		}
		if needRcv {
			rcv = replies
		}
		got, gotR, err := bs.SetBuffers(snd, rcv)
		if err != nil {
			return fmt.Errorf("nfnetlink transaction of %d messages, %d bytes: raise the socket buffers: %w", n, size, err)
		}
		c.SendBuf, c.RecvBuf = got, gotR
	}
	if size > sendLimit(c.SendBuf) {
		return fmt.Errorf("%w: %d messages, %d bytes; the socket's send buffer takes %d (SO_SNDBUFFORCE needs CAP_NET_ADMIN; else net.core.wmem_max caps it)",
			ErrTransactionTooLarge, n, size, sendLimit(c.SendBuf))
	}
	return nil
}
