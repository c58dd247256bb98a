package nft

import (
	"fmt"
	"testing"

	"github.com/google/nftables"
	gexpr "github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/internal/nlcore"
	"github.com/proxysinks/proxysinks/netlinkraw/nstest"
)

// The benchmark's transaction: a table, n regular chains with one rule
// each (counter, accept), and a verdict map ipv4_addr . inet_proto .
// inet_service : verdict of n elements, element i jumping to chain i.
type benchWork struct {
	names []string
	keys  [][]byte
	elems []Elem
}

func newBenchWork(n int) *benchWork {
	w := &benchWork{}
	for i := range n {
		name := fmt.Sprintf("svc-%05d", i)
		k := key([]byte{10, 96, byte(i >> 8), byte(i)}, []byte{unix.IPPROTO_TCP}, be16(uint16(1000+i%50000)))
		w.names = append(w.names, name)
		w.keys = append(w.keys, k)
		w.elems = append(w.elems, Elem{Key: k, Verdict: &Verdict{Code: VerdictJump, Chain: name}})
	}
	return w
}

// benchRuleExprs is the rule of every chain, as nftexpr would compile it.
var benchRuleExprs = cat(counterExpr(), verdictExpr(VerdictAccept, ""))

const benchTable = "bench"

// ours builds the transaction with this package.
func (w *benchWork) ours() *Tx {
	tx := NewTx()
	tx.AddTable(benchTable, Table{Family: FamilyIPv4, Name: benchTable})
	for _, name := range w.names {
		tx.AddChain(name, FamilyIPv4, benchTable, Chain{Name: name})
		tx.AddRule(name, FamilyIPv4, benchTable, Rule{Chain: name, Exprs: benchRuleExprs})
	}
	vm := Set{Name: "services", Flags: SetMap, KeyType: concatType, KeyLen: concatLen, DataType: DataVerdict}
	tx.AddSet("services", FamilyIPv4, benchTable, vm)
	tx.AddElems("services", FamilyIPv4, benchTable, vm, w.elems)
	return tx
}

// google builds and flushes the same transaction with
// github.com/google/nftables; its element lists are split in messages of
// 500 (one message of 10,000 overflows the 16-bit nest length).
func (w *benchWork) google(c *nftables.Conn) error {
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: benchTable})
	for _, name := range w.names {
		ch := c.AddChain(&nftables.Chain{Name: name, Table: t})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []gexpr.Any{&gexpr.Counter{}, &gexpr.Verdict{Kind: gexpr.VerdictAccept}}})
	}
	kt, err := nftables.ConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService)
	if err != nil {
		return err
	}
	set := &nftables.Set{Table: t, Name: "services", KeyType: kt, DataType: nftables.TypeVerdict, IsMap: true}
	if err := c.AddSet(set, nil); err != nil {
		return err
	}
	for i := 0; i < len(w.keys); i += 500 {
		var vals []nftables.SetElement
		for j := i; j < min(i+500, len(w.keys)); j++ {
			vals = append(vals, nftables.SetElement{Key: w.keys[j], VerdictData: &gexpr.Verdict{Kind: gexpr.VerdictJump, Chain: w.names[j]}})
		}
		if err := c.SetAddElements(set, vals); err != nil {
			return err
		}
	}
	return c.Flush()
}

// forceBuffers gives google/nftables' socket the buffers this package's
// gets (SO_SNDBUFFORCE for the batch; its receive buffer must hold an ACK
// for every message, which it asks for).
func forceBuffers(c *netlink.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 64<<20); serr == nil {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 256<<20)
		}
	})
	if err == nil {
		err = serr
	}
	return err
}

