// Package dataplane is what both IPVS sinks share below their controllers:
// it writes a plan of object changes to the kernel in batches and in a safe
// order, terminates TCP destinations gracefully, and prepares the node
// (modules, sysctls, kube-ipvs0, ipsets, iptables rules). Rendering is in
// dataplane/render, the iptables rules in dataplane/rules; the host tooling
// under them (modules, sysctls, iptables back ends, conntrack) is in the
// host module.
package dataplane

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/dataplane/rules"
	"github.com/proxysinks/proxysinks/host/conntrack"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"golang.org/x/sys/unix"
)

// Server is a virtual server with its options.
type Server struct {
	VS   render.VirtualServer
	Opts render.ServerOptions
}

// Dest is a destination with its options.
type Dest struct {
	D    render.Destination
	Opts render.DestOptions
}

// Plan is one round of changes. Objects in Create lists are new to the
// kernel; in Update lists they exist with other options.
type Plan struct {
	CreateServers, UpdateServers []Server
	DeleteServers                []Server
	CreateDests, UpdateDests     []Dest
	DeleteDests                  []Dest
	Bind, Unbind                 []netip.Addr
	AddEntries, DelEntries       []render.SetEntry
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool {
	return len(p.CreateServers)+len(p.UpdateServers)+len(p.DeleteServers)+len(p.CreateDests)+
		len(p.UpdateDests)+len(p.DeleteDests)+len(p.Bind)+len(p.Unbind)+len(p.AddEntries)+len(p.DelEntries) == 0
}

// Result tells which objects failed. Keys are render.VirtualServer,
// render.Destination, netip.Addr (a binding) and render.SetEntry.
type Result struct {
	Failed map[any]error
	// Writes counts the objects written (kernel operations).
	Writes int
	// Flushed counts the conntrack flows deleted; ConntrackErr is a failure
	// to flush them (the IPVS changes stand).
	Flushed      int
	ConntrackErr error
	// RulesErr is a failure of Applier.EntryRules (the IPVS and ipset
	// changes stand; the next plan touching the sets, or the next repair,
	// tries again).
	RulesErr error
}

// Err returns the failures as one error, or nil.
func (r Result) Err() error {
	var errs []error
	for _, e := range r.Failed {
		errs = append(errs, e)
	}
	if r.ConntrackErr != nil {
		errs = append(errs, r.ConntrackErr)
	}
	if r.RulesErr != nil {
		errs = append(errs, r.RulesErr)
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return joinErrors(errs)
}

// Applier writes plans and keeps the graceful-termination list.
type Applier struct {
	W Writer
	// Ordered makes Apply write every list in a stable order (a dry run's
	// output does not depend on map iteration); the kernel does not need it.
	Ordered bool
	// Conntrack, when set, flushes the UDP flows of removed UDP
	// destinations, so that clients do not keep sending to a gone backend.
	Conntrack conntrack.Flusher
	// Overlap, when set, writes the new set entries while the IPVS
	// operations are built, and makes the new bindings while the
	// destinations are written, once the virtual servers are in: set
	// entries (ipset), bindings (rtnetlink) and destinations (IPVS) then
	// go to the kernel beside the sink's own work or each other, on two
	// CPUs where the node has them. The order that matters stays: every
	// entry before any server, every server before any binding, all
	// before any removal. W must take a Bind or AddEntries call while
	// another runs (Kernel does: separate sockets); the dry run, whose
	// output is ordered, does not.
	Overlap bool
	// EntryRules, when set, brings the iptables rules that follow from set
	// members (rules.OutFilterDrops) up to date after a plan changed those
	// members, for the families given, and reports whether it wrote
	// (Node.EnsureRules).
	EntryRules func(families []xtables.Family) (bool, error)

	mu sync.Mutex
	// terminating holds TCP destinations set to weight 0 that are removed
	// once they have no connections left.
	terminating map[render.Destination]Server
	// tracked, while a recording of Track runs, holds the objects written.
	tracked *tracking
}

// tracking is one recording of Track.
type tracking struct{ objs map[any]bool }

// Track starts recording the objects Apply and Reap write or try to
// write, keyed as Result.Failed is; stop ends the recording and returns
// them. A resync reading the kernel while plans are applied (Node.Read
// on another goroutine) gives them to State.Written, since the read may
// have seen them before they were written. One recording at a time: a
// second Track replaces the first, whose stop then returns what it had.
func (a *Applier) Track() (stop func() map[any]bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &tracking{objs: map[any]bool{}}
	a.tracked = t
	return func() map[any]bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.tracked == t {
			a.tracked = nil
		}
		return t.objs
	}
}

// ReadApart starts a resync whose kernel read runs apart from the plans
// being applied (a controller's split resync, runtime.SplitResyncer): it
// starts recording what the applier writes (Track) and returns read,
// which reads the kernel through r on any goroutine while plans go on
// being applied. The finish read returns locks mu (the controller's: no
// plan is then being applied), stops the recording and calls repair with
// the resync's start and the state read, whose Written holds what was
// written since ReadApart, or the read's error. The caller holds mu.
func (a *Applier) ReadApart(mu sync.Locker, r interface{ Read() (*State, error) },
	repair func(start time.Time, k *State, err error) SyncStats) (read func() (finish func() SyncStats)) {
	start := time.Now()
	stop := a.Track()
	return func() func() SyncStats {
		k, err := r.Read()
		return func() SyncStats {
			mu.Lock()
			defer mu.Unlock()
			written := stop()
			if err == nil {
				k.Written = written
			}
			return repair(start, k, err)
		}
	}
}

// track records the plan's objects while a recording runs; the caller
// holds a.mu.
func (a *Applier) track(p *Plan) {
	if a.tracked == nil {
		return
	}
	objs := a.tracked.objs
	for _, l := range [][]Server{p.CreateServers, p.UpdateServers, p.DeleteServers} {
		for _, s := range l {
			objs[s.VS] = true
		}
	}
	for _, l := range [][]Dest{p.CreateDests, p.UpdateDests, p.DeleteDests} {
		for _, d := range l {
			objs[d.D] = true
		}
	}
	for _, l := range [][]netip.Addr{p.Bind, p.Unbind} {
		for _, b := range l {
			objs[b] = true
		}
	}
	for _, l := range [][]render.SetEntry{p.AddEntries, p.DelEntries} {
		for _, e := range l {
			objs[e] = true
		}
	}
}

// NewApplier returns an Applier writing to w.
func NewApplier(w Writer) *Applier {
	return &Applier{W: w, terminating: map[render.Destination]Server{}}
}

// Terminating returns how many destinations wait for their connections to end.
func (a *Applier) Terminating() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.terminating)
}

