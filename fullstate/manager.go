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
type Manager struct {
	servers  *diffstore.Store[render.VirtualServer, render.ServerOptions]
	dests    *diffstore.Store[render.Destination, render.DestOptions]
	bindings *diffstore.Store[netip.Addr, struct{}]
	entries  *diffstore.Store[render.SetEntry, struct{}]
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
		servers:  diffstore.NewComparable[render.VirtualServer, render.ServerOptions](),
		dests:    diffstore.NewComparable[render.Destination, render.DestOptions](),
		bindings: diffstore.NewComparable[netip.Addr, struct{}](),
		entries:  diffstore.NewComparable[render.SetEntry, struct{}](),
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
func (m *Manager) Server(vs render.VirtualServer, o render.ServerOptions) { m.servers.Set(vs, o) }

// Destination records a destination the round wants (render.Sink).
func (m *Manager) Destination(d render.Destination, o render.DestOptions) { m.dests.Set(d, o) }

// Bind records an address to bind on the dummy link (render.Sink).
func (m *Manager) Bind(a netip.Addr) { m.bindings.Set(a, struct{}{}) }

// Entry records an ipset entry (render.Sink).
func (m *Manager) Entry(e render.SetEntry) { m.entries.Set(e, struct{}{}) }

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
	p.CreateServers = make([]dataplane.Server, 0, len(m.servers.Changed()))
	p.CreateDests = make([]dataplane.Dest, 0, len(m.dests.Changed()))
	p.AddEntries = make([]render.SetEntry, 0, len(m.entries.Changed()))
	for _, c := range m.servers.Changed() {
		s := dataplane.Server{VS: c.Key, Opts: c.Value}
		if c.HasOld {
			p.UpdateServers = append(p.UpdateServers, s)
		} else {
			p.CreateServers = append(p.CreateServers, s)
		}
	}
	for _, c := range m.servers.Deleted() {
		p.DeleteServers = append(p.DeleteServers, dataplane.Server{VS: c.Key, Opts: c.Old})
	}
	for _, c := range m.dests.Changed() {
		d := dataplane.Dest{D: c.Key, Opts: c.Value}
		if c.HasOld {
			p.UpdateDests = append(p.UpdateDests, d)
		} else {
			p.CreateDests = append(p.CreateDests, d)
		}
	}
	for _, c := range m.dests.Deleted() {
		p.DeleteDests = append(p.DeleteDests, dataplane.Dest{D: c.Key, Opts: c.Old})
	}
	for _, c := range m.bindings.Changed() {
		p.Bind = append(p.Bind, c.Key)
	}
	for _, c := range m.bindings.Deleted() {
		p.Unbind = append(p.Unbind, c.Key)
	}
	for _, c := range m.entries.Changed() {
		p.AddEntries = append(p.AddEntries, c.Key)
	}
	for _, c := range m.entries.Deleted() {
		p.DelEntries = append(p.DelEntries, c.Key)
	}
	return p
}

// Apply writes the round's changes and records what succeeded; what failed
// is retried after the next round.
func (m *Manager) Apply() dataplane.Result {
	p := m.Plan()
	if p.Empty() {
		return dataplane.Result{Failed: map[any]error{}}
	}
	res := m.applier.Apply(p)
	ok := func(k any) bool {
		if len(res.Failed) == 0 {
			return true
		}
		_, failed := res.Failed[k]
		return !failed
	}
	for _, l := range [][]dataplane.Server{p.CreateServers, p.UpdateServers, p.DeleteServers} {
		for _, s := range l {
			if ok(s.VS) {
				m.servers.Applied(s.VS)
			}
		}
	}
	for _, l := range [][]dataplane.Dest{p.CreateDests, p.UpdateDests, p.DeleteDests} {
		for _, d := range l {
			if ok(d.D) {
				m.dests.Applied(d.D)
			}
		}
	}
	for _, l := range [][]netip.Addr{p.Bind, p.Unbind} {
		for _, a := range l {
			if ok(a) {
				m.bindings.Applied(a)
			}
		}
	}
	for _, l := range [][]render.SetEntry{p.AddEntries, p.DelEntries} {
		for _, e := range l {
			if ok(e) {
				m.entries.Applied(e)
			}
		}
	}
	// A deleted server takes its destinations with it.
	for _, s := range p.DeleteServers {
		if ok(s.VS) {
			for _, d := range p.DeleteDests {
				if d.D.Server == s.VS {
					m.dests.Applied(d.D)
				}
			}
		}
	}
	return res
}

// Reconcile makes the stores' view of the kernel match st (what the kernel
// holds now): objects that vanished are forgotten, objects that appeared or
// changed are adopted. The next Done then reports what repairs the drift.
func (m *Manager) Reconcile(st *dataplane.State) {
	reconcile(m.servers, st.Servers)
	dests := make(map[render.Destination]render.DestOptions, len(st.Dests))
	for d, o := range st.Dests {
		// Destinations waiting out their connections are the applier's.
		if !m.applier.IsTerminating(d) {
			dests[d] = o
		}
	}
	reconcile(m.dests, dests)
	bound := map[netip.Addr]struct{}{}
	for _, a := range st.Bindings {
		bound[a] = struct{}{}
	}
	reconcile(m.bindings, bound)
	entries := map[render.SetEntry]struct{}{}
	for _, e := range st.Entries {
		entries[e] = struct{}{}
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
