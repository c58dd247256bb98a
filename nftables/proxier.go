package nftables

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/host/quarantine"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/nft"
	"github.com/proxysinks/proxysinks/nftables/ruleset"
)

// TableName is the table the Proxier owns in each family, kube-proxy's.
const TableName = "kube-proxy"

// Config configures a Proxier.
type Config struct {
	// IPv4 and IPv6 select the families to program (tables ip and ip6
	// kube-proxy); both may be set. At least one is required.
	IPv4, IPv6 bool
	// Ruleset is how the ruleset is rendered: kube-proxy's nftables-mode
	// settings (masquerade bit, --masquerade-all, local-traffic
	// detection) and the node's facts per family (node IP, NodePort
	// addresses). SetNodePorts and SetLocal change it.
	Ruleset ruleset.Config
	// NetNS is a file descriptor of the network namespace to program (0:
	// the caller's).
	NetNS int
	// DryRun, when set, receives the nft script of each family's ruleset
	// (`nft -f` input) whenever it changes, instead of the kernel; the
	// kernel is neither read nor written, and NewProxier does not check
	// it.
	DryRun io.Writer
	// ChunkChains bounds the regular chains whose rules one transaction
	// of a first write adds (a family whose table does not exist yet):
	// the kernel's cost of a transaction grows with the square of the
	// anonymous sets in it (chunk.go). 0 means defaultChunkChains; a
	// negative value writes everything in one transaction.
	ChunkChains int
	// SkipKernelVersionCheck skips the kernel-version check of NewProxier
	// (kube-proxy's KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK).
	SkipKernelVersionCheck bool
	// SyncPeriod bounds the backoff of quarantined services (quarantine.go;
	// 0: quarantine.DefaultMax).
	SyncPeriod time.Duration
	// Log receives the Proxier's warnings; nil means slog.Default().
	Log *slog.Logger
}

// SyncStats describes one sync (or, from Totals, all of them).
type SyncStats struct {
	// Full is true for a sync that compared every service (first sync,
	// Resync, a full snapshot); the Proxier writes only differences
	// either way.
	Full bool
	// Transactions counts the transactions committed (at most one per
	// family and sync), or dry-run scripts written.
	Transactions int
	// Messages and Bytes are the netlink messages and bytes sent,
	// Syscalls the system calls (sendmsg and recvmsg) made, reads and
	// writes alike.
	Messages, Bytes, Syscalls int
	// Rules counts the rules added; Chains and Sets the chains and sets
	// created; FlushedChains the chains flushed (changed or deleted);
	// DeletedChains and DeletedSets those deleted; AddedElements and
	// DeletedElements the set and map elements.
	Rules, Chains, Sets, FlushedChains, DeletedChains, DeletedSets int
	AddedElements, DeletedElements                                 int
	// Reads counts the families whose table was read from the kernel: the
	// nf_tables generation had moved since the Proxier last knew the
	// kernel's state (first sync, another writer, a failed commit).
	Reads int
	// ForeignChanges counts the families whose table another writer had
	// changed since the Proxier wrote it (kube-proxy still running on the
	// node, an operator's nft): the Proxier repaired them.
	ForeignChanges int
	// Failures counts the transactions the kernel refused (or that
	// failed); nothing of them was applied. The next sync tries again,
	// unless the refused objects were all services': those are
	// quarantined and the rest committed in the same sync
	// (quarantine.go).
	Failures int
	// FailedFamilies and ForeignFamilies are the families of Failures and
	// ForeignChanges, one entry each.
	FailedFamilies, ForeignFamilies []nft.Family
	// Duration is the wall time of the sync.
	Duration time.Duration
}

func (s *SyncStats) add(o SyncStats) {
	s.Transactions += o.Transactions
	s.Messages += o.Messages
	s.Bytes += o.Bytes
	s.Syscalls += o.Syscalls
	s.Rules += o.Rules
	s.Chains += o.Chains
	s.Sets += o.Sets
	s.FlushedChains += o.FlushedChains
	s.DeletedChains += o.DeletedChains
	s.DeletedSets += o.DeletedSets
	s.AddedElements += o.AddedElements
	s.DeletedElements += o.DeletedElements
	s.Reads += o.Reads
	s.ForeignChanges += o.ForeignChanges
	s.Failures += o.Failures
	s.FailedFamilies = append(s.FailedFamilies, o.FailedFamilies...)
	s.ForeignFamilies = append(s.ForeignFamilies, o.ForeignFamilies...)
	s.Duration += o.Duration
}

// family is the Proxier's state for one address family.
type family struct {
	name string // "ip" or "ip6"
	fam  nft.Family
	cur  applied
	// printed is the last script written in dry run.
	printed string
	// rules counts the rules of the ruleset last written.
	rules int
	// synced tells that cur holds exactly the renderer's previous render
	// (written whole or by Deltas): the next render's Delta applies to it.
	// tc is the compile context of that ruleset.
	synced bool
	tc     tableCompiler
	// wrote is the snapshot the table last received whole (with held
	// services in their held version): what the kernel has of each
	// service (quarantine.go). nil before the first write.
	wrote *client.Snapshot
}