// IsTerminating reports whether d waits for its connections to end.
func (a *Applier) IsTerminating(d render.Destination) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.terminating[d]
	return ok
}

// Apply writes the plan: new set entries, then new and updated virtual
// servers, then destinations, then bindings (with Overlap, the entries
// written while the IPVS operations are built and the bindings beside the
// destinations); then the removals in reverse
// order (an address is unbound after the virtual servers on it are
// removed, and kept while one failed to be). Set entries come first because they decide which connections are
// masqueraded and accepted (KUBE-NODE-PORT-*, KUBE-LOOP-BACK...): a virtual
// server that served before its entries existed would let its first
// connections through unmasqueraded, which the node e2e saw happen for a
// node port. Likewise entries are removed only after the virtual servers. An
// object that fails is reported in the result and the rest go on.
// Destinations of deleted TCP virtual servers go with them; a deleted TCP
// destination of a live server is set to weight 0 and removed by Reap once
// its connections end, while UDP and SCTP destinations are removed at once.
func (a *Applier) Apply(p Plan) Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Ordered {
		p.sort()
	}
	a.track(&p)
	res := Result{Failed: map[any]error{}}
	// The entries go to the kernel while the IPVS operations are built
	// (with Overlap); they are all in before the first server is written.
	entriesIn := func() {}
	if len(p.AddEntries) > 0 {
		entriesIn = a.beside(&res, func(r *Result) { a.entries(r, p.AddEntries, a.W.AddEntries) })
	}

	// Servers and destinations, creations first. The i-th operation's
	// object is found again from the plan's lists only when it fails.
	n := len(p.CreateServers) + len(p.UpdateServers) + len(p.CreateDests) + len(p.UpdateDests)
	if m := len(p.DeleteServers) + len(p.DeleteDests); m > n {
		n = m
	}
	ops := make([]ipvs.Op, 0, n)
	for _, s := range p.CreateServers {
		ops = append(ops, ipvs.Op{Kind: ipvs.OpCreateService, Service: Service(s.VS, s.Opts)})
	}
	for _, s := range p.UpdateServers {
		ops = append(ops, ipvs.Op{Kind: ipvs.OpUpdateService, Service: Service(s.VS, s.Opts)})
	}
	var deletedServer map[render.VirtualServer]bool
	if len(p.DeleteServers) > 0 {
		deletedServer = make(map[render.VirtualServer]bool, len(p.DeleteServers))
		for _, s := range p.DeleteServers {
			deletedServer[s.VS] = true
		}
	}
	var back []render.Destination // terminating ones coming back
	for _, d := range p.CreateDests {
		kind := ipvs.OpCreateDestination
		// A destination coming back while it terminates is still in the
		// kernel with weight 0: restore its weight. It leaves the
		// terminating list once that succeeded.
		if len(a.terminating) > 0 {
			if _, ok := a.terminating[d.D]; ok {
				kind = ipvs.OpUpdateDestination
				back = append(back, d.D)
			}
		}
		ops = append(ops, ipvs.Op{Kind: kind, Service: Service(d.D.Server, render.ServerOptions{}), Destination: Destination(d.D, d.Opts)})
	}
	for _, d := range p.UpdateDests {
		ops = append(ops, ipvs.Op{Kind: ipvs.OpUpdateDestination, Service: Service(d.D.Server, render.ServerOptions{}), Destination: Destination(d.D, d.Opts)})
	}
	serverKey := func(i int) any {
		if i < len(p.CreateServers) {
			return p.CreateServers[i].VS
		}
		return p.UpdateServers[i-len(p.CreateServers)].VS
	}
	destKey := func(i int) any {
		if i < len(p.CreateDests) {
			return p.CreateDests[i].D
		}
		return p.UpdateDests[i-len(p.CreateDests)].D
	}
	bind := func(r *Result) {
		for i, err := range a.W.Bind(p.Bind) {
			if err != nil {
				r.Failed[p.Bind[i]] = err
			}
		}
		r.Writes += len(p.Bind)
	}
	entriesIn()
	servers := len(p.CreateServers) + len(p.UpdateServers)
	if a.Overlap && len(p.Bind) > 0 && len(ops) > servers {
		// The servers first, so that no address becomes local before
		// the server on it exists (a host service listening on every
		// address would answer on it); then the bindings beside the
		// destinations. A server without destinations yet refuses
		// connections, as IPVS does for any service without one.
		a.ipvs(&res, ops[:servers], serverKey)
		bound := a.beside(&res, bind)
		a.ipvs(&res, ops[servers:], destKey)
		bound()
	} else {
		a.ipvs(&res, ops, func(i int) any {
			if i < servers {
				return serverKey(i)
			}
			return destKey(i - servers)
		})
		bind(&res)
	}

	for _, d := range back {
		if _, failed := res.Failed[d]; !failed {
			delete(a.terminating, d)
		}
	}

	// Removals in reverse order.
	ops = ops[:0]
	var dests []int32 // the destination of each operation, in p.DeleteDests
	for j, d := range p.DeleteDests {
		if deletedServer[d.D.Server] {
			continue // goes with its server
		}
		svc := Service(d.D.Server, render.ServerOptions{})
		if d.D.Server.Protocol == render.TCP {
			if d.Opts.Weight == 0 {
				// Already quiesced (found so at start-up): only wait.
				continue
			}
			// Quiesce: no new connections, existing ones finish.
			zero := d.Opts
			zero.Weight = 0
			ops = append(ops, ipvs.Op{Kind: ipvs.OpUpdateDestination, Service: svc, Destination: Destination(d.D, zero)})
			dests = append(dests, int32(j))
			continue
		}
		ops = append(ops, ipvs.Op{Kind: ipvs.OpRemoveDestination, Service: svc, Destination: Destination(d.D, d.Opts)})
		dests = append(dests, int32(j))
	}
	for _, s := range p.DeleteServers {
		ops = append(ops, ipvs.Op{Kind: ipvs.OpRemoveService, Service: Service(s.VS, s.Opts)})
	}
	a.ipvs(&res, ops, func(i int) any {
		if i < len(dests) {
			return p.DeleteDests[dests[i]].D
		}
		return p.DeleteServers[i-len(dests)].VS
	})
	// Destinations that were to go with a server that failed to go are
	// still there: they failed too, and are removed with it next time.
	for _, d := range p.DeleteDests {
		if deletedServer[d.D.Server] {
			if err, failed := res.Failed[d.D.Server]; failed {
				res.Failed[d.D] = fmt.Errorf("dataplane: remove destination %s: its virtual server stayed: %w", d.D, err)
			}
		}
	}
	a.unbind(&res, p)
	a.entries(&res, keepRecords(&res, p), a.W.DelEntries)
	for _, d := range p.DeleteDests {
		if d.D.Server.Protocol == render.TCP && !deletedServer[d.D.Server] {
			if _, failed := res.Failed[d.D]; !failed {
				a.terminating[d.D] = Server{VS: d.D.Server}
			}
		}
	}
	for _, s := range p.DeleteServers {
		if _, failed := res.Failed[s.VS]; failed {
			continue // its destinations still wait
		}
		for d := range a.terminating {
			if d.Server == s.VS {
				delete(a.terminating, d)
			}
		}
	}
	a.flushUDP(&res, p.DeleteDests)
	a.entryRules(&res, p)
	return res
}

