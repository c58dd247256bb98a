package iptables

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// kernelTable is one table as iptables-save printed it, its rules in
// canonical form (canonicalRule).
type kernelTable struct {
	chains map[string]bool
	rules  map[string][]string // chain -> lines in order
}

// text returns a chain's lines as rendering writes them.
func (t kernelTable) text(chain string) []byte {
	var b []byte
	for _, l := range t.rules[chain] {
		b = append(b, l...)
		b = append(b, '\n')
	}
	return b
}

// parseSave reads iptables-save's output of one table.
func parseSave(out []byte) kernelTable {
	t := kernelTable{chains: map[string]bool{}, rules: map[string][]string{}}
	var buf []byte
	// iptables-save prints a chain's rules together: they are collected
	// in lines, for chain cur, and stored when the chain changes.
	var cur string
	var lines []string
	for len(out) > 0 {
		var line []byte
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			line, out = out[:i], out[i+1:]
		} else {
			line, out = out, nil
		}
		switch {
		case len(line) > 0 && line[0] == ':':
			name, _, _ := bytes.Cut(line[1:], []byte(" "))
			t.chains[string(name)] = true
		case bytes.HasPrefix(line, []byte("-A ")):
			name, _, _ := bytes.Cut(line[3:], []byte(" "))
			if string(name) != cur {
				if lines != nil {
					t.rules[cur] = lines
				}
				cur = string(name)
				lines = t.rules[cur]
			}
			lines = append(lines, canonicalRule(line, &buf))
		}
	}
	if lines != nil {
		t.rules[cur] = lines
	}
	return t
}

// read returns the family's tables as the kernel holds them; in dry run,
// empty tables.
func (p *Proxier) read(f *family) (map[string]kernelTable, error) {
	out := map[string]kernelTable{}
	for _, name := range tables {
		if p.cfg.DryRun != nil {
			out[name] = kernelTable{chains: map[string]bool{}, rules: map[string][]string{}}
			continue
		}
		b, err := p.run(f.backend.Command(f.fc.fam, "save"), []string{"-t", name}, nil)
		if err != nil {
			return nil, fmt.Errorf("iptables: read %s table %s: %w", f.fc.fam, name, err)
		}
		out[name] = parseSave(b)
	}
	return out, nil
}

// txn is one iptables-restore input being built, table by table.
type txn struct {
	decl  [3][]byte       // per table: chain declarations
	body  [3][][]byte     // per table: rules, as slices of rendered text
	size  [3]int          // per table: bytes in body
	tail  [3]bytes.Buffer // per table: deletions and jumps, after the rules
	rules int
	st    SyncStats
}

// reset empties t for the next transaction, keeping its buffers.
func (t *txn) reset() {
	for i := range tables {
		t.decl[i] = t.decl[i][:0]
		clear(t.body[i]) // drop the references to rendered text
		t.body[i] = t.body[i][:0]
		t.size[i] = 0
		t.tail[i].Reset()
	}
	t.rules, t.st = 0, SyncStats{}
}

// tableIndex returns the index of a table in tables (a switch: it is
// called for every chain a full sync writes).
func tableIndex(name string) int {
	switch name {
	case "filter":
		return 0
	case "nat":
		return 1
	case "mangle":
		return 2
	}
	return slices.Index(tables, name)
}

func (t *txn) declare(table, chain string) {
	i := tableIndex(table)
	if t.decl[i] == nil {
		t.decl[i] = make([]byte, 0, 128) // a partial sync of one service: one allocation
	}
	t.decl[i] = append(append(append(t.decl[i], ':'), chain...), " - [0:0]\n"...)
	t.st.Chains++
}

// lines adds n rule lines; text is kept, not copied, until the restore.
// Text that continues the last text added in memory (the next chain of
// the same rendering) extends it.
func (t *txn) lines(table string, text []byte, n int) {
	i := tableIndex(table)
	if k := len(t.body[i]) - 1; k >= 0 && len(text) > 0 {
		if last := t.body[i][k]; cap(last) > len(last) && &last[:len(last)+1][len(last)] == &text[0] {
			t.body[i][k] = last[:len(last)+len(text)]
			t.size[i] += len(text)
			t.rules += n
			t.st.Rules += n
			return
		}
	}
	t.body[i] = append(t.body[i], text)
	t.size[i] += len(text)
	t.rules += n
	t.st.Rules += n
}

func (t *txn) empty() bool {
	for i := range t.decl {
		if len(t.decl[i])+t.size[i]+t.tail[i].Len() > 0 {
			return false
		}
	}
	return true
}

// appendTo appends the restore input to b (whose capacity is reused).
func (t *txn) appendTo(b []byte) []byte {
	n := 0
	for i := range tables {
		n += len("*mangle\nCOMMIT\n") + len(t.decl[i]) + t.size[i] + t.tail[i].Len()
	}
	b = slices.Grow(b, n)
	for i, name := range tables {
		if len(t.decl[i])+t.size[i]+t.tail[i].Len() == 0 {
			continue
		}
		b = append(b, "*"+name+"\n"...)
		b = append(b, t.decl[i]...)
		for _, p := range t.body[i] {
			b = append(b, p...)
		}
		b = append(b, t.tail[i].Bytes()...)
		b = append(b, "COMMIT\n"...)
	}
	return b
}

// restore runs one transaction (or prints it in dry run).
func (p *Proxier) restore(f *family, t *txn, st *SyncStats, partial bool) error {
	if t.empty() {
		return nil
	}
	// The input of one transaction is dead once it ran: the next reuses
	// its buffer.
	input := t.appendTo(p.scratch[:0])
	p.scratch = input
	st.add(t.st)
	st.Restores++
	st.Bytes += len(input)
	if p.cfg.DryRun != nil {
		fmt.Fprintf(p.cfg.DryRun, "# %s %s (%s)\n", f.backend.Command(f.fc.fam, "restore"), strings.Join(f.backend.RestoreArgs(), " "), f.fc.fam)
		_, err := p.cfg.DryRun.Write(input)
		return err
	}
	if _, err := p.run(f.backend.Command(f.fc.fam, "restore"), f.backend.RestoreArgs(), input); err != nil {
		st.Failures++
		if partial {
			st.PartialFailures++
		}
		st.FailedFamilies = append(st.FailedFamilies, f.fc.fam)
		st.PartialFailed = append(st.PartialFailed, partial)
		return fmt.Errorf("iptables: restore %s rules: %w", f.fc.fam, err)
	}
	p.gen.wrote(f, input)
	return nil
}
