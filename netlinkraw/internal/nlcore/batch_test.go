package nlcore

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// scriptedKernel is a Transport whose kernel is a function from the
// messages of one sendmsg to the messages it answers.
type scriptedKernel struct {
	answer func(sent []Message) []Message
	queue  [][]Message
}

func (k *scriptedKernel) Send(b []byte, ctr *Counters) error {
	ctr.Sendmsg++
	sent, err := ParseMessages(nil, append([]byte(nil), b...))
	if err != nil {
		return err
	}
	if ms := k.answer(sent); len(ms) > 0 {
		k.queue = append(k.queue, ms)
	}
	return nil
}

func (k *scriptedKernel) Receive(time.Time, *Counters) ([]Message, error) {
	if len(k.queue) == 0 {
		return nil, errors.New("nothing queued")
	}
	d := k.queue[0]
	k.queue = k.queue[1:]
	return d, nil
}

func (k *scriptedKernel) WholeDumps() bool { return false }
func (k *scriptedKernel) Close() error     { return nil }

func errMsg(seq uint32, errno unix.Errno) Message {
	return Message{Type: TypeError, Seq: seq, Errno: int32(errno)}
}

// TestTransactErrors: each error is mapped to the message it answers, an
// error answering BATCH_BEGIN is the batch's, ACKs are not errors, and
// answers of other requests are skipped.
func TestTransactErrors(t *testing.T) {
	var begin uint32
	k := &scriptedKernel{answer: func(sent []Message) []Message {
		if sent[0].Type == NfnlMsgBatchBegin {
			begin = sent[0].Seq
			return []Message{errMsg(begin, unix.ENOMEM), errMsg(begin+1, 0), errMsg(begin+2, unix.ENOENT), errMsg(begin-5, unix.EIO)}
		}
		return []Message{errMsg(sent[0].Seq, 0)} // the fence
	}}
	c := NewConn(k, time.Second)
	err := c.Transact(NfnlSubsysNFTables, []Request{{Type: NfnlType(NfnlSubsysNFTables, 0)}, {Type: NfnlType(NfnlSubsysNFTables, 3)}, {Type: NfnlType(NfnlSubsysNFTables, 3)}})
	var te *TransactionError
	if !errors.As(err, &te) {
		t.Fatalf("Transact: %v, want a TransactionError", err)
	}
	if diff := cmp.Diff([]error{nil, unix.ENOENT, nil}, te.Errors, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("errors by message (-want +got):\n%s", diff)
	}
	if te.Failed != 1 || !errors.Is(te.Batch, unix.ENOMEM) || !errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EIO) {
		t.Errorf("failed %d, batch %v, error %v", te.Failed, te.Batch, err)
	}
	if c.Ctr.Sendmsg != 2 || c.Ctr.MessagesSent != 6 {
		t.Errorf("counters %+v, want 2 sendmsg of 6 messages (the batch and its fence)", c.Ctr)
	}
}
