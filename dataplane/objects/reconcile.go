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
// left out. The sink's next round then reports what repairs the drift; at
// start-up, what the kernel already holds is not written again.
func (t *Keys) Reconcile(s Stores, st *dataplane.State, terminating func(render.Destination) bool) {
	// A tracked virtual server the read could not see as the sink's is
	// neither forgotten nor adopted: forgetting it would leak it once its
	// address is bound again.
	var hidden func(ServerKey) bool
	if st.Visible != nil {
		hidden = func(k ServerKey) bool { return !st.Visible(t.ServerOf(k)) }
	}
	servers := make(map[ServerKey]render.ServerOptions, len(st.Servers))
	for vs, o := range st.Servers {
		servers[t.Server(vs)] = o
	}
	reconcile(s.Servers, servers, hidden)
	dests := make(map[DestKey]render.DestOptions, len(st.Dests))
	for d, o := range st.Dests {
		if terminating == nil || !terminating(d) {
			dests[t.Dest(d)] = o
		}
	}
	var destHidden func(DestKey) bool
	if hidden != nil {
		destHidden = func(k DestKey) bool { return hidden(k.vs) }
	}
	reconcile(s.Dests, dests, destHidden)
	bound := make(map[AddrKey]struct{}, len(st.Bindings))
	for _, a := range st.Bindings {
		bound[t.Addr(a)] = struct{}{}
	}
	reconcile(s.Bindings, bound, nil)
	entries := make(map[EntryKey]struct{}, len(st.Entries))
	for _, e := range st.Entries {
		entries[t.Entry(e)] = struct{}{}
	}
	reconcile(s.Entries, entries, nil)
}

// reconcile forgets the objects of s missing from kernel, unless hidden
// says the kernel's view could not show them, and adopts those of kernel.
func reconcile[K comparable, V any](s Store[K, V], kernel map[K]V, hidden func(K) bool) {
	var gone []K
	s.Each(func(k K, _ V) {
		if _, ok := kernel[k]; !ok && (hidden == nil || !hidden(k)) {
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
