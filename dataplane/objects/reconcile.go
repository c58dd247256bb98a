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
// left out. Objects st.Written reports (and the destinations of a virtual
// server it reports: they go with it) were written after the read may
// have seen them, and are left as the stores have them. The sink's next
// round then reports what repairs the drift; at start-up, what the kernel
// already holds is not written again.
func (t *Keys) Reconcile(s Stores, st *dataplane.State, terminating func(render.Destination) bool) {
	// A tracked virtual server the read could not see as the sink's is
	// kept as it is: forgetting it would leak it once its address is bound
	// again.
	var serverKept func(ServerKey) bool
	switch {
	case st.Visible != nil && st.Written != nil:
		serverKept = func(k ServerKey) bool { vs := t.ServerOf(k); return !st.Visible(vs) || st.Written(vs) }
	case st.Visible != nil:
		serverKept = func(k ServerKey) bool { return !st.Visible(t.ServerOf(k)) }
	case st.Written != nil:
		serverKept = func(k ServerKey) bool { return st.Written(t.ServerOf(k)) }
	}
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
	switch {
	case serverKept != nil && st.Written != nil:
		destKept = func(k DestKey) bool { return serverKept(k.vs) || st.Written(t.DestOf(k)) }
	case serverKept != nil:
		destKept = func(k DestKey) bool { return serverKept(k.vs) }
	}
	reconcile(s.Dests, dests, destKept)
	bound := make(map[AddrKey]struct{}, len(st.Bindings))
	for _, a := range st.Bindings {
		bound[t.Addr(a)] = struct{}{}
	}
	entries := make(map[EntryKey]struct{}, len(st.Entries))
	for _, e := range st.Entries {
		entries[t.Entry(e)] = struct{}{}
	}
	var addrKept func(AddrKey) bool
	var entryKept func(EntryKey) bool
	if st.Written != nil {
		addrKept = func(k AddrKey) bool { return st.Written(t.AddrOf(k)) }
		entryKept = func(k EntryKey) bool { return st.Written(t.EntryOf(k)) }
	}
	reconcile(s.Bindings, bound, addrKept)
	reconcile(s.Entries, entries, entryKept)
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