// Proxier programs kube-proxy v1.37's nftables-mode ruleset for the
// services of the snapshots it is given into tables ip and ip6
// kube-proxy. Only one Proxier may program a network namespace. It is safe
// for concurrent use: syncs are serialized.
type Proxier struct {
	mu   sync.Mutex
	cfg  Config
	log  *slog.Logger
	k    kernel // nil in dry run
	comp compiler
	// renderer renders each family's ruleset, re-rendering only the
	// services that changed; render is its RenderFamily (tests replace
	// it).
	renderer *ruleset.Renderer
	render   func(s *client.Snapshot, v6 bool) (*ruleset.Ruleset, error)
	// delta is the renderer's RenderDelta and assemble its Ruleset: with
	// a kernel, syncs render with them (nil: with render).
	delta    func(s *client.Snapshot, v6 bool) (*ruleset.Delta, error)
	assemble func(v6 bool) *ruleset.Ruleset
	fams     []*family
	last     *client.Snapshot
	totals   SyncStats
	// nextID numbers anonymous sets, unique across transactions.
	nextID uint32
	// gen is the nf_tables generation as of which the kernel held every
	// family's cur, when genKnown.
	gen      uint32
	genKnown bool
	// q is the services the kernel refused (quarantine.go); failedNow
	// those refused in the current sync; retryAll is set during a
	// Resync: no quarantined service is held unless refused again.
	q         *quarantine.Set[qkey]
	failedNow map[qkey]bool
	retryAll  bool
}

// NewProxier checks the configuration and, unless in dry run, the kernel
// (nf_tables, the expressions the ruleset uses: checkKernel), and returns
// a Proxier that has written nothing yet. A kernel that cannot run the
// ruleset gives an error naming what is missing.
func NewProxier(cfg Config) (*Proxier, error) {
	if !cfg.IPv4 && !cfg.IPv6 {
		return nil, errors.New("nftables: no address family enabled")
	}
	if b := cfg.Ruleset.Bit(); b < 0 || b > 31 {
		return nil, fmt.Errorf("nftables: masquerade bit %d out of range [0, 31]", b)
	}
	r, err := ruleset.NewRenderer(cfg.Ruleset)
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	p := &Proxier{cfg: cfg, log: cfg.Log, comp: exprCompiler{}, renderer: r, render: r.RenderFamily, delta: r.RenderDelta, assemble: r.Ruleset}
	if p.log == nil {
		p.log = slog.Default()
	}
	if cfg.IPv4 {
		p.fams = append(p.fams, &family{name: "ip", fam: nft.FamilyIPv4})
	}
	if cfg.IPv6 {
		p.fams = append(p.fams, &family{name: "ip6", fam: nft.FamilyIPv6})
	}
	if cfg.DryRun != nil {
		return p, nil
	}
	k, err := dialKernel(cfg.NetNS)
	if err != nil {
		return nil, err
	}
	if err := checkKernel(k, cfg.SkipKernelVersionCheck, &cfg); err != nil {
		k.close()
		return nil, err
	}
	p.k = k
	return p, nil
}

// Close releases the Proxier's netlink socket.
func (p *Proxier) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.k == nil {
		return nil
	}
	err := p.k.close()
	p.k = nil
	return err
}

// Snapshot programs a snapshot: it renders the ruleset and writes what
// differs from what the kernel holds, one transaction per family. Render
// errors name the service; the others are programmed.
func (p *Proxier) Snapshot(s *client.Snapshot) (SyncStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	full := s.Full || p.last == nil
	p.last = s
	return p.sync(s, full)
}

// Resync syncs the last snapshot again: the kernel's tables are read and
// repaired when the nf_tables generation moved since the Proxier last
// knew them (another writer), and a transaction that failed is tried
// again, and so is every quarantined service. With no snapshot yet it
// does nothing.
func (p *Proxier) Resync() (SyncStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		return SyncStats{}, nil
	}
	p.retryAll = true
	defer func() { p.retryAll = false }()
	return p.sync(p.last, true)
}

// SetNodePorts sets the NodePort addresses (kube-proxy's
// --nodeport-addresses, resolved: its CIDRs and the node's addresses in
// them); the next sync writes the difference.
func (p *Proxier) SetNodePorts(cidrs []netip.Prefix, ips []netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.Ruleset.SetNodePorts(cidrs, ips)
	p.configChanged()
}

// SetLocal changes the local-traffic detection (Config.Ruleset.Local);
// the next sync writes the difference.
func (p *Proxier) SetLocal(l xtables.LocalTraffic) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.Ruleset.Local = l
	p.configChanged()
}

// configChanged passes a changed render configuration to the renderer
// (which then renders every service again). Its only error, a bad
// masquerade bit, NewProxier refused.
func (p *Proxier) configChanged() {
	if p.renderer == nil {
		return
	}
	if err := p.renderer.SetConfig(p.cfg.Ruleset); err != nil {
		p.log.Error("nftables: render configuration refused", "error", err)
	}
}

// Totals returns the sums of every sync's statistics.
func (p *Proxier) Totals() SyncStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.totals
}

// RulesTotal returns the rules of the ruleset as last written, per
// family ("ip", "ip6"), as kube-proxy's
// kubeproxy_sync_proxy_rules_nftables_objects counts rules.
func (p *Proxier) RulesTotal() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, f := range p.fams {
		out[f.name] = f.rules
	}
	return out
}

func (p *Proxier) newID() uint32 {
	p.nextID++
	return p.nextID
}

func countRules(rs *ruleset.Ruleset) int {
	n := 0
	for i := range rs.Chains {
		n += len(rs.Chains[i].Rules)
	}
	return n
}