// checkBench verifies, untimed, that the transaction landed whole.
func checkBench(b *testing.B, ns *nstest.NetNS, chains, elems int) {
	b.Helper()
	c, err := Dial(&Config{NetNS: ns.FD()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Chains(FamilyIPv4, benchTable)
	if err != nil || len(ch) != chains {
		b.Fatalf("%d chains, %v; want %d", len(ch), err, chains)
	}
	el, err := c.Elems(FamilyIPv4, benchTable, "services")
	if err != nil || len(el) != elems {
		b.Fatalf("%d elements, %v; want %d", len(el), err, elems)
	}
	// For counting another client's system calls from outside (strace):
	// these are the check's own.
	s := c.Stats()
	b.Logf("check: %d sendmsg (%d bytes), %d recvmsg", s.Sendmsg, s.BytesSent, s.Recvmsg)
}

// BenchmarkCommit10k writes the same transaction (10,000 chains with one
// rule each and a 10,000-element verdict map) into a fresh namespace per
// iteration three ways: github.com/google/nftables v0.3.0 (build and
// Flush), this package (build the Tx and Commit), and the floor (the
// batch encoded before the clock starts; only sendmsg and reading the
// kernel's answers are timed). Rule expressions come precompiled to this
// package (nftexpr's cost is BenchmarkCompile's) and as structs to
// google/nftables, which marshals them.
func BenchmarkCommit10k(b *testing.B) {
	const n = 10000
	w := newBenchWork(n)
	run := func(b *testing.B, iter func(b *testing.B, ns *nstest.NetNS)) {
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			ns, err := nstest.Create()
			if err != nil {
				nstest.Missing(b, "network namespace: %v", err)
			}
			iter(b, ns)
			b.StopTimer()
			if i == 0 {
				checkBench(b, ns, n, n)
			}
			ns.Close()
		}
	}
	b.Run("google-nftables", func(b *testing.B) {
		run(b, func(b *testing.B, ns *nstest.NetNS) {
			c, err := nftables.New(nftables.WithNetNSFd(ns.FD()), nftables.AsLasting(), nftables.WithSockOptions(forceBuffers))
			if err != nil {
				b.Fatal(err)
			}
			defer c.CloseLasting()
			b.StartTimer()
			if err := w.google(c); err != nil {
				b.Fatal(err)
			}
		})
	})
	ours := func(preencoded bool) func(b *testing.B, ns *nstest.NetNS) {
		return func(b *testing.B, ns *nstest.NetNS) {
			c, err := Dial(&Config{NetNS: ns.FD()})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			before := c.Stats()
			if preencoded {
				batch := encodeBatch(c, w.ours())
				b.StartTimer()
				if err := sendBatch(c, batch); err != nil {
					b.Fatal(err)
				}
			} else {
				b.StartTimer()
				if _, err := c.Commit(w.ours(), nil); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			s := c.Stats()
			b.ReportMetric(float64(s.Sendmsg+s.Recvmsg-before.Sendmsg-before.Recvmsg), "syscalls/op")
			b.ReportMetric(float64(s.BytesSent-before.BytesSent), "bytes-sent/op")
			b.ReportMetric(float64(s.MessagesSent-before.MessagesSent), "msgs/op")
		}
	}
	b.Run("netlinkraw-nft", func(b *testing.B) { run(b, ours(false)) })
	b.Run("preencoded-floor", func(b *testing.B) { run(b, ours(true)) })
}

// encodeBatch frames a transaction as Commit does (begin, messages, end),
// raising the send buffer for it, and returns the bytes and sequence
// numbers (first, fence).
type preBatch struct {
	b            []byte
	msgs         int
	first, fence uint32
}

func encodeBatch(c *Conn, tx *Tx) preBatch {
	nl := c.nl
	first := nl.NextSeq(len(tx.msgs) + 3)
	var e nlcore.Encoder
	off := e.BeginMessage(nlcore.NfnlMsgBatchBegin, nlcore.FlagRequest, first)
	e.Nfgen(0, nlcore.NfnlSubsysNFTables)
	e.EndMessage(off)
	for i, m := range tx.msgs {
		flags := nlcore.FlagRequest | m.flags
		if i == 0 {
			flags |= nlcore.FlagEcho
		}
		off := e.BeginMessage(m.typ, flags, first+1+uint32(i))
		e.B = append(e.B, tx.enc.B[m.start:m.end]...)
		e.EndMessage(off)
	}
	off = e.BeginMessage(nlcore.NfnlMsgBatchEnd, nlcore.FlagRequest, first+uint32(len(tx.msgs))+1)
	e.Nfgen(0, nlcore.NfnlSubsysNFTables)
	e.EndMessage(off)
	if s, ok := nl.T.(nlcore.BufferSetter); ok {
		nl.SendBuf, nl.RecvBuf, _ = s.SetBuffers(len(e.B)+64<<10, 0)
	}
	return preBatch{b: e.B, msgs: len(tx.msgs) + 2, first: first, fence: first + uint32(len(tx.msgs)) + 2}
}

// sendBatch sends a pre-encoded batch and its fence, and reads the
// answers up to the fence's ACK, failing on any error.
func sendBatch(c *Conn, p preBatch) error {
	nl := c.nl
	if err := nl.Send(p.b, p.msgs); err != nil {
		return err
	}
	var fence nlcore.Encoder
	fence.Fence(p.fence)
	if err := nl.Send(fence.B, 1); err != nil {
		return err
	}
	return nl.Collect(p.first, p.fence, func(m *nlcore.Message) (bool, error) {
		if m.Type != nlcore.TypeError {
			return false, nil
		}
		if m.Errno != 0 {
			return true, m.Err()
		}
		return m.Seq == p.fence, nil
	})
}

// BenchmarkCommitLarge commits a transaction of the size of 10,000
// services with 10 endpoints each, into a fresh namespace per iteration:
// 10,000 chains with 4 rules each (40,000 rules) and a 150,000-element
// verdict map ipv4_addr . inet_proto . inet_service : verdict. It checks
// that the transaction goes in one sendmsg (nlcore.Transact raising the
// socket's send buffer) and reports its size.
func BenchmarkCommitLarge(b *testing.B) {
	const chains, rulesPerChain, elems = 10000, 4, 150000
	w := newBenchWork(chains)
	var all []Elem
	for i := range elems {
		k := key([]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}, []byte{unix.IPPROTO_UDP}, be16(uint16(i)))
		all = append(all, Elem{Key: k, Verdict: &Verdict{Code: VerdictJump, Chain: w.names[i%chains]}})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ns, err := nstest.Create()
		if err != nil {
			nstest.Missing(b, "network namespace: %v", err)
		}
		c, err := Dial(&Config{NetNS: ns.FD()})
		if err != nil {
			b.Fatal(err)
		}
		before := c.Stats()
		b.StartTimer()
		tx := NewTx()
		tx.AddTable(benchTable, Table{Family: FamilyIPv4, Name: benchTable})
		for _, name := range w.names {
			tx.AddChain(name, FamilyIPv4, benchTable, Chain{Name: name})
			for range rulesPerChain {
				tx.AddRule(name, FamilyIPv4, benchTable, Rule{Chain: name, Exprs: benchRuleExprs})
			}
		}
		vm := Set{Name: "services", Flags: SetMap, KeyType: concatType, KeyLen: concatLen, DataType: DataVerdict}
		tx.AddSet("services", FamilyIPv4, benchTable, vm)
		tx.AddElems("services", FamilyIPv4, benchTable, vm, all)
		if _, err := c.Commit(tx, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s := c.Stats()
		if got := s.Sendmsg - before.Sendmsg; got != 2 {
			b.Errorf("%d sendmsg, want 2 (the batch and its fence)", got)
		}
		b.ReportMetric(float64(s.BytesSent-before.BytesSent), "bytes-sent/op")
		b.ReportMetric(float64(s.MessagesSent-before.MessagesSent), "msgs/op")
		b.ReportMetric(float64(s.Sendmsg+s.Recvmsg-before.Sendmsg-before.Recvmsg), "syscalls/op")
		c.Close()
		if i == 0 {
			checkBench(b, ns, chains, elems)
		}
		ns.Close()
	}
}

// BenchmarkTxBuild measures building BenchmarkCommit10k's transaction
// alone (client CPU, no kernel).
func BenchmarkTxBuild(b *testing.B) {
	w := newBenchWork(10000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if tx := w.ours(); tx.Messages() < 2*len(w.names)+3 {
			b.Fatalf("%d messages", tx.Messages())
		}
	}
}
