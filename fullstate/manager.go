package fullstate

import (
	"errors"
	"net/netip"

	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/fullstate/diffstore"
)

// Manager keeps every kernel object the node needs in diffstores and writes
// only what changed. It is the seed's IPVS Manager: a round is Reset, then
// ApplyServer / AddDestination / BindServerToInterface (and set entries) for
// every object, then Done, then Apply. It implements render.Sink.
//
// The stores are keyed by compact, pointer-free copies of the rendered
// objects (keys.go); what the Manager hands out (Plan) is rendered objects.
type Manager struct {
	servers  *diffstore.Store[vsKey, render.ServerOptions]
	dests    *diffstore.Store[destKey, render.DestOptions]
	bindings *diffstore.Store[addrKey, struct{}]
	entries  *diffstore.Store[entryKey, struct{}]
	zones    names // zones of IPv6 addresses in keys
	sets     names // set names in entry keys
	applier  *dataplane.Applier
	// Node, when set, is what Setup prepares.
	Node *dataplane.Node
}

// Setup prepares the node: modules, sysctls, kube-ipvs0, the ipsets and the
// iptables rules (dataplane.Node.Setup).
func (m *Manager) Setup() error {
	if m.Node == nil {
		return errors.New("fullstate: Manager.Setup: no node configured")
	}
	return m.Node.Setup()
}

// NewManager returns a Manager applying through a.
func NewManager(a *dataplane.Applier) *Manager {
	return &Manager{
		servers:  diffstore.NewComparable[vsKey, render.ServerOptions](),
		dests:    diffstore.NewComparable[destKey, render.DestOptions](),
		bindings: diffstore.NewComparable[addrKey, struct{}](),
		entries:  diffstore.NewComparable[entryKey, struct{}](),
		applier:  a,
	}
}

// Reset starts a round.
func (m *Manager) Reset() {
	m.servers.Reset()
	m.dests.Reset()
	m.bindings.Reset()
	m.entries.Reset()
}

// Server records a virtual server the round wants (render.Sink).
func (m *Manager) Server(vs render.VirtualServer, o render.ServerOptions) {
	m.servers.Set(m.vsKey(vs), o)
}

// Destination records a destination the round wants (render.Sink).
func (m *Manager) Destination(d render.Destination, o render.DestOptions) {
	m.dests.Set(m.destKey(d), o)
}

// Bind records an address to bind on the dummy link (render.Sink).
func (m *Manager) Bind(a netip.Addr) { m.bindings.Set(m.addrKey(a), struct{}{}) }

// Entry records an ipset entry (render.Sink).
func (m *Manager) Entry(e render.SetEntry) { m.entries.Set(m.entryKey(e), struct{}{}) }

// ApplyServer records a virtual server (the seed's name for Server).
func (m *Manager) ApplyServer(vs render.VirtualServer, o render.ServerOptions) { m.Server(vs, o) }

// AddDestination records a destination of a virtual server.
func (m *Manager) AddDestination(d render.Destination, o render.DestOptions) { m.Destination(d, o) }

// BindServerToInterface records that a virtual server's address is bound on
// the dummy link.
func (m *Manager) BindServerToInterface(vs render.VirtualServer) { m.Bind(vs.Addr) }

// Done ends the round and computes the differences.
func (m *Manager) Done() {
	m.servers.Done()
	m.dests.Done()
	m.bindings.Done()
	m.entries.Done()
}

// Plan returns the writes the round needs.
func (m *Manager) Plan() dataplane.Plan {
	var p dataplane.Plan
	p.CreateServers, p.UpdateServers = splitChanges(m.servers.Changed(), func(k vsKey, v render.ServerOptions) dataplane.Server {
		return dataplane.Server{VS: m.vs(k), Opts: v}
	})
	p.DeleteServers = make([]dataplane.Server, 0, len(m.servers.Deleted()))
	for _, c := range m.servers.Deleted() {
		p.DeleteServers = append(p.DeleteServers, dataplane.Server{VS: m.vs(c.Key), Opts: c.Old})
	}
	p.CreateDests, p.UpdateDests = splitChanges(m.dests.Changed(), func(k destKey, v render.DestOptions) dataplane.Dest {
		return dataplane.Dest{D: m.dest(k), Opts: v}
	})
	p.DeleteDests = make([]dataplane.Dest, 0, len(m.dests.Deleted()))
	for _, c := range m.dests.Deleted() {
		p.DeleteDests = append(p.DeleteDests, dataplane.Dest{D: m.dest(c.Key), Opts: c.Old})
	}
	p.Bind = make([]netip.Addr, 0, len(m.bindings.Changed()))
	for _, c := range m.bindings.Changed() {
		p.Bind = append(p.Bind, m.addr(c.Key))
	}
	p.Unbind = make([]netip.Addr, 0, len(m.bindings.Deleted()))
	for _, c := range m.bindings.Deleted() {
		p.Unbind = append(p.Unbind, m.addr(c.Key))
	}
	p.AddEntries = make([]render.SetEntry, 0, len(m.entries.Changed()))
	for _, c := range m.entries.Changed() {
		p.AddEntries = append(p.AddEntries, m.entry(c.Key))
	}
	p.DelEntries = make([]render.SetEntry, 0, len(m.entries.Deleted()))
	for _, c := range m.entries.Deleted() {
		p.DelEntries = append(p.DelEntries, m.entry(c.Key))
	}
	return p
}

