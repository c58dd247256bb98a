package iptables

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/quarantine"
	"github.com/proxysinks/proxysinks/host/xtables"
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
	// Local tells traffic from this node's pods (kube-proxy's
	// detectLocalMode: by source prefix, the first of each family, or by
	// input interface): traffic to a cluster IP from elsewhere is
	// masqueraded, and pod traffic to an external destination of an
	// eTP=Local service is short-circuited. SetLocal changes it.
	Local xtables.LocalTraffic
	// NodeIPs are the node's addresses (one per family); a load-balancer
	// source range that contains the node's address also admits the
	// load-balancer IPs as sources.
	NodeIPs []netip.Addr
	// NodePortCIDRs are kube-proxy's --nodeport-addresses. In a family
	// that none of them belongs to (all of them when empty), node ports
	// are served on every local address; in the others only on the
	// NodePortIPs of that family (none: no node ports), as kube-proxy
	// decides per family.
	NodePortCIDRs []netip.Prefix
	// NodePortIPs are this node's addresses in NodePortCIDRs.
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
	// Accounting, when not nil, keeps kube-proxy's nfacct objects: every
	// full sync ensures them, and the rules count into those that exist
	// (AcctInvalidDropped, AcctLocalhostNodePorts). nil: no counting
	// (dry run).
	Accounting Accounting

	// Run runs iptables-save and iptables-restore; nil means
	// xtables.Exec. Tests run the tools in a network namespace. The stdin
	// it is given is reused after it returns: it must not keep it.
	Run xtables.Runner
	// Backend is "nft" or "legacy"; empty detects what the node uses, as
	// the IPVS sinks do (xtables.Detect).
	Backend xtables.Backend
	// DryRun, when set, receives every iptables-restore input instead of
	// the kernel (in one Write each, whose bytes are reused after it
	// returns); the kernel is neither read nor written.
	DryRun io.Writer
	// MaxRestoreRules bounds the rules of one iptables-restore in a full
	// sync: service chains are written in transactions of at most this
	// many rules (whole services), then the top-level chains in one last
	// transaction, as the nf_tables backend is superlinear in the size of
	// one transaction. 0 means a bound that grows with the table
	// (adaptiveLimit) with nft and one transaction with legacy (which
	// rewrites the whole table on every restore); a negative value writes
	// everything in one transaction, as kube-proxy does.
	MaxRestoreRules int
	// SyncPeriod is the period of the seed's resync loop (package seed's
	// Proxier.SyncLoop); the Proxier itself does not use it (the sink's
	// runtime schedules Resync).
	SyncPeriod time.Duration
	// Generation returns the nf_tables generation of the network
	// namespace the tools run in (xtables.NFTGeneration): a resync of
	// nf_tables families skips reading the tables when it has not moved
	// since the kernel was known to hold what the Proxier wrote (see
	// genTracker). nil means the current namespace's when Run is nil, and
	// none (every resync reads the tables) when Run is set or in dry run.
	// A failed read only means a full compare.
	Generation func() (uint32, error)
	// CompareEvery and CompareInterval force a resync that reads and
	// compares the tables, generation unchanged or not, at least every
	// CompareEvery resyncs (default 10; 1 or less: at every resync) and
	// every CompareInterval (default 5 minutes).
	CompareEvery    int
	CompareInterval time.Duration
	// Log receives the Proxier's warnings; nil means slog.Default().
	Log *slog.Logger
}

// adaptiveLimit is the default bound of an nf_tables transaction when the
// nat table holds existing rules: sqrt(65 * existing), at least 1,000. On
// this project's build host a transaction cost about 0.65 µs per existing
// rule plus about 10 ns times the square of its own size (docs/bench/iptables.md); the
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
	// FailedFamilies are the families of Failures, one entry each;
	// PartialFailed is, for each, whether it was a partial sync's.
	FailedFamilies []xtables.Family
	PartialFailed  []bool
	// ReadsSkipped counts the families whose kernel read and compare a
	// full sync skipped: nf_tables generation unchanged since the kernel
	// was known to hold the same ruleset.
	ReadsSkipped int
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
	s.FailedFamilies = append(s.FailedFamilies, o.FailedFamilies...)
	s.PartialFailed = append(s.PartialFailed, o.PartialFailed...)
	s.ReadsSkipped += o.ReadsSkipped
}

