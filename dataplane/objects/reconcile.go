package objects

import (
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/render"
)

// Store is what reconciling needs of a sink's record of one kind of object
// (a diffstore.Store implements it): the objects it believes the kernel
// holds, forgetting one the kernel lost, adopting one the kernel holds.
type Store[K comparable, V any] interface {
	// Each calls f for every object the kernel is believed to hold.
	Each(f func(key K, applied V))
	// Forget records that the kernel does not hold key.
	Forget(key K)
	// Adopt records that the kernel holds value for key.
	Adopt(key K, value V)
}

// Stores are a sink's records of the four kinds of objects.
type Stores struct {
	Servers  Store[ServerKey, render.ServerOptions]
	Dests    Store[DestKey, render.DestOptions]
	Bindings Store[AddrKey, struct{}]
	Entries  Store[EntryKey, struct{}]
}

// Reconcile makes the stores' view of the kernel match st (what the kernel
// holds now): objects that vanished are forgotten, objects that appeared or
// changed are adopted. Destinations for which terminating (when not nil)
// returns true wait out their connections under the applier's care and are
// left out. Objects in st.Written (and the destinations of a virtual
// server in it: they go with it) were written after the read may have
// seen them, and are left as the stores have them. The sink's next round
// then reports what repairs the drift; at start-up, what the kernel
// already holds is not written again.
func (t *Keys) Reconcile(s Stores, st *dataplane.State, terminating func(render.Destination) bool) {
	w := t.written(st.Written)
	// A tracked virtual server the read could not see as the sink's is
	// kept as it is: forgetting it would leak it once its address is bound
	// again. Visibility is asked once per server, not once per
	// destination.
	var hidden func(ServerKey) bool
	if st.Visible != nil {
		seen := map[ServerKey]bool{}
		hidden = func(k ServerKey) bool {
			h, ok := seen[k]
			if !ok {
				h = !st.Visible(t.ServerOf(k))
				seen[k] = h
			}
			return h
		}
	}
	serverKept := either(setFunc(w.servers), hidden)
	servers := make(map[ServerKey]render.ServerOptions, len(st.Servers))
	for vs, o := range st.Servers {
		servers[t.Server(vs)] = o
	}
	reconcile(s.Servers, servers, serverKept)
	dests := make(map[DestKey]render.DestOptions, len(st.Dests))
	for d, o := range st.Dests {
		if terminating == nil || !terminating(d) {
			dests[t.Dest(d)] = o
		}
	}
	var destKept func(DestKey) bool
	if serverKept != nil {
		destKept = func(k DestKey) bool { return serverKept(k.vs) }
	}
	destKept = either(setFunc(w.dests), destKept)
	reconcile(s.Dests, dests, destKept)
	bound := make(map[AddrKey]struct{}, len(st.Bindings))
	for _, a := range st.Bindings {
		bound[t.Addr(a)] = struct{}{}
	}
	reconcile(s.Bindings, bound, setFunc(w.addrs))
	entries := make(map[EntryKey]struct{}, len(st.Entries))
	for _, e := range st.Entries {
		entries[t.Entry(e)] = struct{}{}
	}
	reconcile(s.Entries, entries, setFunc(w.entries))
}

// writtenKeys are the objects of State.Written by kind, as keys.
type writtenKeys struct {
	servers map[ServerKey]bool
	dests   map[DestKey]bool
	addrs   map[AddrKey]bool
	entries map[EntryKey]bool
}

// written converts State.Written's objects to keys: the few written
// during a read are looked up cheaply among the many read.
func (t *Keys) written(objs dataplane.Written) writtenKeys {
	var w writtenKeys
	for o := range objs.Servers {
		put(&w.servers, t.Server(o))
	}
	for o := range objs.Dests {
		put(&w.dests, t.Dest(o))
	}
	for o := range objs.Bindings {
		put(&w.addrs, t.Addr(o))
	}
	for o := range objs.Entries {
		put(&w.entries, t.Entry(o))
	}
	return w
}

// put adds k to the set *m, making it when nil.
func put[K comparable](m *map[K]bool, k K) {
	if *m == nil {
		*m = map[K]bool{}
	}
	(*m)[k] = true
}

// setFunc reports membership of m; nil when m is empty.
func setFunc[K comparable](m map[K]bool) func(K) bool {
	if len(m) == 0 {
		return nil
	}
	return func(k K) bool { return m[k] }
}

// either reports whether a or b does; nil when both are, a function that
// is nil counting as false.
func either[K any](a, b func(K) bool) func(K) bool {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(k K) bool { return a(k) || b(k) }
}

// reconcile forgets the objects of s missing from kernel and adopts those
// of kernel, except the ones kept (when not nil) says the read cannot
// speak for: they stay as s has them.
func reconcile[K comparable, V any](s Store[K, V], kernel map[K]V, kept func(K) bool) {
	var gone []K
	s.Each(func(k K, _ V) {
		if _, ok := kernel[k]; !ok && (kept == nil || !kept(k)) {
			gone = append(gone, k)
		}
	})
	for _, k := range gone {
		s.Forget(k)
	}
	for k, v := range kernel {
		if kept == nil || !kept(k) {
			s.Adopt(k, v)
		}
	}
}
