package nftables

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// kernel is what the Proxier needs of nf_tables (kernel.go binds
// netlinkraw/nft's Conn; tests may fake it).
type kernel interface {
	// generation returns the ruleset generation of the namespace.
	generation() (uint32, error)
	// commit writes ops to a family's table as one transaction that the
	// kernel refuses unless its generation is still gen, and returns the
	// generation after it. A refusal is an error naming the objects
	// refused (ops' labels); nothing of it is applied.
	commit(fam nft.Family, table string, ops []op, gen uint32) (uint32, error)
	// read dumps a family's table, nil when it does not exist.
	read(fam nft.Family, table string) (*kernelTable, error)
	// counters returns the connection's system calls, messages and bytes
	// sent so far.
	counters() ioCounters
	close() error
}

// ioCounters are a connection's counts of system calls, messages and
// bytes sent.
type ioCounters struct {
	syscalls, messages, bytes int
}

// errStale matches a commit the kernel refused because another writer
// committed since the generation it was made against (ERESTART).
var errStale = errors.New("nf_tables generation moved")

// errUnknown matches a commit whose outcome is unknown (no answer from
// the kernel): the kernel is read before the next one.
var errUnknown = errors.New("outcome of the transaction unknown")

func (p *Proxier) sync(s *client.Snapshot, full bool) (SyncStats, error) {
	start := time.Now()
	st := SyncStats{Full: full}
	clear(p.failedNow)
	ws := make([]*wanted, len(p.fams))
	for i, f := range p.fams {
		ws[i] = p.want(f, s)
	}
	var errs []error
	if p.k == nil {
		rss := make([]*ruleset.Ruleset, len(ws))
		for i, w := range ws {
			rss[i] = w.ruleset()
		}
		p.dryRun(rss, &st)
	} else if err := p.write(ws, s, &st); err != nil {
		errs = append(errs, err)
	}
	for _, w := range ws {
		if w.err != nil {
			errs = append(errs, w.err)
		}
	}
	st.Duration = time.Since(start)
	p.totals.add(st)
	return st, errors.Join(errs...)
}

// want renders family f's ruleset for s, with the services the
// quarantine holds in their held version (quarantine.go).
func (p *Proxier) want(f *family, s *client.Snapshot) *wanted {
	w := &wanted{p: p, v6: f.fam == nft.FamilyIPv6, s: p.held(f, s)}
	var err error
	if p.delta != nil && p.k != nil {
		w.d, err = p.delta(w.s, w.v6)
		w.lazy = true
	} else {
		w.rs, err = p.render(w.s, w.v6)
	}
	if err != nil {
		w.err = fmt.Errorf("nftables: render %s: %w", f.name, err)
	}
	return w
}

// wanted is one family's render: the Delta from the previous render (when
// the renderer tells it), and the whole ruleset, assembled when needed.
type wanted struct {
	p  *Proxier
	v6 bool
	d  *ruleset.Delta
	rs *ruleset.Ruleset
	// lazy: rs is assembled from the renderer on demand.
	lazy bool
	// s is the snapshot rendered; err the render's error.
	s   *client.Snapshot
	err error
}

func (w *wanted) ruleset() *ruleset.Ruleset {
	if w.rs == nil && w.lazy {
		w.rs = w.p.assemble(w.v6)
	}
	return w.rs
}

// dryRun writes the script of each family's ruleset that changed.
func (p *Proxier) dryRun(rss []*ruleset.Ruleset, st *SyncStats) {
	for i, f := range p.fams {
		rs := rss[i]
		if rs == nil {
			continue
		}
		script := rs.Script()
		if script == f.printed {
			continue
		}
		f.printed = script
		f.rules = countRules(rs)
		if _, err := io.WriteString(p.cfg.DryRun, script); err != nil {
			p.log.Warn("nftables: dry run: write the script", "family", f.name, "error", err)
		}
		st.Transactions++
	}
}

