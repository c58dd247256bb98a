// Package dataplane is what both IPVS sinks share below their controllers:
// it writes a plan of object changes to the kernel in batches and in a safe
// order, terminates TCP destinations gracefully, and prepares the node
// (modules, sysctls, kube-ipvs0, ipsets, iptables rules). Rendering is in
// dataplane/render, the iptables rules in dataplane/rules, modules and
// sysctls in host/kernel.
package dataplane

import (
	"errors"
	"sync"

	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/host/quarantine"
	"github.com/proxysinks/proxysinks/host/xtables"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"golang.org/x/sys/unix"
)

// Applier writes plans and keeps the graceful-termination list.
type Applier struct {
	W Writer
	// Ordered makes Apply write every list in a stable order (a dry run's
	// output does not depend on map iteration); the kernel does not need it.
	Ordered bool
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
	// Quarantine, when set, holds the objects the kernel refused alone
	// (not as part of a batch that failed whole: WholeError): each is
	// retried alone, with backoff, or at once when what a plan wants of it
	// changes (a plan with RetryAll retries them all), and Result reports
	// them (Result.Quarantined). Nil: a refused object is only a failure.
	Quarantine *quarantine.Set[any]

	mu sync.Mutex
	// terminating holds TCP destinations set to weight 0 that are removed
	// once they have no connections left.
	terminating map[render.Destination]Server
	// tracked, while a recording of Track runs, holds the objects written.
	tracked *tracking
}

// NewApplier returns an Applier writing to w.
func NewApplier(w Writer) *Applier {
	return &Applier{W: w, terminating: map[render.Destination]Server{}}
}

// Apply writes the plan: new set entries, then new and updated virtual
// servers, then destinations, then bindings (with Overlap, the entries
// written while the IPVS operations are built and the bindings beside the
// destinations); then the removals in reverse order (an address is
// unbound after the virtual servers on it are removed, and kept while one
// failed to be). Set entries come first because they decide which
// connections are masqueraded and accepted (KUBE-NODE-PORT-*,
// KUBE-LOOP-BACK...): a virtual server that served before its entries
// existed would let its first connections through unmasqueraded, which the
// node e2e saw happen for a node port. Likewise entries are removed only
// after the virtual servers. An object that fails is reported in the
// result and the rest go on. Destinations of deleted TCP virtual servers
// go with them; a deleted TCP destination of a live server is set to
// weight 0 and removed by Reap once its connections end, while UDP and
// SCTP destinations are removed at once.
func (a *Applier) Apply(p Plan) Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Ordered {
		p.sort()
	}
	held, nheld := a.hold(&p)
	a.track(&p)
	var res Result
	var deleted map[render.VirtualServer]bool
	if len(p.DeleteServers) > 0 {
		deleted = make(map[render.VirtualServer]bool, len(p.DeleteServers))
		for _, s := range p.DeleteServers {
			deleted[s.VS] = true
		}
	}
	ops := a.create(&res, &p)
	a.remove(&res, &p, deleted, ops[:0])
	a.terminate(&res, &p, deleted)
	a.entryRules(&res, p)
	a.settle(&res, &p, &held)
	res.Failed.addAll(&held)
	res.Held = nheld
	return res
}

// create writes the plan's new set entries, servers, destinations and
// bindings, and returns the buffer of IPVS operations, for the removals.
func (a *Applier) create(res *Result, p *Plan) []ipvs.Op {
	// The entries go to the kernel while the IPVS operations are built
	// (with Overlap); they are all in before the first server is written.
	entriesIn := func() {}
	if len(p.AddEntries) > 0 {
		entriesIn = a.startOverlapped(res, func(r *Result) { a.entries(r, p.AddEntries, a.W.AddEntries) })
	}
	// The i-th operation's object is found again from the plan's lists
	// only when it fails.
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
	servers := len(p.CreateServers) + len(p.UpdateServers)
	serverFailed := func(i int, err error) {
		if i < len(p.CreateServers) {
			put(&res.Failed.Servers, p.CreateServers[i].VS, err)
		} else {
			put(&res.Failed.Servers, p.UpdateServers[i-len(p.CreateServers)].VS, err)
		}
	}
	destFailed := func(i int, err error) {
		if i < len(p.CreateDests) {
			put(&res.Failed.Dests, p.CreateDests[i].D, err)
		} else {
			put(&res.Failed.Dests, p.UpdateDests[i-len(p.CreateDests)].D, err)
		}
	}
	bind := func(r *Result) {
		for i, err := range a.W.Bind(p.Bind) {
			if err != nil {
				put(&r.Failed.Bindings, p.Bind[i], err)
			}
		}
		r.Writes += len(p.Bind)
	}
	entriesIn()
	if a.Overlap && len(p.Bind) > 0 && len(ops) > servers {
		// The servers first, so that no address becomes local before
		// the server on it exists (a host service listening on every
		// address would answer on it); then the bindings beside the
		// destinations. A server without destinations yet refuses
		// connections, as IPVS does for any service without one.
		a.ipvs(res, ops[:servers], serverFailed)
		bound := a.startOverlapped(res, bind)
		a.ipvs(res, ops[servers:], destFailed)
		bound()
	} else {
		a.ipvs(res, ops, func(i int, err error) {
			if i < servers {
				serverFailed(i, err)
			} else {
				destFailed(i-servers, err)
			}
		})
		bind(res)
	}
	for _, d := range back {
		if !res.Failed.Dest(d) {
			delete(a.terminating, d)
		}
	}
	return ops
}

// startOverlapped runs f: with Overlap in a goroutine, with a result of
// its own, and the function returned waits for it and adds that result to
// res; without, at once into res. f must only write to the kernel through
// a.W and to its result.
func (a *Applier) startOverlapped(res *Result, f func(r *Result)) (wait func()) {
	if !a.Overlap {
		f(res)
		return func() {}
	}
	var r Result
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(&r)
	}()
	return func() {
		<-done
		res.Failed.addAll(&r.Failed)
		res.Writes += r.Writes
	}
}

// ipvs writes ops; failed records the error of the i-th.
func (a *Applier) ipvs(res *Result, ops []ipvs.Op, failed func(i int, err error)) {
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
			failed(i, err)
		}
	}
}
