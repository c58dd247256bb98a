package nftables

import (
	"fmt"
	"maps"
	"slices"
	"syscall"

	"github.com/proxysinks/proxysinks/netlinkraw/nft"
)

// fakeKernel is an in-memory nf_tables: one generation, tables by family,
// transactions applied whole or not at all. Tests of the sync logic run
// against it; kernel_test.go runs the same against the real kernel.
type fakeKernel struct {
	gen    uint32
	tables map[nft.Family]*kernelTable
	// refuse makes a commit fail on the op whose label it is, refuseIf
	// on the ops it returns true for; the error is an *nft.CommitError,
	// as the kernel's.
	refuse   string
	refuseIf func(o *op) bool
	// commits and reads count calls; ops the operations committed.
	commits, reads, ops int
	// before runs before each commit (a concurrent writer).
	before func()
	// failNext makes the next commit fail (EINVAL on its first operation).
	failNext bool
}

func newFakeKernel() *fakeKernel { return &fakeKernel{gen: 1, tables: map[nft.Family]*kernelTable{}} }

func (k *fakeKernel) generation() (uint32, error) { return k.gen, nil }

func (k *fakeKernel) counters() ioCounters {
	return ioCounters{syscalls: k.commits + k.reads, messages: k.ops}
}

func (k *fakeKernel) close() error { return nil }

func (k *fakeKernel) read(fam nft.Family, table string) (*kernelTable, error) {
	k.reads++
	t := k.tables[fam]
	if t == nil {
		return nil, nil
	}
	return t.clone(), nil
}

func (t *kernelTable) clone() *kernelTable {
	c := &kernelTable{table: t.table, chains: map[string]*kernelChain{}, sets: map[string]*kernelSet{}, anon: map[string]*kernelSet{}}
	for n, ch := range t.chains {
		c.chains[n] = &kernelChain{chain: ch.chain, rules: slices.Clone(ch.rules)}
	}
	for n, s := range t.sets {
		c.sets[n] = &kernelSet{set: s.set, elems: slices.Clone(s.elems)}
	}
	maps.Copy(c.anon, t.anon)
	return c
}

// commit applies ops to a copy of the table and keeps it when all of them
// succeed, as the kernel does.
func (k *fakeKernel) commit(fam nft.Family, table string, ops []op, gen uint32) (uint32, error) {
	if k.before != nil {
		k.before()
	}
	if gen != k.gen {
		return 0, fmt.Errorf("%w: %w", errStale, syscall.ERESTART)
	}
	if k.failNext {
		k.failNext = false
		return 0, fmt.Errorf("%s %s: %w", ops[0].kind, ops[0].label, syscall.EINVAL)
	}
	var t *kernelTable
	if cur := k.tables[fam]; cur != nil {
		t = cur.clone()
	}
	tx := 0 // the index of o's first operation in the nft.Tx (encode)
	for _, o := range ops {
		if o.label == k.refuse || k.refuseIf != nil && k.refuseIf(&o) {
			return 0, &nft.CommitError{Ops: len(ops), Failed: []*nft.OpError{{Index: tx, Op: o.kind.String(), Label: o.label, Elem: -1, Err: syscall.EINVAL}}}
		}
		var err error
		if t, err = k.apply(t, &o); err != nil {
			return 0, fmt.Errorf("%s %s: %w", o.kind, o.label, err)
		}
		tx++
		if o.kind == opAddRule {
			for _, a := range o.rule.anon {
				tx++
				if len(a.elems) > 0 {
					tx++
				}
			}
		}
	}
	k.commits++
	k.ops += len(ops)
	if t == nil {
		delete(k.tables, fam)
	} else {
		k.tables[fam] = t
	}
	k.gen++
	return k.gen, nil
}

func (k *fakeKernel) apply(t *kernelTable, o *op) (*kernelTable, error) {
	if t == nil && o.kind != opAddTable {
		return nil, syscall.ENOENT
	}
	switch o.kind {
	case opAddTable:
		if t == nil {
			t = &kernelTable{table: *o.table, chains: map[string]*kernelChain{}, sets: map[string]*kernelSet{}, anon: map[string]*kernelSet{}}
		}
	case opDelTable:
		return nil, nil
	case opAddSet:
		t.sets[o.set.Name] = &kernelSet{set: *o.set}
	case opAddChain:
		t.chains[o.chain.Name] = &kernelChain{chain: *o.chain}
	case opFlushChain, opDelChain:
		if t.chains[o.name] == nil {
			return nil, syscall.ENOENT
		}
		t.chains[o.name].rules = nil
		if o.kind == opDelChain {
			delete(t.chains, o.name)
		}
	case opDelSet:
		delete(t.sets, o.name)
	case opAddElems, opDelElems:
		s := t.sets[o.name]
		if s == nil {
			return nil, syscall.ENOENT
		}
		for _, e := range o.elems {
			i := slices.IndexFunc(s.elems, func(x nft.Elem) bool { return elemKey(&x) == elemKey(&e) })
			switch {
			case o.kind == opAddElems && i >= 0:
				return nil, syscall.EEXIST
			case o.kind == opAddElems:
				s.elems = append(s.elems, e)
			case i < 0:
				return nil, syscall.ENOENT
			default:
				s.elems = slices.Delete(s.elems, i, i+1)
			}
		}
	case opAddRule:
		c := t.chains[o.name]
		if c == nil {
			return nil, syscall.ENOENT
		}
		c.rules = append(c.rules, o.rule.rule)
	}
	return t, nil
}

// encExpr encodes one expression of a rule (an NFTA_LIST_ELEM).
func encExpr(name string, data []byte) []byte {
	var e []byte
	e = appendAttr(e, nftaExprName, append([]byte(name), 0))
	e = appendAttr(e, nftaExprData|nlaNested, data)
	return appendAttr(nil, nftaListElem|nlaNested, e)
}