// write brings every family's table to its ruleset: when the generation
// moved since the Proxier last knew the kernel, the tables are read first
// (adopt); then one transaction per family carries what differs.
func (p *Proxier) write(ws []*wanted, s *client.Snapshot, st *SyncStats) error {
	c0 := p.k.counters()
	defer func() {
		c1 := p.k.counters()
		st.Syscalls += c1.syscalls - c0.syscalls
		st.Messages += c1.messages - c0.messages
		st.Bytes += c1.bytes - c0.bytes
	}()
	g, err := p.k.generation()
	if err != nil {
		p.genKnown = false
		return fmt.Errorf("nftables: read the ruleset generation: %w", err)
	}
	read := !p.genKnown || g != p.gen
	known := true
	var errs []error
	for i, f := range p.fams {
		if ws[i].rs == nil && !ws[i].lazy {
			continue
		}
		ng, err := p.writeFamily(f, ws[i], g, read, st)
		for err != nil {
			// The kernel refused objects of services alone: quarantine
			// them and write the rest, holding them.
			var re *refusedError
			if !errors.As(err, &re) || !p.refuse(f, s, re) {
				break
			}
			ws[i] = p.want(f, s)
			g = ng
			ng, err = p.writeFamily(f, ws[i], g, false, st)
		}
		if err != nil {
			errs = append(errs, err)
			if errors.Is(err, errStale) || errors.Is(err, errUnknown) {
				known = false
			}
			continue
		}
		g = ng
		p.settle(f, s, ws[i].s)
	}
	p.gen, p.genKnown = g, known
	return errors.Join(errs...)
}

// writeFamily reads (when read) and writes one family's table; it
// returns the generation after its transaction. A transaction refused
// for a stale generation is made again, once, after reading the table.
func (p *Proxier) writeFamily(f *family, w *wanted, g uint32, read bool, st *SyncStats) (uint32, error) {
	if !read && f.synced && w.d != nil && f.cur.exists && !f.cur.replace && f.tc != nil {
		ng, err := p.writeDelta(f, w.d, g, st)
		switch {
		case err == nil:
			return ng, nil
		case errors.Is(err, errStale):
			p.log.Info("nftables: another writer committed during the sync; reading the table again", "family", f.name)
			if g, err = p.k.generation(); err != nil {
				return g, errors.Join(errUnknown, fmt.Errorf("nftables: read the ruleset generation: %w", err))
			}
			read = true
		case errors.As(err, new(*nft.CommitError)):
			// Refused: the full plan commits the same changes, and
			// names the services of the refused operations.
		case !errors.Is(err, errNoDelta):
			return g, err
		}
	}
	f.synced = false
	rs := w.ruleset()
	tc, err := p.comp.table(rs)
	if err != nil {
		return g, fmt.Errorf("nftables: %s table %s: %w", f.name, rs.Table, err)
	}
	for attempt := 0; ; attempt++ {
		if read {
			if err := p.adopt(f, rs, tc, st); err != nil {
				return g, err
			}
		}
		var steps []*ruleset.Ruleset
		if !f.cur.exists {
			steps = firstSteps(rs, p.chunk())
		}
		for _, step := range append(steps, rs) {
			if g, err = p.writeStep(f, step, tc, g, w.s, st); err != nil {
				break
			}
		}
		if err == nil {
			f.rules = countRules(rs)
			f.synced, f.tc = w.lazy, tc
			return g, nil
		}
		if !errors.Is(err, errStale) || attempt > 0 {
			return g, err
		}
		p.log.Info("nftables: another writer committed during the sync; reading the table again", "family", f.name)
		if g, err = p.k.generation(); err != nil {
			return g, errors.Join(errUnknown, fmt.Errorf("nftables: read the ruleset generation: %w", err))
		}
		read = true
	}
}

