package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane/conntrack"
	"github.com/proxysinks/proxysinks/dataplane/rules"
)

// Config configures a Proxier.
type Config struct {
	// IPv4 and IPv6 select the families to program; both may be set (one
	// process serves a dual-stack node). At least one is required.
	IPv4, IPv6 bool
	// MasqueradeBit is the fwmark bit of packets to masquerade
	// (--iptables-masquerade-bit, 0-31; kube-proxy's default is 14).
	MasqueradeBit int
	// MasqueradeAll masquerades all traffic to cluster IPs.
	MasqueradeAll bool
	// ClusterCIDRs are the pod networks (--cluster-cidr): traffic to a
	// cluster IP from outside them is masqueraded, and pod traffic to an
	// external destination of an eTP=Local service is short-circuited.
	// The first prefix of each family is used.
	ClusterCIDRs []netip.Prefix
	// NodeIPs are the node's addresses (one per family); a load-balancer
	// source range that contains the node's address also admits the
	// load-balancer IPs as sources.
	NodeIPs []netip.Addr
	// NodePortIPs restrict node ports to these addresses
	// (--nodeport-addresses resolved to this node's addresses); empty
	// means every local address.
	NodePortIPs []netip.Addr
	// LocalhostNodePorts serves IPv4 node ports on 127.0.0.0/8, as
	// kube-proxy's --iptables-localhost-nodeports (which also needs
	// net.ipv4.conf.all.route_localnet=1, set by the caller), with the
	// KUBE-FIREWALL guard rule.
	LocalhostNodePorts bool
	// TCPBeLiberal leaves out KUBE-FORWARD's INVALID-state drop, as
	// kube-proxy does when net.netfilter.nf_conntrack_tcp_be_liberal=1.
	TCPBeLiberal bool
	// NoRandomFully leaves --random-fully off MASQUERADE.
	NoRandomFully bool

	// Run runs iptables-save and iptables-restore; nil means
	// rules.Exec. Tests run the tools in a network namespace.
	Run rules.Runner
	// Backend is "nft" or "legacy"; empty detects what the node uses, as
	// the IPVS sinks do (rules.Detect).
	Backend rules.Backend
	// DryRun, when set, receives every iptables-restore input instead of
	// the kernel; the kernel is neither read nor written.
	DryRun io.Writer
	// Conntrack flushes stale UDP flows after a sync; nil flushes nothing.
	Conntrack conntrack.Flusher
	// MaxRestoreRules bounds the rules of one iptables-restore in a full
	// sync: service chains are written in transactions of at most this
	// many rules (whole services), then the top-level chains in one last
	// transaction, as the nf_tables backend is superlinear in the size of
	// one transaction. 0 means a bound that grows with the table
	// (adaptiveLimit) with nft and one transaction with legacy (which
	// rewrites the whole table on every restore); a negative value writes
	// everything in one transaction, as kube-proxy does.
	MaxRestoreRules int
	// SyncPeriod is the period of SyncLoop's full resyncs.
	SyncPeriod time.Duration
}

// adaptiveLimit is the default bound of an nf_tables transaction when the
// nat table holds existing rules: sqrt(65 * existing), at least 1,000. On
// this project's build host a transaction cost about 0.65 µs per existing
// rule plus about 10 ns times the square of its own size (README.md); the
// bound minimizes their sum per rule.
func adaptiveLimit(existing int) int {
	return max(1000, int(math.Sqrt(65*float64(existing))))
}

// SyncStats describes one sync.
type SyncStats struct {
	// Full is true for a full sync (first sync, Resync, a full snapshot,
	// after a failure); false for a partial one.
	Full bool
	// Restores counts iptables-restore runs (or dry-run outputs).
	Restores int
	// Bytes is the size of the restore input.
	Bytes int
	// Rules counts the rule lines written (-A, -I, -D).
	Rules int
	// Chains counts the chains declared (created or flushed).
	Chains int
	// DeletedChains counts the chains deleted.
	DeletedChains int
	// Failures counts failed iptables-restore runs; PartialFailures those
	// of partial syncs.
	Failures, PartialFailures int
	// ConntrackFlushed counts the conntrack entries deleted.
	ConntrackFlushed int
	// Duration is the wall time of the sync.
	Duration time.Duration
}

