package nlcore

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// The few nf_tables constants these tests need (linux/netfilter/nf_tables.h).
const (
	nftMsgNewTable = 0
	nftMsgGetTable = 1
	nftMsgNewChain = 3
	nftaTableName  = 1
	nftaChainTable = 1
	nftaChainName  = 3
	nfprotoINet    = 1
)

// dialNetfilter opens an nfnetlink socket in a fresh namespace.
func dialNetfilter(t *testing.T) (*Conn, *nstest.NetNS) {
	t.Helper()
	ns := nstest.New(t)
	_, s, err := DialSocket(unix.NETLINK_NETFILTER, ns.FD(), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	c := NewConn(s, 0)
	t.Cleanup(func() { c.T.Close() })
	if err := s.SetAcks(true); err != nil {
		t.Fatal(err)
	}
	if c.SendBuf, c.RecvBuf, err = s.SetBuffers(0, 0); err != nil {
		t.Fatal(err)
	}
	return c, ns
}

func newTable(name string) Request {
	var e Encoder
	e.Nfgen(nfprotoINet, 0)
	e.Str(nftaTableName, name)
	return Request{Type: NfnlType(NfnlSubsysNFTables, nftMsgNewTable), Flags: FlagCreate, Payload: e.B}
}

func newChain(table, name string) Request {
	var e Encoder
	e.Nfgen(nfprotoINet, 0)
	e.Str(nftaChainTable, table)
	e.Str(nftaChainName, name)
	return Request{Type: NfnlType(NfnlSubsysNFTables, nftMsgNewChain), Flags: FlagCreate, Payload: e.B}
}

// tables lists the namespace's nf_tables tables with a GETTABLE dump.
func tables(t *testing.T, c *Conn) []string {
	t.Helper()
	var names []string
	err := c.Dump(DumpRequest{
		Type:    NfnlType(NfnlSubsysNFTables, nftMsgGetTable),
		Payload: func(e *Encoder) { e.Nfgen(0, 0) },
		Reset:   func() { names = names[:0] },
		Each: func(m *Message) error {
			if len(m.Data) < NfgenLen {
				return fmt.Errorf("table message of %d bytes", len(m.Data))
			}
			v, ok, err := FindAttr(m.Data[NfgenLen:], nftaTableName)
			if ok {
				names = append(names, GetString(v))
			}
			return err
		},
	})
	if err != nil {
		t.Fatalf("GETTABLE dump: %v", err)
	}
	return names
}

// TestTransactionKernel: a BATCH_BEGIN / NEWTABLE / NEWCHAIN / BATCH_END
// transaction lands; one with a bad message (a chain in a table that does
// not exist) is refused as a whole, its error mapped to that message, and
// nothing of it applied.
func TestTransactionKernel(t *testing.T) {
	c, ns := dialNetfilter(t)
	nstest.LookPath(t, "nft")
	if err := c.Transact(NfnlSubsysNFTables, []Request{newTable("t1"), newChain("t1", "c1")}); err != nil {
		t.Fatalf("transaction: %v", err)
	}
	if diff := cmp.Diff([]string{"t1"}, tables(t, c)); diff != "" {
		t.Errorf("tables after the transaction (-want +got):\n%s", diff)
	}
	if out := ns.MustRun(t, "nft", "list", "ruleset"); !strings.Contains(out, "table inet t1") || !strings.Contains(out, "chain c1") {
		t.Errorf("nft list ruleset lacks table t1 with chain c1:\n%s", out)
	}

	bad := []Request{newTable("t2"), newChain("t2", "c2"), newChain("missing", "c3"), newChain("t2", "c4")}
	err := c.Transact(NfnlSubsysNFTables, bad)
	var te *TransactionError
	if !errors.As(err, &te) || !errors.Is(err, unix.ENOENT) {
		t.Fatalf("transaction with a chain in a missing table: %v, want a TransactionError matching ENOENT", err)
	}
	if te.Failed != 1 || te.Errors[2] == nil || te.Batch != nil {
		t.Errorf("errors %v (batch %v), want only message 2's", te.Errors, te.Batch)
	}
	if diff := cmp.Diff([]string{"t1"}, tables(t, c)); diff != "" {
		t.Errorf("tables after the refused transaction (-want +got):\n%s", diff)
	}
	if out := ns.MustRun(t, "nft", "list", "ruleset"); strings.Contains(out, "t2") {
		t.Errorf("the refused transaction left something:\n%s", out)
	}
}

// TestLargeTransactionKernel: a transaction larger than the default send
// buffer raises it and lands in one sendmsg.
func TestLargeTransactionKernel(t *testing.T) {
	c, ns := dialNetfilter(t)
	const n = 6000
	msgs := []Request{newTable("big")}
	for i := range n {
		msgs = append(msgs, newChain("big", fmt.Sprintf("chain-%05d", i)))
	}
	before, snd := c.Ctr, c.SendBuf
	if err := c.Transact(NfnlSubsysNFTables, msgs); err != nil {
		t.Fatalf("transaction of %d messages: %v", len(msgs), err)
	}
	if got := c.Ctr.Sendmsg - before.Sendmsg; got != 2 {
		t.Errorf("%d sendmsg, want 2 (the batch and its fence)", got)
	}
	t.Logf("send buffer %d -> %d bytes", snd, c.SendBuf)
	out := ns.MustRun(t, "nft", "list", "table", "inet", "big")
	if got := strings.Count(out, "chain chain-"); got != n {
		t.Errorf("nft lists %d chains, want %d", got, n)
	}
}

// fixedBuffers hides a transport's BufferSetter.
type fixedBuffers struct{ Transport }

// TestTransactionTooLargeKernel: a transaction that cannot fit one
// sendmsg is refused before anything is sent.
func TestTransactionTooLargeKernel(t *testing.T) {
	c, _ := dialNetfilter(t)
	c.T = fixedBuffers{c.T}
	c.SendBuf = 4096
	msgs := []Request{newTable("t")}
	for i := range 200 {
		msgs = append(msgs, newChain("t", fmt.Sprintf("c%d", i)))
	}
	before := c.Ctr
	err := c.Transact(NfnlSubsysNFTables, msgs)
	if !errors.Is(err, ErrTransactionTooLarge) {
		t.Fatalf("transaction over the send buffer: %v, want ErrTransactionTooLarge", err)
	}
	if c.Ctr.Sendmsg != before.Sendmsg {
		t.Error("a refused transaction was sent")
	}
	if got := tables(t, c); len(got) != 0 {
		t.Errorf("tables %v, want none", got)
	}
}

// TestTransactionGenIDKernel: a batch begin carrying NFNL_BATCH_GENID lands
// when the generation is the current one, and is refused whole with
// ERESTART on the batch (none of its messages) when it is not; with
// FlagEcho on its first message the kernel answers the commit with
// NFT_MSG_NEWGEN.
func TestTransactionGenIDKernel(t *testing.T) {
	const nftMsgNewGen = 15
	c, _ := dialNetfilter(t)
	var gens []uint32
	each := func(m *Message) {
		if m.Type != NfnlType(NfnlSubsysNFTables, nftMsgNewGen) || len(m.Data) < NfgenLen {
			return
		}
		if v, ok, _ := FindAttr(m.Data[NfgenLen:], 1); ok && len(v) == 4 {
			gens = append(gens, uint32(v[0])<<24|uint32(v[1])<<16|uint32(v[2])<<8|uint32(v[3]))
		}
	}
	if err := c.TransactWith(NfnlSubsysNFTables, []Request{echo(newTable("t1"))}, TransactOptions{Each: each}); err != nil {
		t.Fatalf("transaction: %v", err)
	}
	if len(gens) != 1 {
		t.Fatalf("NEWGEN answers %v, want one", gens)
	}
	gen := gens[0]
	stale := gen - 1
	err := c.TransactWith(NfnlSubsysNFTables, []Request{newTable("t2")}, TransactOptions{GenID: &stale})
	var te *TransactionError
	if !errors.As(err, &te) || !errors.Is(te.Batch, unix.ERESTART) || te.Failed != 0 {
		t.Fatalf("transaction against generation %d (now %d): %v, want ERESTART on the batch", stale, gen, err)
	}
	if err := c.TransactWith(NfnlSubsysNFTables, []Request{echo(newTable("t3"))}, TransactOptions{GenID: &gen, Each: each}); err != nil {
		t.Fatalf("transaction against the current generation %d: %v", gen, err)
	}
	if diff := cmp.Diff([]uint32{gen, gen + 1}, gens); diff != "" {
		t.Errorf("generations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"t1", "t3"}, tables(t, c)); diff != "" {
		t.Errorf("tables (-want +got):\n%s", diff)
	}
}

func echo(r Request) Request { r.Flags |= FlagEcho; return r }
