package objects

import (
	"net/netip"

	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/diffstore"
	"github.com/proxysinks/proxysinks/dataplane/render"
)

// Changes are the objects of one round to write: in each kind, the objects
// to create or update (Value is wanted; HasOld when the kernel holds Old)
// and the objects to delete (Old is what the kernel holds).
type Changes struct {
	Servers, DeletedServers   []diffstore.Change[ServerKey, render.ServerOptions]
	Dests, DeletedDests       []diffstore.Change[DestKey, render.DestOptions]
	Bindings, DeletedBindings []diffstore.Change[AddrKey, struct{}]
	Entries, DeletedEntries   []diffstore.Change[EntryKey, struct{}]
}

// Plan returns the writes that make the kernel hold what c wants: an
// object the kernel does not hold is created, one it holds with other
// options is updated.
func (t *Keys) Plan(c *Changes) dataplane.Plan {
	var p dataplane.Plan
	p.CreateServers, p.UpdateServers = splitChanges(c.Servers, func(k ServerKey, v render.ServerOptions) dataplane.Server {
		return dataplane.Server{VS: t.ServerOf(k), Opts: v}
	})
	p.DeleteServers = deletions(c.DeletedServers, func(k ServerKey, old render.ServerOptions) dataplane.Server {
		return dataplane.Server{VS: t.ServerOf(k), Opts: old}
	})
	p.CreateDests, p.UpdateDests = splitChanges(c.Dests, func(k DestKey, v render.DestOptions) dataplane.Dest {
		return dataplane.Dest{D: t.DestOf(k), Opts: v}
	})
	p.DeleteDests = deletions(c.DeletedDests, func(k DestKey, old render.DestOptions) dataplane.Dest {
		return dataplane.Dest{D: t.DestOf(k), Opts: old}
	})
	addr := func(k AddrKey, _ struct{}) netip.Addr { return t.AddrOf(k) }
	p.Bind = deletions(c.Bindings, addr)
	p.Unbind = deletions(c.DeletedBindings, addr)
	entry := func(k EntryKey, _ struct{}) render.SetEntry { return t.EntryOf(k) }
	p.AddEntries = deletions(c.Entries, entry)
	p.DelEntries = deletions(c.DeletedEntries, entry)
	return p
}

// deletions makes one object of each change, from its key and old value
// (for bindings and entries, whose value is empty, any change).
func deletions[K comparable, V, T any](cs []diffstore.Change[K, V], mk func(K, V) T) []T {
	out := make([]T, 0, len(cs))
	for _, c := range cs {
		out = append(out, mk(c.Key, c.Old))
	}
	return out
}

// splitChanges turns changes into the objects to create (no old value) and
// to update, each made by mk from its key and wanted value.
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

// countNew counts the changes that create an object.
func countNew[K comparable, V any](cs []diffstore.Change[K, V]) int {
	n := 0
	for i := range cs {
		if !cs[i].HasOld {
			n++
		}
	}
	return n
}

// Failures tells which keys a Result reports as failed.
type Failures struct {
	t      *Keys
	failed dataplane.ObjectMap[error]
}

// Failures returns the failures of res, keyed by this table's keys.
func (t *Keys) Failures(res *dataplane.Result) Failures { return Failures{t, res.Failed} }

// None reports whether nothing failed.
func (f Failures) None() bool { return f.failed.Len() == 0 }

// Server reports whether the virtual server of k failed.
func (f Failures) Server(k ServerKey) bool { return f.failed.Server(f.t.ServerOf(k)) }

// Dest reports whether the destination of k failed.
func (f Failures) Dest(k DestKey) bool { return f.failed.Dest(f.t.DestOf(k)) }

// Addr reports whether the binding of k failed.
func (f Failures) Addr(k AddrKey) bool { return f.failed.Binding(f.t.AddrOf(k)) }

// Entry reports whether the set entry of k failed.
func (f Failures) Entry(k EntryKey) bool { return f.failed.Entry(f.t.EntryOf(k)) }