func (s *SyncStats) add(o SyncStats) {
	s.Restores += o.Restores
	s.Bytes += o.Bytes
	s.Rules += o.Rules
	s.Chains += o.Chains
	s.DeletedChains += o.DeletedChains
	s.Failures += o.Failures
	s.PartialFailures += o.PartialFailures
	s.ConntrackFlushed += o.ConntrackFlushed
}

// family is the Proxier's state for one address family.
type family struct {
	fc      famConfig
	backend rules.Backend
	svcs    map[client.ServiceKey]*rendered // as last written to the kernel
	eps     int                             // sum of svcs' eps
	large   bool
	full    bool // the next sync must be full
	synced  bool // a sync succeeded: svcs is what this process wrote
}

// Proxier programs kube-proxy's iptables-mode ruleset for the services of
// the snapshots it is given. Because its chains are the node's, only one
// Proxier may be active on a node. It is safe for concurrent use: syncs are
// serialized.
type Proxier struct {
	mu     sync.Mutex
	cfg    Config
	run    rules.Runner
	fams   []*family
	last   *client.Snapshot
	totals SyncStats
	// largeAt is the large-cluster threshold (largeClusterEndpoints;
	// tests lower it).
	largeAt int
}

// NewProxier checks the configuration, detects the iptables backend of
// each family (unless configured or in dry run) and returns a Proxier that
// has written nothing yet: its first sync is a full one.
func NewProxier(cfg Config) (*Proxier, error) {
	if !cfg.IPv4 && !cfg.IPv6 {
		return nil, errors.New("iptables: no address family enabled")
	}
	if cfg.MasqueradeBit < 0 || cfg.MasqueradeBit > 31 {
		return nil, fmt.Errorf("iptables: masquerade bit %d out of range [0, 31]", cfg.MasqueradeBit)
	}
	p := &Proxier{cfg: cfg, run: cfg.Run, largeAt: largeClusterEndpoints}
	if p.run == nil {
		p.run = rules.Exec
	}
	for _, f := range []rules.Family{rules.IPv4, rules.IPv6} {
		if f == rules.IPv4 && !cfg.IPv4 || f == rules.IPv6 && !cfg.IPv6 {
			continue
		}
		fc := famConfig{fam: f, mark: hexMark(cfg.MasqueradeBit), masqueradeAll: cfg.MasqueradeAll}
		for _, c := range cfg.ClusterCIDRs {
			if c.Addr().Is6() == (f == rules.IPv6) && !fc.localCIDR.IsValid() {
				fc.localCIDR = c.Masked()
			}
		}
		for _, a := range cfg.NodeIPs {
			if a.Is6() == (f == rules.IPv6) && !fc.nodeIP.IsValid() {
				fc.nodeIP = a
			}
		}
		fam := &family{fc: fc, backend: cfg.Backend, svcs: map[client.ServiceKey]*rendered{}, full: true}
		if fam.backend == "" {
			if cfg.DryRun != nil {
				fam.backend = rules.NFT
			} else {
				b, err := rules.Detect(f, p.run)
				if err != nil {
					return nil, fmt.Errorf("iptables: detect backend: %w", err)
				}
				fam.backend = b
			}
		}
		p.fams = append(p.fams, fam)
	}
	return p, nil
}

// Backends returns the iptables backend of each enabled family (IPv4
// first).
func (p *Proxier) Backends() []rules.Backend {
	var out []rules.Backend
	for _, f := range p.fams {
		out = append(out, f.backend)
	}
	return out
}

// Snapshot programs a snapshot: a partial sync of the changed services when
// the snapshot lists its changes and the previous sync succeeded, else a
// full sync. Errors name the service or the restore that failed; a service
// that cannot be rendered is skipped and the others are programmed.
func (p *Proxier) Snapshot(s *client.Snapshot) (SyncStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	full := s.Full || p.last == nil
	p.last = s
	return p.sync(s, full)
}

// Resync is the periodic full sync of the last snapshot: every chain is
// compared with the kernel and rewritten where it differs (drift repaired),
// chains of removed services are deleted. With no snapshot yet it does
// nothing.
func (p *Proxier) Resync() (SyncStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		return SyncStats{}, nil
	}
	return p.sync(p.last, true)
}

