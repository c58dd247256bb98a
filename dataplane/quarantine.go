package dataplane

import (
	"errors"
	"net/netip"

	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/host/quarantine"
)

// WholeError is a write that failed as a whole (the socket failed, the
// reply was lost): every object of the batch carries it, and none of them
// is quarantined for it. A sync with one fails, and fails health after
// kube-proxy's timeout, as before.
type WholeError struct{ Err error }

func (e *WholeError) Error() string { return e.Err.Error() }

// Unwrap returns the batch's error.
func (e *WholeError) Unwrap() error { return e.Err }

// ErrHeld is the failure of an object held back by its quarantine: its
// retry is not due and what is wanted of it did not change.
var ErrHeld = errors.New("dataplane: quarantined, retry not due")

// Kinds of the objects the IPVS sinks quarantine (quarantine.Object.Kind).
const (
	KindVirtualServer = "VirtualServer"
	KindDestination   = "Destination"
	KindAddress       = "Address"
	KindSetEntry      = "SetEntry"
)

// version is what a plan wants of an object: the kind of write and its
// options (quarantine.Set.Hold).
type version struct {
	op int8 // 0 create, 1 update, 2 delete
	s  render.ServerOptions
	d  render.DestOptions
}

// whole reports whether err failed a whole batch.
func whole(err error) bool {
	var w *WholeError
	return errors.As(err, &w)
}

// hold takes out of p the quarantined objects whose retry is not due
// (none when p.RetryAll), and returns them as failed with ErrHeld, with
// how many there are. A destination of a server held is held with it.
func (a *Applier) hold(p *Plan) (held ObjectMap[error], n int) {
	q := a.Quarantine
	if q == nil || q.Len() == 0 || p.RetryAll {
		return held, 0
	}
	servers := func(l []Server, op int8) []Server {
		return holdOut(q, l, &held.Servers, func(s Server) (render.VirtualServer, version) { return s.VS, version{op: op, s: s.Opts} }, nil)
	}
	dests := func(l []Dest, op int8) []Dest {
		return holdOut(q, l, &held.Dests, func(d Dest) (render.Destination, version) { return d.D, version{op: op, d: d.Opts} },
			func(d render.Destination) bool { return held.Server(d.Server) })
	}
	addrs := func(l []netip.Addr, op int8) []netip.Addr {
		return holdOut(q, l, &held.Bindings, func(a netip.Addr) (netip.Addr, version) { return a, version{op: op} }, nil)
	}
	entries := func(l []render.SetEntry, op int8) []render.SetEntry {
		return holdOut(q, l, &held.Entries, func(e render.SetEntry) (render.SetEntry, version) { return e, version{op: op} }, nil)
	}
	p.CreateServers, p.UpdateServers, p.DeleteServers = servers(p.CreateServers, 0), servers(p.UpdateServers, 1), servers(p.DeleteServers, 2)
	p.CreateDests, p.UpdateDests, p.DeleteDests = dests(p.CreateDests, 0), dests(p.UpdateDests, 1), dests(p.DeleteDests, 2)
	p.Bind, p.Unbind = addrs(p.Bind, 0), addrs(p.Unbind, 2)
	p.AddEntries, p.DelEntries = entries(p.AddEntries, 0), entries(p.DelEntries, 2)
	return held, held.Len()
}

// holdOut returns l without the elements q holds (by their key and what is
// wanted of it, or when also, if set, reports the key held); each held one
// goes into m as failed with ErrHeld.
func holdOut[T any, K comparable](q *quarantine.Set[any], l []T, m *map[K]error, key func(T) (K, version), also func(K) bool) []T {
	out := l[:0:0]
	for _, x := range l {
		k, v := key(x)
		if (also != nil && also(k)) || q.Hold(k, v) {
			put(m, k, ErrHeld)
			continue
		}
		out = append(out, x)
	}
	return out
}

// settle records the outcome of the plan written (p, without what was
// held) in the quarantine: an object refused alone enters it or waits
// longer, one written leaves it, and one neither written nor held is no
// longer wanted and leaves it too. A destination that failed with its
// server is the server's failure, not its own. With nothing quarantined
// and nothing failed it costs nothing (a first sync of a large cluster).
func (a *Applier) settle(res *Result, p *Plan, held *ObjectMap[error]) {
	q := a.Quarantine
	if q == nil {
		return
	}
	res.Quarantining = true
	if q.Len() == 0 && res.Failed.Len() == 0 {
		return
	}
	check := q.Len() > 0 // objects written may leave it
	failed := map[any]bool{}
	note := func(k any, err error, v version, o func() quarantine.Object) {
		if err == nil {
			q.Clear(k)
			return
		}
		failed[k] = true
		if !whole(err) {
			q.Fail(k, o(), v, err)
		}
	}
	for op, l := range [][]Server{p.CreateServers, p.UpdateServers, p.DeleteServers} {
		for _, s := range l {
			if err := res.Failed.Servers[s.VS]; err != nil || check {
				note(s.VS, err, version{op: int8(op), s: s.Opts}, func() quarantine.Object {
					return quarantine.Object{Kind: KindVirtualServer, Name: s.VS.String(), Addr: s.VS.Addr, Port: s.VS.Port}
				})
			}
		}
	}
	for op, l := range [][]Dest{p.CreateDests, p.UpdateDests, p.DeleteDests} {
		for _, d := range l {
			err := res.Failed.Dests[d.D]
			if err != nil && res.Failed.Server(d.D.Server) {
				err = nil // its server's failure: quarantined with it
			}
			if err != nil || check {
				note(d.D, err, version{op: int8(op), d: d.Opts}, func() quarantine.Object {
					return quarantine.Object{Kind: KindDestination, Name: d.D.String(), Addr: d.D.Server.Addr, Port: d.D.Server.Port}
				})
			}
		}
	}
	for i, l := range [][]netip.Addr{p.Bind, p.Unbind} {
		for _, ad := range l {
			if err := res.Failed.Bindings[ad]; err != nil || check {
				note(ad, err, version{op: int8(2 * i)}, func() quarantine.Object {
					return quarantine.Object{Kind: KindAddress, Name: ad.String(), Addr: ad.Unmap()}
				})
			}
		}
	}
	for i, l := range [][]render.SetEntry{p.AddEntries, p.DelEntries} {
		for _, e := range l {
			if err := res.Failed.Entries[e]; err != nil || check {
				note(e, err, version{op: int8(2 * i)}, func() quarantine.Object {
					return quarantine.Object{Kind: KindSetEntry, Name: e.String(), Addr: e.Addr, Port: e.Port}
				})
			}
		}
	}
	q.Keep(func(k any) bool { return failed[k] || heldKey(held, k) })
	res.Quarantined = q.Entries()
}

// heldKey reports whether held holds k, a key of the quarantine.
func heldKey(held *ObjectMap[error], k any) bool {
	switch k := k.(type) {
	case render.VirtualServer:
		return held.Server(k)
	case render.Destination:
		return held.Dest(k)
	case netip.Addr:
		return held.Binding(k)
	case render.SetEntry:
		return held.Entry(k)
	}
	return false
}

// ClearQuarantine empties the quarantine: a round with nothing to write
// has no object refused.
func (a *Applier) ClearQuarantine() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Quarantine != nil {
		a.Quarantine.Keep(func(any) bool { return false })
	}
}
