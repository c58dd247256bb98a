package nftables

import (
	"errors"
	"fmt"

	"github.com/proxysinks/proxysinks/netlinkraw"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// conn is the kernel of a Proxier: netlinkraw/nft's Conn.
type conn struct {
	c *nft.Conn
}

// dialKernel connects to nf_tables in a network namespace (0: the
// caller's).
func dialKernel(netns int) (kernel, error) {
	c, err := nft.Dial(&nft.Config{NetNS: netns})
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	return &conn{c: c}, nil
}

func (k *conn) generation() (uint32, error) { return k.c.Generation() }

func (k *conn) close() error { return k.c.Close() }

func (k *conn) counters() ioCounters {
	s := k.c.Stats()
	return ioCounters{syscalls: int(s.Sendmsg + s.Recvmsg), messages: int(s.MessagesSent), bytes: int(s.BytesSent)}
}

// commit encodes ops as one transaction and commits it against gen.
func (k *conn) commit(fam nft.Family, table string, ops []op, gen uint32) (uint32, error) {
	g, err := k.c.Commit(encode(fam, table, ops), &gen)
	switch {
	case err == nil:
		return g, nil
	case errors.Is(err, nft.ErrGenerationChanged):
		return 0, fmt.Errorf("%w: %w", errStale, err)
	case errors.Is(err, netlinkraw.ErrReplyTimeout):
		return 0, fmt.Errorf("%w: %w", errUnknown, err)
	}
	var ce *nft.CommitError
	if !errors.As(err, &ce) {
		return 0, fmt.Errorf("%w: %w", errUnknown, err)
	}
	return 0, err
}

// encode builds the transaction of ops.
func encode(fam nft.Family, table string, ops []op) *nft.Tx {
	tx := nft.NewTx()
	for i := range ops {
		o := &ops[i]
		switch o.kind {
		case opDelTable:
			tx.DelTable(o.label, fam, table)
		case opAddTable:
			t := *o.table
			t.Family, t.Name = fam, table
			tx.AddTable(o.label, t)
		case opAddSet:
			tx.AddSet(o.label, fam, table, *o.set)
		case opAddChain:
			tx.AddChain(o.label, fam, table, *o.chain)
		case opDelElems:
			tx.DelElems(o.label, fam, table, o.name, o.elems)
		case opFlushChain:
			tx.FlushChain(o.label, fam, table, o.name)
		case opAddElems:
			tx.AddElems(o.label, fam, table, nft.Set{Name: o.name}, o.elems)
		case opAddRule:
			for j := range o.rule.anon {
				a := &o.rule.anon[j]
				tx.AddSet(o.label, fam, table, a.set)
				if len(a.elems) > 0 {
					tx.AddElems(o.label, fam, table, a.set, a.elems)
				}
			}
			tx.AddRule(o.label, fam, table, o.rule.rule)
		case opDelChain:
			tx.DelChain(o.label, fam, table, o.name)
		case opDelSet:
			tx.DelSet(o.label, fam, table, o.name)
		}
	}
	return tx
}

// read dumps a family's table: its chains and rules, its sets with their
// elements (not those of dynamic sets, the packets', nor those of the
// anonymous sets the Proxier named: anon.go), and the anonymous sets its
// rules refer to.
func (k *conn) read(fam nft.Family, table string) (*kernelTable, error) {
	tables, err := k.c.Tables(fam)
	if err != nil {
		return nil, err
	}
	kt := &kernelTable{chains: map[string]*kernelChain{}, sets: map[string]*kernelSet{}, anon: map[string]*kernelSet{}}
	found := false
	for _, t := range tables {
		if t.Name == table {
			kt.table, found = t, true
		}
	}
	if !found {
		return nil, nil
	}
	chains, err := k.c.Chains(fam, table)
	if err != nil {
		return nil, err
	}
	for _, c := range chains {
		kt.chains[c.Name] = &kernelChain{chain: c}
	}
	rules, err := k.c.Rules(fam, table, "")
	if err != nil {
		return nil, err
	}
	for _, r := range rules {
		if c := kt.chains[r.Chain]; c != nil {
			c.rules = append(c.rules, r)
		}
	}
	sets, err := k.c.Sets(fam, table)
	if err != nil {
		return nil, err
	}
	for _, s := range sets {
		ks := &kernelSet{set: s}
		if s.Flags&nft.SetAnonymous != 0 {
			ks.hash, _ = nameHash(s.Name)
		}
		if s.Flags&nft.SetEval == 0 && ks.hash == "" {
			if ks.elems, err = k.c.Elems(fam, table, s.Name); err != nil {
				return nil, err
			}
		}
		if s.Flags&nft.SetAnonymous != 0 {
			kt.anon[s.Name] = ks
		} else {
			kt.sets[s.Name] = ks
		}
	}
	return kt, nil
}