// beside runs f: with Overlap in a goroutine, with a result of its own,
// and the function returned waits for it and adds that result to res;
// without, at once into res. f must only write to the kernel through a.W
// and to its result.
func (a *Applier) beside(res *Result, f func(r *Result)) (wait func()) {
	if !a.Overlap {
		f(res)
		return func() {}
	}
	r := Result{Failed: map[any]error{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(&r)
	}()
	return func() {
		<-done
		maps.Copy(res.Failed, r.Failed)
		res.Writes += r.Writes
	}
}

// entryRules runs EntryRules for the families whose KUBE-LOAD-BALANCER-FW
// or KUBE-LOAD-BALANCER-SOURCE-IP members the plan changed.
func (a *Applier) entryRules(res *Result, p Plan) {
	if a.EntryRules == nil {
		return
	}
	var fams []xtables.Family
	for _, l := range [][]render.SetEntry{p.AddEntries, p.DelEntries} {
		for _, e := range l {
			for _, f := range []xtables.Family{xtables.IPv4, xtables.IPv6} {
				if (e.Set == rules.SetName(f, rules.SetLoadBalancerFW) || e.Set == rules.SetName(f, rules.SetLoadBalancerSrcIP)) && !slices.Contains(fams, f) {
					fams = append(fams, f)
				}
			}
		}
	}
	if len(fams) == 0 {
		return
	}
	slices.Sort(fams)
	wrote, err := a.EntryRules(fams)
	if wrote {
		res.Writes++
	}
	res.RulesErr = err
}

// unbind removes addresses from the dummy link, after the virtual servers
// on them are gone. An address with a virtual server whose removal failed
// stays bound (and is reported failed, to be retried with it): the server
// is the sink's only while its address is bound, and an unbound one would
// be invisible to the next read and leak.
func (a *Applier) unbind(res *Result, p Plan) {
	addrs := p.Unbind
	var keep map[netip.Addr]render.VirtualServer
	for _, s := range p.DeleteServers {
		if _, failed := res.Failed[s.VS]; failed {
			if keep == nil {
				keep = map[netip.Addr]render.VirtualServer{}
			}
			keep[s.VS.Addr] = s.VS
		}
	}
	if keep != nil {
		addrs = make([]netip.Addr, 0, len(p.Unbind))
		for _, ad := range p.Unbind {
			if vs, ok := keep[ad.Unmap()]; ok {
				res.Failed[ad] = fmt.Errorf("dataplane: unbind %s: kept while virtual server %s on it is not removed", ad, vs)
				continue
			}
			addrs = append(addrs, ad)
		}
	}
	for i, err := range a.W.Unbind(addrs) {
		if err != nil {
			res.Failed[addrs[i]] = err
		}
	}
	res.Writes += len(addrs)
}

// keepRecords returns the entries of p.DelEntries to delete: all but the
// records (rules.SetVirtualServers) of virtual servers whose removal
// failed, which are reported failed instead: a server stays the sink's
// exactly as long as it is recorded.
func keepRecords(res *Result, p Plan) []render.SetEntry {
	keep := false
	for _, s := range p.DeleteServers {
		if _, failed := res.Failed[s.VS]; failed {
			keep = true
			break
		}
	}
	if !keep {
		return p.DelEntries
	}
	out := make([]render.SetEntry, 0, len(p.DelEntries))
	for _, e := range p.DelEntries {
		if e.Set == rules.SetVirtualServers || e.Set == rules.SetName(xtables.IPv6, rules.SetVirtualServers) {
			vs := render.VirtualServer{Protocol: e.Protocol, Addr: e.Addr, Port: e.Port}
			if err, failed := res.Failed[vs]; failed {
				res.Failed[e] = fmt.Errorf("dataplane: remove %s: kept while virtual server %s is not removed: %w", e, vs, err)
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// flushUDP deletes the conntrack flows of removed UDP destinations, after
// IPVS no longer sends to them (flushing earlier would let a new datagram
// recreate a flow to the old backend).
func (a *Applier) flushUDP(res *Result, removed []Dest) {
	if a.Conntrack == nil {
		return
	}
	var targets []conntrack.Target
	for _, d := range removed {
		if d.D.Server.Protocol != render.UDP {
			continue
		}
		if _, failed := res.Failed[d.D]; failed {
			continue
		}
		targets = append(targets, conntrack.Target{
			Service: netip.AddrPortFrom(d.D.Server.Addr, d.D.Server.Port),
			Backend: netip.AddrPortFrom(d.D.Addr, d.D.Port),
		})
	}
	if len(targets) == 0 {
		return
	}
	n, err := a.Conntrack.FlushUDP(targets)
	res.Flushed = n
	if err != nil {
		res.ConntrackErr = err
	}
}

// ipvs writes ops; key(i) is the object of the i-th, for its failure.
func (a *Applier) ipvs(res *Result, ops []ipvs.Op, key func(i int) any) {
	if len(ops) == 0 {
		return
	}
	errs := a.W.IPVS(ops)
	res.Writes += len(ops)
	// An object created that the kernel already holds (one the sink did
	// not know of: left by a process that died before recording it, or
	// hidden from its last read) is updated to what is wanted instead.
	var again []ipvs.Op
	var at []int
	for i, err := range errs {
		if err == nil || !errors.Is(err, unix.EEXIST) {
			continue
		}
		switch ops[i].Kind {
		case ipvs.OpCreateService:
			again = append(again, ipvs.Op{Kind: ipvs.OpUpdateService, Service: ops[i].Service})
		case ipvs.OpCreateDestination:
			again = append(again, ipvs.Op{Kind: ipvs.OpUpdateDestination, Service: ops[i].Service, Destination: ops[i].Destination})
		default:
			continue
		}
		at = append(at, i)
	}
	if len(again) > 0 {
		// Destinations follow their services in ops, so an existing
		// service is updated before its existing destinations.
		for j, err := range a.W.IPVS(again) {
			errs[at[j]] = err
		}
		res.Writes += len(again)
	}
	for i, err := range errs {
		if err != nil {
			res.Failed[key(i)] = err
		}
	}
}

// entries writes set entries grouped by set, in a stable set order, and
// within a set in the order given.
func (a *Applier) entries(res *Result, es []render.SetEntry, write func(string, []ipset.Entry) []error) {
	if len(es) == 0 {
		return
	}
	count := map[string]int{}
	for i := range es {
		count[es[i].Set]++
	}
	sets := make([]string, 0, len(count))
	for s := range count {
		sets = append(sets, s)
	}
	sort.Strings(sets)
	// One conversion buffer for all sets, each set's entries together in
	// the order given (a counting sort), and where each entry came from.
	next := make(map[string]int, len(sets))
	off := 0
	for _, set := range sets {
		next[set] = off
		off += count[set]
	}
	conv := make([]ipset.Entry, len(es))
	from := make([]int32, len(es))
	for i := range es {
		j := next[es[i].Set]
		next[es[i].Set] = j + 1
		conv[j], from[j] = Entry(es[i]), int32(i)
	}
	start := 0
	for _, set := range sets {
		end := start + count[set]
		group := conv[start:end:end]
		for i, err := range write(set, group) {
			if err != nil {
				res.Failed[es[from[start+i]]] = err
			}
		}
		res.Writes += len(group)
		start = end
	}
}

// Reap removes terminating destinations that have no active or inactive
// connections left, and returns how many it removed.
func (a *Applier) Reap() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.terminating) == 0 {
		return 0, nil
	}
	byServer := map[render.VirtualServer][]render.Destination{}
	for d := range a.terminating {
		byServer[d.Server] = append(byServer[d.Server], d)
	}
	var ops []ipvs.Op
	var keys []any
	for vs, ds := range byServer {
		svc := Service(vs, render.ServerOptions{})
		entries, err := a.W.Destinations(svc)
		if err != nil {
			return 0, fmt.Errorf("dataplane: read destinations of %s: %w", vs, err)
		}
		conns := map[netip.AddrPort]uint32{}
		present := map[netip.AddrPort]bool{}
		for _, e := range entries {
			ap := netip.AddrPortFrom(e.Destination.Address, e.Destination.Port)
			conns[ap] = e.ActiveConns + e.InactiveConns
			present[ap] = true
		}
		for _, d := range ds {
			ap := netip.AddrPortFrom(d.Addr, d.Port)
			if !present[ap] {
				delete(a.terminating, d) // gone already
				continue
			}
			if conns[ap] == 0 {
				ops = append(ops, ipvs.Op{Kind: ipvs.OpRemoveDestination, Service: svc, Destination: Destination(d, render.DestOptions{})})
				keys = append(keys, d)
				if a.tracked != nil {
					a.tracked.objs[d] = true
				}
			}
		}
	}
	if len(ops) == 0 {
		return 0, nil
	}
	removed := 0
	var errs []error
	for i, err := range a.W.IPVS(ops) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		delete(a.terminating, keys[i].(render.Destination))
		removed++
	}
	return removed, joinErrors(errs)
}

// ReapInto is Reap for a sync's stats: what it removed is counted in
// st.Writes and st.Reaped, its error joined to st.Err. The controllers log
// it with the sync, once the kernel is programmed.
func (a *Applier) ReapInto(st *SyncStats) {
	n, err := a.Reap()
	st.Writes += n
	st.Reaped += n
	st.Err = errors.Join(st.Err, err)
}

// SyncStats describes one sync of a controller, for logs and metrics.
type SyncStats struct {
	Start    time.Time
	Duration time.Duration
	Services int
	// Writes is the number of kernel objects written.
	Writes int
	// Reaped is how many of them removed quiesced destinations whose
	// connections ended (Applier.Reap): endpoints that went, or
	// destinations the cluster's state does not have.
	Reaped int
	// Failed is the number of objects that failed (retried next sync).
	Failed int
	// RenderErrors counts problems in the input (bad annotations...).
	RenderErrors int
	// NoLocalEndpoints counts services with a Local traffic policy and no
	// local endpoint (kube-proxy's metric).
	NoLocalEndpoints int
	Err              error
}

// LogAttrs returns the stats as log attributes: the services (when
// withServices: a resync that reads no snapshot has none to count, and
// "services=0" would read as an empty cluster), the writes, and on failure
// the failed objects and the error.
func (s SyncStats) LogAttrs(withServices bool) []any {
	var attrs []any
	if withServices {
		attrs = append(attrs, "services", s.Services)
	}
	attrs = append(attrs, "writes", s.Writes)
	if s.Reaped > 0 {
		attrs = append(attrs, "reaped", s.Reaped)
	}
	if s.Err != nil {
		attrs = append(attrs, "failed", s.Failed, "error", s.Err)
	}
	return attrs
}

func cmpVS(a, b render.VirtualServer) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	return int(a.Protocol) - int(b.Protocol)
}

func cmpDest(a, b render.Destination) int {
	if c := cmpVS(a.Server, b.Server); c != 0 {
		return c
	}
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	return int(a.Port) - int(b.Port)
}

func cmpEntry(a, b render.SetEntry) int {
	if a.Set != b.Set {
		if a.Set < b.Set {
			return -1
		}
		return 1
	}
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	if a.Protocol != b.Protocol {
		return int(a.Protocol) - int(b.Protocol)
	}
	if c := a.Addr2.Compare(b.Addr2); c != 0 {
		return c
	}
	if c := a.Net.Addr().Compare(b.Net.Addr()); c != 0 {
		return c
	}
	return a.Net.Bits() - b.Net.Bits()
}

// sort puts every list in a stable order, so that writes (and a dry run's
// output) do not depend on map iteration.
func (p *Plan) sort() {
	servers := func(l []Server) { slices.SortFunc(l, func(a, b Server) int { return cmpVS(a.VS, b.VS) }) }
	dests := func(l []Dest) { slices.SortFunc(l, func(a, b Dest) int { return cmpDest(a.D, b.D) }) }
	servers(p.CreateServers)
	servers(p.UpdateServers)
	servers(p.DeleteServers)
	dests(p.CreateDests)
	dests(p.UpdateDests)
	dests(p.DeleteDests)
	slices.SortFunc(p.Bind, netip.Addr.Compare)
	slices.SortFunc(p.Unbind, netip.Addr.Compare)
	slices.SortFunc(p.AddEntries, cmpEntry)
	slices.SortFunc(p.DelEntries, cmpEntry)
}