// family is the Proxier's state for one address family.
type family struct {
	fc      famConfig
	backend xtables.Backend
	svcs    map[client.ServiceKey]*rendered // as last written to the kernel
	eps     int                             // sum of svcs' eps
	large   bool
	full    bool // the next sync must be full
	synced  bool // a sync succeeded: svcs is what this process wrote
	// from is the snapshot svcs were rendered from by the last full sync,
	// when it succeeded and no partial sync followed; renderErrs are that
	// render's errors.
	from       *client.Snapshot
	renderErrs []error
	renders    int // full renders (tests)
	// rerender makes the next full render render every service, none
	// reused (the local-traffic detection changed).
	rerender bool
	// gens are the text bytes carved from each arena svcs' renderings
	// come from, by arena; nextGens is what gens becomes when the full sync
	// being made succeeds. lastGen numbers arenas.
	gens, nextGens map[int32]int
	lastGen        int32
}

// Proxier programs kube-proxy's iptables-mode ruleset for the services of
// the snapshots it is given. Because its chains are the node's, only one
// Proxier may be active on a node. It is safe for concurrent use: syncs are
// serialized.
type Proxier struct {
	mu     sync.Mutex
	cfg    Config
	run    xtables.Runner
	fams   []*family
	last   *client.Snapshot
	totals SyncStats
	// scratch is the buffer of restore inputs, reused from one to the
	// next.
	scratch []byte
	// largeAt is the large-cluster threshold (largeClusterEndpoints;
	// tests lower it).
	largeAt int
	gen     genTracker
	// q holds the services whose rules iptables-restore refused
	// (quarantine.go).
	q *quarantine.Set[qkey]
	// retryAll is set during a Resync: no quarantined service is held.
	retryAll bool
	// acctErr is the last failure to ensure the nfacct objects (logged
	// when it changes).
	acctErr string
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
	p := &Proxier{cfg: cfg, run: cfg.Run, largeAt: largeClusterEndpoints, gen: newGenTracker(&cfg),
		q: quarantine.New[qkey](quarantine.DefaultMin, cfg.SyncPeriod)}
	if p.run == nil {
		p.run = xtables.Exec
	}
	for _, f := range []xtables.Family{xtables.IPv4, xtables.IPv6} {
		if f == xtables.IPv4 && !cfg.IPv4 || f == xtables.IPv6 && !cfg.IPv6 {
			continue
		}
		fc := famConfig{fam: f, mark: hexMark(cfg.MasqueradeBit), masqueradeAll: cfg.MasqueradeAll, scratch: &renderScratch{}}
		fc.setLocal(cfg.Local)
		for _, a := range cfg.NodeIPs {
			if a.Is6() == (f == xtables.IPv6) && !fc.nodeIP.IsValid() {
				fc.nodeIP = a
			}
		}
		fam := &family{fc: fc, backend: cfg.Backend, svcs: map[client.ServiceKey]*rendered{}, full: true}
		if fam.backend == "" {
			if cfg.DryRun != nil {
				fam.backend = xtables.NFT
			} else {
				b, err := xtables.Detect(f, p.run)
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

// SetLocal changes the local-traffic detection (Config.Local; the Node's
// pod CIDRs of --detect-local-mode=NodeCIDR, which may change): when it
// differs, the next sync is a full one that renders every service again.
func (p *Proxier) SetLocal(l xtables.LocalTraffic) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.Equal(p.cfg.Local) {
		return
	}
	p.cfg.Local = l
	for _, f := range p.fams {
		f.fc.setLocal(l)
		f.full, f.rerender, f.from = true, true, nil
	}
}

// Backends returns the iptables backend of each enabled family (IPv4
// first).
func (p *Proxier) Backends() []xtables.Backend {
	var out []xtables.Backend
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

// SetNodePorts replaces Config.NodePortCIDRs and NodePortIPs, when the
// node's addresses or the selection of them changed: the next sync is a
// full one, which rewrites KUBE-SERVICES' node-port rules.
func (p *Proxier) SetNodePorts(cidrs []netip.Prefix, ips []netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.NodePortCIDRs, p.cfg.NodePortIPs = cidrs, ips
	for _, f := range p.fams {
		f.full = true
	}
}

// Resync is the periodic full sync of the last snapshot: every chain is
// compared with the kernel and rewritten where it differs (drift repaired),
// chains of removed services are deleted, every quarantined service is
// tried again. With no snapshot yet it does nothing.
func (p *Proxier) Resync() (SyncStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		return SyncStats{}, nil
	}
	// The periodic sync retries every quarantined service, due or not.
	p.retryAll = true
	defer func() { p.retryAll = false }()
	return p.sync(p.last, true)
}

// RulesTotal returns the rules of the Proxier's ruleset as last
// written, per table ("filter", "nat"), summed over the families: its
// chains' rules, as kube-proxy's kubeproxy_sync_proxy_rules_iptables_total
// counts them (the jumps from the built-in chains are not counted).
func (p *Proxier) RulesTotal() map[string]int {
	out := map[string]int{"filter": 0, "nat": 0}
	for _, tables := range p.FamilyRulesTotal() {
		for t, n := range tables {
			out[t] += n
		}
	}
	return out
}

// Families returns the ip_family values ("IPv4", "IPv6") of the families
// the Proxier programs.
func (p *Proxier) Families() []string {
	var out []string
	for _, f := range p.fams {
		out = append(out, f.fc.fam.String())
	}
	return out
}

// FamilyRulesTotal is RulesTotal per family synced, by kube-proxy's
// ip_family value ("IPv4", "IPv6").
func (p *Proxier) FamilyRulesTotal() map[string]map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]map[string]int{}
	for _, f := range p.fams {
		if !f.synced {
			continue
		}
		tables := map[string]int{"filter": 0, "nat": 0}
		for _, sc := range staticChains(&p.cfg, &f.fc) {
			if _, ok := tables[sc.table]; ok {
				tables[sc.table] += len(sc.rules)
			}
		}
		for _, r := range f.svcs {
			fr := r.filterRules()
			tables["filter"] += fr
			tables["nat"] += r.lines - fr
		}
		out[f.fc.fam.String()] = tables
	}
	return out
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
	if full {
		p.ensureAccounting()
	}
	gs := p.gen.begin(p.fams, s)
	for _, f := range p.fams {
		var fs SyncStats
		var err error
		if full || f.full {
			st.Full = true
			if gs.skipRead(f) {
				st.ReadsSkipped++
				continue
			}
			fs, err = p.syncFull(f, s)
		} else {
			fs, err = p.syncPartial(f, s)
		}
		st.add(fs)
		st.Full = st.Full || fs.Full
		if err != nil {
			errs = append(errs, err)
		}
	}
	p.gen.end(gs, p.fams, s, st.ReadsSkipped > 0, len(errs) > 0)
	st.Duration = time.Since(start)
	p.totals.add(st)
	return st, errors.Join(errs...)
}

// renderAll renders every service of s for a family, in key order. A
// service whose content is what its last rendering was made from (the
// same object, as snapshots share unchanged services, or an equal one)
// keeps that rendering: render is pure.
//
// What it renders is carved from one new arena. A reused rendering keeps
// its older arena alive, so an older arena less than half of whose text
// is still in use has its renderings copied into the new one: the arenas
// kept hold at most four times the text in use (twice what they carved),
// plus 4 KB each.
func (f *family) renderAll(s *client.Snapshot, large bool) (list []*rendered, out map[client.ServiceKey]*rendered, eps int, errs []error) {
	out = make(map[client.ServiceKey]*rendered, s.Len())
	list = make([]*rendered, 0, s.Len())
	// One allocation for every service's rendering; reused ones are
	// copied in, so no older array is kept alive by this one.
	rs := make([]rendered, s.Len())
	f.lastGen++
	a := &arena{gen: f.lastGen}
	reused := false
	for se := range s.All() {
		r := &rs[len(list)]
		k := se.Service.Key()
		old := f.svcs[k]
		if old != nil && !f.rerender && old.large == large && old.src.Equal(se) {
			*r = *old
			reused = true
		} else if err := renderIn(&f.fc, a, se, large, r); err != nil {
			errs = append(errs, err)
			// Keep what the kernel has for a service we cannot render:
			// its last good rules stay in place.
			if old == nil {
				continue
			}
			*r = *old
		}
		list = append(list, r)
		out[k] = r
		eps += r.eps
	}
	gens := map[int32]int{}
	if reused {
		live := map[int32]int{}
		for _, r := range list {
			live[r.gen] += len(r.buf)
		}
		for _, r := range list {
			if g := r.gen; g != 0 && g != a.gen && 2*live[g] < f.gens[g] {
				a.copyIn(r)
			}
		}
		for g, n := range f.gens {
			if 2*live[g] >= n {
				gens[g] = n
			}
		}
	}
	if a.used > 0 {
		gens[a.gen] = a.used
	}
	f.nextGens = gens
	f.rerender = false
	return list, out, eps, errs
}