// Totals returns the sums of every sync's statistics.
func (p *Proxier) Totals() SyncStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.totals
}

func (p *Proxier) sync(s *client.Snapshot, full bool) (SyncStats, error) {
	start := time.Now()
	st := SyncStats{Full: full}
	var errs []error
	var targets []conntrack.Target
	for _, f := range p.fams {
		var fs SyncStats
		var t []conntrack.Target
		var err error
		if full || f.full {
			st.Full = true
			fs, t, err = p.syncFull(f, s)
		} else {
			fs, t, err = p.syncPartial(f, s)
		}
		st.add(fs)
		st.Full = st.Full || fs.Full
		targets = append(targets, t...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if p.cfg.Conntrack != nil && len(targets) > 0 {
		n, err := p.cfg.Conntrack.FlushUDP(targets)
		st.ConntrackFlushed = n
		if err != nil {
			errs = append(errs, fmt.Errorf("iptables: flush stale UDP conntrack entries: %w", err))
		}
	}
	st.Duration = time.Since(start)
	p.totals.add(st)
	return st, errors.Join(errs...)
}

// renderAll renders every service of s for a family, in key order.
func (f *family) renderAll(s *client.Snapshot, large bool) (keys []client.ServiceKey, out map[client.ServiceKey]*rendered, eps int, errs []error) {
	out = make(map[client.ServiceKey]*rendered, s.Len())
	for se := range s.All() {
		r := &rendered{}
		k := se.Service.Key()
		if err := render(&f.fc, se, large, r); err != nil {
			errs = append(errs, err)
			// Keep what the kernel has for a service we cannot render:
			// its last good rules stay in place.
			old := f.svcs[k]
			if old == nil {
				continue
			}
			r = old
		}
		keys = append(keys, k)
		out[k] = r
		eps += r.eps
	}
	return keys, out, eps, errs
}

// kernelTable is one table as iptables-save printed it.
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

func parseSave(out []byte) kernelTable {
	t := kernelTable{chains: map[string]bool{}, rules: map[string][]string{}}
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
			t.rules[string(name)] = append(t.rules[string(name)], string(line))
		}
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
	decl  [3]bytes.Buffer // per table: chain declarations
	body  [3][][]byte     // per table: rules, as slices of rendered text
	size  [3]int          // per table: bytes in body
	tail  [3]bytes.Buffer // per table: deletions and jumps, after the rules
	rules int
	st    SyncStats
}

func tableIndex(name string) int { return slices.Index(tables, name) }

func (t *txn) declare(table, chain string) {
	b := &t.decl[tableIndex(table)]
	b.WriteByte(':')
	b.WriteString(chain)
	b.WriteString(" - [0:0]\n")
	t.st.Chains++
}

// lines adds rule lines; text is kept, not copied, until the restore.
func (t *txn) lines(table string, text []byte) {
	i := tableIndex(table)
	t.body[i] = append(t.body[i], text)
	t.size[i] += len(text)
	n := bytes.Count(text, []byte("\n"))
	t.rules += n
	t.st.Rules += n
}

func (t *txn) empty() bool {
	for i := range t.decl {
		if t.decl[i].Len()+t.size[i]+t.tail[i].Len() > 0 {
			return false
		}
	}
	return true
}

func (t *txn) bytes() []byte {
	n := 0
	for i := range tables {
		n += len("*mangle\nCOMMIT\n") + t.decl[i].Len() + t.size[i] + t.tail[i].Len()
	}
	b := make([]byte, 0, n)
	for i, name := range tables {
		if t.decl[i].Len()+t.size[i]+t.tail[i].Len() == 0 {
			continue
		}
		b = append(b, "*"+name+"\n"...)
		b = append(b, t.decl[i].Bytes()...)
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
	input := t.bytes()
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
		return fmt.Errorf("iptables: restore %s rules: %w", f.fc.fam, err)
	}
	return nil
}

// sameMultiset reports whether two chains hold the same rules, in any
// order, and end with the same rule (service rules in top-level chains are
// independent of each other, but KUBE-SERVICES' node-port rule must stay
// last).
func sameMultiset(have, want []string) bool {
	if len(have) != len(want) {
		return false
	}
	if len(have) > 0 && have[len(have)-1] != want[len(want)-1] {
		return false
	}
	a, b := slices.Clone(have), slices.Clone(want)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// syncFull renders every service, compares each owned chain with the
// kernel and rewrites those that differ: service chains in bounded
// transactions first, then the top-level chains, stale chains' deletion
// and missing jumps in one last transaction.
func (p *Proxier) syncFull(f *family, s *client.Snapshot) (SyncStats, []conntrack.Target, error) {
	var st SyncStats
	st.Full = true
	f.full = true
	total := 0
	for se := range s.All() {
		total += countEndpoints(se, f.fc.fam == rules.IPv6)
	}
	f.large = total > p.largeAt
	keys, svcs, eps, errs := f.renderAll(s, f.large)
	kern, err := p.read(f)
	if err != nil {
		return st, nil, errors.Join(append(errs, err)...)
	}
	nat := kern["nat"]
	// existing counts the nat rules in the kernel: with nft, every
	// transaction costs in proportion to them, and within one transaction
	// the cost grows with the square of its size, so the adaptive bound
	// grows as the square root of the table.
	existing := 0
	for _, l := range nat.rules {
		existing += len(l)
	}
	limit := p.cfg.MaxRestoreRules
	adaptive := limit == 0 && f.backend != rules.Legacy
	if limit == 0 && f.backend == rules.Legacy {
		// Legacy rewrites the whole table on every restore: one
		// transaction is fastest and stays linear.
		limit = -1
	}
	if adaptive {
		limit = adaptiveLimit(existing)
	}
	t := &txn{}
	nchains := 0
	for _, r := range svcs {
		nchains += len(r.chains)
	}
	want := make(map[string]bool, nchains)
	// Top-level chains: those service chains refer to (KUBE-MARK-MASQ) and
	// the other service-independent ones first, those that refer to
	// service chains last, after every service chain exists.
	statics := staticChains(&p.cfg, &f.fc)
	writeTop := func(sc staticChain) {
		lines := slices.Clone(sc.rules)
		if sc.slot >= 0 {
			var svcLines []string
			for _, k := range keys {
				svcLines = append(svcLines, svcs[k].topLines(sc.slot)...)
			}
			for i := range svcLines {
				svcLines[i] = strings.TrimSuffix(svcLines[i], "\n")
			}
			lines = append(svcLines, lines...)
		}
		have := kern[sc.table]
		if have.chains[sc.chain] && sameMultiset(have.rules[sc.chain], lines) {
			return
		}
		t.declare(sc.table, sc.chain)
		for _, l := range lines {
			t.lines(sc.table, []byte(l+"\n"))
		}
	}
	for _, sc := range statics {
		if sc.slot < 0 {
			writeTop(sc)
		}
	}
	for _, k := range keys {
		r := svcs[k]
		for _, c := range r.chains {
			want[c.name] = true
			text := r.text(c)
			if nat.chains[c.name] && bytes.Equal(nat.text(c.name), text) {
				continue
			}
			t.declare("nat", c.name)
			t.lines("nat", text)
		}
		if limit > 0 && t.rules >= limit {
			existing += t.rules
			if err := p.restore(f, t, &st, false); err != nil {
				return st, nil, errors.Join(append(errs, err)...)
			}
			t = &txn{}
			if adaptive {
				limit = adaptiveLimit(existing)
			}
		}
	}
	for _, sc := range statics {
		if sc.slot >= 0 {
			writeTop(sc)
		}
	}
	// Chains of services that are gone.
	var stale []string
	for name := range nat.chains {
		if isServiceChain(name) && !want[name] {
			stale = append(stale, name)
		}
	}
	slices.Sort(stale)
	for _, name := range stale {
		t.declare("nat", name)
		fmt.Fprintf(&t.tail[tableIndex("nat")], "-X %s\n", name)
		t.st.DeletedChains++
	}
	for _, j := range jumps(p.cfg.LocalhostNodePorts, f.fc.fam) {
		line := "-A " + j.from + " " + j.rule
		if slices.Contains(kern[j.table].rules[j.from], line) {
			continue
		}
		fmt.Fprintf(&t.tail[tableIndex(j.table)], "-I %s 1 %s\n", j.from, j.rule)
		t.st.Rules++
	}
	if err := p.restore(f, t, &st, false); err != nil {
		return st, nil, errors.Join(append(errs, err)...)
	}
	// The first sync of a process has nothing to compare with: it flushes
	// nothing (a restart with an unchanged cluster writes nothing).
	var targets []conntrack.Target
	if f.synced {
		targets = f.staleFlows(svcs)
	}
	f.svcs, f.eps, f.full, f.synced = svcs, eps, false, true
	return st, targets, errors.Join(errs...)
}

// syncPartial writes only what the snapshot's changes alter: the changed
// chains of changed services, their rules in the top-level chains (deleted
// and added rule by rule) and the deletion of chains they no longer have.
func (p *Proxier) syncPartial(f *family, s *client.Snapshot) (SyncStats, []conntrack.Target, error) {
	var st SyncStats
	var errs []error
	type change struct {
		key      client.ServiceKey
		old, new *rendered
	}
	var changes []change
	eps := f.eps
	for _, c := range s.Changes {
		ch := change{key: c.Key, old: f.svcs[c.Key]}
		if c.Service != nil {
			r := &rendered{}
			if err := render(&f.fc, c.Service, f.large, r); err != nil {
				// Keep what the kernel has for a service we cannot
				// render: the rest keeps working.
				errs = append(errs, err)
				continue
			}
			ch.new = r
			eps += r.eps
		}
		if ch.old != nil {
			eps -= ch.old.eps
		}
		changes = append(changes, ch)
	}
	if (eps > p.largeAt) != f.large {
		st, t, err := p.syncFull(f, s)
		return st, t, errors.Join(append(errs, err)...)
	}
	t := &txn{}
	nat := tableIndex("nat")
	for _, ch := range changes {
		var newChains map[string]bool
		if ch.new != nil {
			newChains = make(map[string]bool, len(ch.new.chains))
			for _, c := range ch.new.chains {
				newChains[c.name] = true
				text := ch.new.text(c)
				if ch.old != nil {
					if old, ok := ch.old.chainText(c.name); ok && bytes.Equal(old, text) {
						continue
					}
				}
				t.declare("nat", c.name)
				t.lines("nat", text)
			}
		}
		for slot := range numTop {
			var oldLines, newLines []string
			if ch.old != nil {
				oldLines = ch.old.topLines(slot)
			}
			if ch.new != nil {
				newLines = ch.new.topLines(slot)
			}
			removed, added := multisetDiff(oldLines, newLines)
			tb := tableIndex(topChains[slot].table)
			for _, l := range removed {
				t.tail[tb].WriteString("-D " + strings.TrimPrefix(l, "-A "))
				t.st.Rules++
			}
			for _, l := range added {
				rest := strings.TrimPrefix(l, "-A "+topChains[slot].chain+" ")
				if slot == topNATServices {
					t.tail[tb].WriteString("-I " + topChains[slot].chain + " 1 " + rest)
				} else {
					t.tail[tb].WriteString("-A " + topChains[slot].chain + " " + rest)
				}
				t.st.Rules++
			}
		}
		if ch.old != nil {
			for _, c := range ch.old.chains {
				if !newChains[c.name] {
					t.declare("nat", c.name)
				}
			}
		}
	}
	// Deletions go after every rule that referred to the chains is gone.
	for _, ch := range changes {
		if ch.old == nil {
			continue
		}
		for _, c := range ch.old.chains {
			gone := ch.new == nil
			if !gone {
				_, has := ch.new.chainText(c.name)
				gone = !has
			}
			if gone {
				fmt.Fprintf(&t.tail[nat], "-X %s\n", c.name)
				t.st.DeletedChains++
			}
		}
	}
	if err := p.restore(f, t, &st, true); err != nil {
		f.full = true
		return st, nil, errors.Join(append(errs, err)...)
	}
	old := make(map[client.ServiceKey]*rendered, len(changes))
	for _, ch := range changes {
		old[ch.key] = ch.old
		if ch.new == nil {
			delete(f.svcs, ch.key)
		} else {
			f.svcs[ch.key] = ch.new
		}
	}
	f.eps = eps
	var targets []conntrack.Target
	for _, ch := range changes {
		targets = append(targets, udpTargets(ch.old, ch.new)...)
	}
	return st, targets, errors.Join(errs...)
}

// multisetDiff returns the lines of old missing from new and those of new
// missing from old, counting repeats.
func multisetDiff(old, new []string) (removed, added []string) {
	if slices.Equal(old, new) {
		return nil, nil
	}
	count := map[string]int{}
	for _, l := range old {
		count[l]++
	}
	for _, l := range new {
		if count[l] > 0 {
			count[l]--
		} else {
			added = append(added, l)
		}
	}
	for _, l := range old {
		if count[l] > 0 {
			count[l]--
			removed = append(removed, l)
		}
	}
	return removed, added
}

// staleFlows returns the conntrack targets of a full sync: every service
// compared with what the family last programmed.
func (f *family) staleFlows(svcs map[client.ServiceKey]*rendered) []conntrack.Target {
	keys := make([]client.ServiceKey, 0, len(svcs)+len(f.svcs))
	for k := range svcs {
		keys = append(keys, k)
	}
	for k := range f.svcs {
		if svcs[k] == nil {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, client.ServiceKey.Compare)
	var out []conntrack.Target
	for _, k := range keys {
		out = append(out, udpTargets(f.svcs[k], svcs[k])...)
	}
	return out
}

// udpTargets returns the UDP flows a service change leaves stale: flows to
// endpoints that are gone, and every flow to a UDP port that gains its
// first endpoint (datagrams sent while it had none were not DNAT'd).
func udpTargets(old, new *rendered) []conntrack.Target {
	var out []conntrack.Target
	find := func(r *rendered, name string) *udpPort {
		if r == nil {
			return nil
		}
		for i := range r.udp {
			if r.udp[i].name == name {
				return &r.udp[i]
			}
		}
		return nil
	}
	if old != nil {
		for _, op := range old.udp {
			np := find(new, op.name)
			for _, ep := range op.eps {
				if np != nil && slices.Contains(np.eps, ep) {
					continue
				}
				for _, vip := range op.vips {
					out = append(out, conntrack.Target{Service: netip.AddrPortFrom(vip, op.port), Backend: ep})
				}
			}
		}
	}
	if new != nil {
		for _, np := range new.udp {
			op := find(old, np.name)
			if len(np.eps) == 0 || op != nil && len(op.eps) > 0 {
				continue
			}
			for _, vip := range np.vips {
				out = append(out, conntrack.Target{Service: netip.AddrPortFrom(vip, np.port)})
			}
		}
	}
	return out
}

// Sync immediately runs a full sync of the last snapshot (the seed's
// entry point; see Resync).
func (p *Proxier) Sync() error {
	_, err := p.Resync()
	return err
}

// SyncLoop runs Resync every Config.SyncPeriod until ctx ends, reporting
// each sync's error to onError (which may be nil).
func (p *Proxier) SyncLoop(ctx context.Context, onError func(error)) {
	period := p.cfg.SyncPeriod
	if period <= 0 {
		period = 30 * time.Second
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := p.Resync(); err != nil && onError != nil {
				onError(err)
			}
		}
	}
}

// OnServiceUpdate programs the complete set of services with their
// endpoints (the seed's entry point: a full sync of that state). In this
// project's model endpoints travel with their service, so it is the same
// as OnEndpointsUpdate.
func (p *Proxier) OnServiceUpdate(all []*client.ServiceEndpoints) error {
	return p.onFullState(all)
}

// OnEndpointsUpdate programs the complete set of services with their
// endpoints (see OnServiceUpdate).
func (p *Proxier) OnEndpointsUpdate(all []*client.ServiceEndpoints) error {
	return p.onFullState(all)
}

func (p *Proxier) onFullState(all []*client.ServiceEndpoints) error {
	sorted := slices.Clone(all)
	slices.SortFunc(sorted, func(a, b *client.ServiceEndpoints) int { return a.Service.Key().Compare(b.Service.Key()) })
	s := client.NewSnapshot(sorted, nil)
	s.Full = true
	_, err := p.Snapshot(s)
	return err
}
