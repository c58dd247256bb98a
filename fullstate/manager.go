package fullstate

import (
	"errors"
	"net/netip"

	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/controller"
	"github.com/proxysinks/proxysinks/dataplane/diffstore"
	"github.com/proxysinks/proxysinks/dataplane/objects"
	"github.com/proxysinks/proxysinks/dataplane/render"
)

// Manager keeps every kernel object the node needs in diffstores and writes
// only what changed. It is the seed's IPVS Manager (fullstate/seed gives
// it the seed's names): a round is Reset, then Server / Destination / Bind
// / Entry for every object, then Done, then Apply. It implements
// render.Sink.
//
// The stores are keyed by compact, pointer-free copies of the rendered
// objects (dataplane/objects); what the Manager hands out (Plan) is
// rendered objects. They are the records of the controller core
// (dataplane/controller) that writes their changes.
type Manager struct {
	servers  *diffstore.Store[objects.ServerKey, render.ServerOptions]
	dests    *diffstore.Store[objects.DestKey, render.DestOptions]
	bindings *diffstore.Store[objects.AddrKey, struct{}]
	entries  *diffstore.Store[objects.EntryKey, struct{}]
	core     controller.Core
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
	m := &Manager{
		servers:  diffstore.NewComparable[objects.ServerKey, render.ServerOptions](),
		dests:    diffstore.NewComparable[objects.DestKey, render.DestOptions](),
		bindings: diffstore.NewComparable[objects.AddrKey, struct{}](),
		entries:  diffstore.NewComparable[objects.EntryKey, struct{}](),
	}
	m.core.Init(a, nil, nil, controller.Records{
		Servers:  controller.Diffstore[objects.ServerKey, render.ServerOptions]{Store: m.servers},
		Dests:    controller.Diffstore[objects.DestKey, render.DestOptions]{Store: m.dests},
		Bindings: controller.Diffstore[objects.AddrKey, struct{}]{Store: m.bindings},
		Entries:  controller.Diffstore[objects.EntryKey, struct{}]{Store: m.entries},
	})
	return m
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
	m.servers.Set(m.core.Keys.Server(vs), o)
}

// Destination records a destination the round wants (render.Sink).
func (m *Manager) Destination(d render.Destination, o render.DestOptions) {
	m.dests.Set(m.core.Keys.Dest(d), o)
}

// Bind records an address to bind on the dummy link (render.Sink).
func (m *Manager) Bind(a netip.Addr) { m.bindings.Set(m.core.Keys.Addr(a), struct{}{}) }

// Entry records an ipset entry (render.Sink).
func (m *Manager) Entry(e render.SetEntry) { m.entries.Set(m.core.Keys.Entry(e), struct{}{}) }

// Done ends the round and computes the differences.
func (m *Manager) Done() {
	m.servers.Done()
	m.dests.Done()
	m.bindings.Done()
	m.entries.Done()
}

// Plan returns the writes the round needs.
func (m *Manager) Plan() dataplane.Plan { return m.core.Plan() }

// Apply writes the round's changes and records what succeeded; what failed
// is retried after the next round.
func (m *Manager) Apply() dataplane.Result { return m.ApplyPlan(m.Plan()) }

// ApplyPlan is Apply with the round's plan already made: p must be what
// Plan returned after the last Done.
func (m *Manager) ApplyPlan(p dataplane.Plan) dataplane.Result { return m.core.ApplyPlan(p) }

// Len returns the number of objects tracked: servers, destinations,
// bindings and set entries.
func (m *Manager) Len() (servers, dests, bindings, entries int) { return m.core.Records.Len() }