// countNew counts the changes that create an object.
// splitChanges turns a store's changes into the objects to create (no old
// value) and to update, each made by mk from its key and wanted value.
func splitChanges[K comparable, V, T any](cs []diffstore.Change[K, V], mk func(K, V) T) (create, update []T) {
	create = make([]T, 0, countNew(cs))
	update = make([]T, 0, len(cs)-cap(create))
	for _, c := range cs {
		if c.HasOld {
			update = append(update, mk(c.Key, c.Value))
		} else {
			create = append(create, mk(c.Key, c.Value))
		}
	}
	return create, update
}

func countNew[K comparable, V any](cs []diffstore.Change[K, V]) int {
	n := 0
	for i := range cs {
		if !cs[i].HasOld {
			n++
		}
	}
	return n
}

// Apply writes the round's changes and records what succeeded; what failed
// is retried after the next round.
func (m *Manager) Apply() dataplane.Result { return m.ApplyPlan(m.Plan()) }

// ApplyPlan is Apply with the round's plan already made: p must be what
// Plan returned after the last Done.
func (m *Manager) ApplyPlan(p dataplane.Plan) dataplane.Result {
	if p.Empty() {
		return dataplane.Result{Failed: map[any]error{}}
	}
	res := m.applier.Apply(p)
	// Every object of the plan that did not fail is applied (a destination
	// of a deleted server goes with its server and is never written, so it
	// never fails).
	if len(res.Failed) == 0 {
		m.servers.AppliedAll(nil)
		m.dests.AppliedAll(nil)
		m.bindings.AppliedAll(nil)
		m.entries.AppliedAll(nil)
		return res
	}
	failed := func(k any) bool { _, f := res.Failed[k]; return f }
	m.servers.AppliedAll(func(k vsKey) bool { return failed(m.vs(k)) })
	m.dests.AppliedAll(func(k destKey) bool { return failed(m.dest(k)) })
	m.bindings.AppliedAll(func(k addrKey) bool { return failed(m.addr(k)) })
	m.entries.AppliedAll(func(k entryKey) bool { return failed(m.entry(k)) })
	return res
}

// Reconcile makes the stores' view of the kernel match st (what the kernel
// holds now): objects that vanished are forgotten, objects that appeared or
// changed are adopted. The next Done then reports what repairs the drift.
func (m *Manager) Reconcile(st *dataplane.State) {
	servers := make(map[vsKey]render.ServerOptions, len(st.Servers))
	for vs, o := range st.Servers {
		servers[m.vsKey(vs)] = o
	}
	reconcile(m.servers, servers)
	dests := make(map[destKey]render.DestOptions, len(st.Dests))
	for d, o := range st.Dests {
		// Destinations waiting out their connections are the applier's.
		if !m.applier.IsTerminating(d) {
			dests[m.destKey(d)] = o
		}
	}
	reconcile(m.dests, dests)
	bound := make(map[addrKey]struct{}, len(st.Bindings))
	for _, a := range st.Bindings {
		bound[m.addrKey(a)] = struct{}{}
	}
	reconcile(m.bindings, bound)
	entries := make(map[entryKey]struct{}, len(st.Entries))
	for _, e := range st.Entries {
		entries[m.entryKey(e)] = struct{}{}
	}
	reconcile(m.entries, entries)
}

func reconcile[K comparable, V any](s *diffstore.Store[K, V], kernel map[K]V) {
	var gone []K
	s.Each(func(k K, _ V) {
		if _, ok := kernel[k]; !ok {
			gone = append(gone, k)
		}
	})
	for _, k := range gone {
		s.Forget(k)
	}
	for k, v := range kernel {
		s.Adopt(k, v)
	}
}

// Len returns the number of objects tracked: servers, destinations,
// bindings and set entries.
func (m *Manager) Len() (servers, dests, bindings, entries int) {
	return m.servers.Len(), m.dests.Len(), m.bindings.Len(), m.entries.Len()
}
