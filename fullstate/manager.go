package fullstate

import (
	"errors"
	"net/netip"

	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/diffstore"
	"github.com/proxysinks/proxysinks/dataplane/objects"
	"github.com/proxysinks/proxysinks/dataplane/render"
)

// Manager keeps every kernel object the node needs in diffstores and writes
// only what changed. It is the seed's IPVS Manager: a round is Reset, then
// ApplyServer / AddDestination / BindServerToInterface (and set entries) for
// every object, then Done, then Apply. It implements render.Sink.
//
// The stores are keyed by compact, pointer-free copies of the rendered
// objects (dataplane/objects); what the Manager hands out (Plan) is
// rendered objects.
type Manager struct {
	servers  *diffstore.Store[objects.ServerKey, render.ServerOptions]
	dests    *diffstore.Store[objects.DestKey, render.DestOptions]
	bindings *diffstore.Store[objects.AddrKey, struct{}]
	entries  *diffstore.Store[objects.EntryKey, struct{}]
	keys     objects.Keys
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
		servers:  diffstore.NewComparable[objects.ServerKey, render.ServerOptions](),
		dests:    diffstore.NewComparable[objects.DestKey, render.DestOptions](),
		bindings: diffstore.NewComparable[objects.AddrKey, struct{}](),
		entries:  diffstore.NewComparable[objects.EntryKey, struct{}](),
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
	m.servers.Set(m.keys.Server(vs), o)
}

// Destination records a destination the round wants (render.Sink).
func (m *Manager) Destination(d render.Destination, o render.DestOptions) {
	m.dests.Set(m.keys.Dest(d), o)
}

// Bind records an address to bind on the dummy link (render.Sink).
func (m *Manager) Bind(a netip.Addr) { m.bindings.Set(m.keys.Addr(a), struct{}{}) }

// Entry records an ipset entry (render.Sink).
func (m *Manager) Entry(e render.SetEntry) { m.entries.Set(m.keys.Entry(e), struct{}{}) }

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
	return m.keys.Plan(&objects.Changes{
		Servers: m.servers.Changed(), DeletedServers: m.servers.Deleted(),
		Dests: m.dests.Changed(), DeletedDests: m.dests.Deleted(),
		Bindings: m.bindings.Changed(), DeletedBindings: m.bindings.Deleted(),
		Entries: m.entries.Changed(), DeletedEntries: m.entries.Deleted(),
	})
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
	f := m.keys.Failures(res)
	m.servers.AppliedAll(f.Server)
	m.dests.AppliedAll(f.Dest)
	m.bindings.AppliedAll(f.Addr)
	m.entries.AppliedAll(f.Entry)
	return res
}

// Reconcile makes the stores' view of the kernel match st (what the kernel
// holds now): objects that vanished are forgotten, objects that appeared or
// changed are adopted. The next Done then reports what repairs the drift.
func (m *Manager) Reconcile(st *dataplane.State) {
	m.keys.Reconcile(objects.Stores{Servers: m.servers, Dests: m.dests, Bindings: m.bindings, Entries: m.entries},
		st, m.applier.IsTerminating)
}

// Len returns the number of objects tracked: servers, destinations,
// bindings and set entries.
func (m *Manager) Len() (servers, dests, bindings, entries int) {
	return m.servers.Len(), m.dests.Len(), m.bindings.Len(), m.entries.Len()
}