// writeStep plans and commits one transaction that brings f's table to rs
// (rendered from s) and returns the generation after it. A refusal of
// services' objects alone is a *refusedError.
func (p *Proxier) writeStep(f *family, rs *ruleset.Ruleset, tc tableCompiler, g uint32, s *client.Snapshot, st *SyncStats) (uint32, error) {
	ops, next, err := plan(&f.cur, rs, tc, p.newID)
	if err != nil {
		return g, fmt.Errorf("nftables: %s table %s: %w", f.name, rs.Table, err)
	}
	if len(ops) == 0 {
		f.cur = next
		return g, nil
	}
	ng, err := p.k.commit(f.fam, rs.Table, ops, g)
	if err != nil {
		st.Failures++
		st.FailedFamilies = append(st.FailedFamilies, f.fam)
		err = fmt.Errorf("nftables: write %s table %s: %w", f.name, rs.Table, err)
		if svcs, ok := refusedServices(err, ops, &f.cur, &next, s); ok {
			return g, &refusedError{svcs: svcs, err: err}
		}
		return g, err
	}
	f.cur = next
	st.Transactions++
	countOps(ops, st)
	return ng, nil
}

// writeDelta plans and commits the transaction of a render's Delta,
// which f.cur (the previous render's ruleset, as written) takes in
// proportion to the change; errNoDelta when it cannot.
func (p *Proxier) writeDelta(f *family, d *ruleset.Delta, g uint32, st *SyncStats) (uint32, error) {
	ops, apply, rules, err := planDelta(&f.cur, d, f.tc, p.newID, f.name)
	if err != nil {
		if !errors.Is(err, errNoDelta) {
			f.synced = false
			err = fmt.Errorf("nftables: %s table %s: %w", f.name, TableName, err)
		}
		return g, err
	}
	if len(ops) > 0 {
		ng, err := p.k.commit(f.fam, TableName, ops, g)
		if err != nil {
			st.Failures++
			st.FailedFamilies = append(st.FailedFamilies, f.fam)
			f.synced = false
			return g, fmt.Errorf("nftables: write %s table %s: %w", f.name, TableName, err)
		}
		g = ng
		st.Transactions++
		countOps(ops, st)
	}
	apply()
	f.rules += rules
	return g, nil
}

func (p *Proxier) chunk() int {
	switch {
	case p.cfg.ChunkChains < 0:
		return 0
	case p.cfg.ChunkChains == 0:
		return defaultChunkChains
	}
	return p.cfg.ChunkChains
}

// adopt reads a family's table from the kernel and makes f.cur what it
// holds, in terms of the ruleset wanted: the objects equal to the
// ruleset's (or to what the Proxier wrote) are kept, the others marked
// to be repaired. A table the Proxier had written that another writer
// changed is logged and counted.
func (p *Proxier) adopt(f *family, rs *ruleset.Ruleset, tc tableCompiler, st *SyncStats) error {
	kt, err := p.k.read(f.fam, rs.Table)
	if err != nil {
		return fmt.Errorf("nftables: read %s table %s: %w", f.name, rs.Table, err)
	}
	st.Reads++
	ours := f.cur.exists
	base := f.cur
	if kt == nil && !ours {
		f.cur = applied{}
		return nil
	}
	if !ours {
		// Compare with the ruleset wanted, compiled whole (what would be
		// written anyway into an empty namespace).
		if _, base, err = plan(&applied{}, rs, tc, p.newID); err != nil {
			return fmt.Errorf("nftables: %s table %s: %w", f.name, rs.Table, err)
		}
	}
	cur, diffs := compareKernel(kt, &base)
	f.cur = cur
	if ours && len(diffs) > 0 {
		st.ForeignChanges++
		st.ForeignFamilies = append(st.ForeignFamilies, f.fam)
		p.log.Warn("nftables: another writer changed the table; repairing it (is kube-proxy still running on this node?)",
			"family", f.name, "table", rs.Table, "differences", len(diffs), "first", firstN(diffs, 5))
	}
	return nil
}

func firstN(l []string, n int) []string {
	if len(l) > n {
		return l[:n]
	}
	return l
}
