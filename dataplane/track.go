package dataplane

import (
	"net/netip"
	"sync"
	"time"

	"github.com/proxysinks/proxysinks/dataplane/render"
)

// Written is the objects written (or tried) during a recording of
// Applier.Track.
type Written = ObjectMap[bool]

// tracking is one recording of Track.
type tracking struct{ objs Written }

// Track starts recording the objects Apply and Reap write or try to
// write; stop ends the recording and returns them. A resync reading the
// kernel while plans are applied (Node.Read on another goroutine) gives
// them to State.Written, since the read may have seen them before they
// were written. One recording at a time: a second Track replaces the
// first, whose stop then returns what it had.
func (a *Applier) Track() (stop func() Written) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &tracking{}
	a.tracked = t
	return func() Written {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.tracked == t {
			a.tracked = nil
		}
		return t.objs
	}
}

// ReadApart starts a resync whose kernel read runs apart from the plans
// being applied (a controller's split resync, runtime.SplitResyncer): it
// starts recording what the applier writes (Track) and returns read,
// which reads the kernel through r on any goroutine while plans go on
// being applied. The finish read returns locks mu (the controller's: no
// plan is then being applied), stops the recording and calls repair with
// the resync's start and the state read, whose Written holds what was
// written since ReadApart, or the read's error. The caller holds mu.
func (a *Applier) ReadApart(mu sync.Locker, r interface{ Read() (*State, error) },
	repair func(start time.Time, k *State, err error) SyncStats) (read func() (finish func() SyncStats)) {
	start := time.Now()
	stop := a.Track()
	return func() func() SyncStats {
		k, err := r.Read()
		return func() SyncStats {
			mu.Lock()
			defer mu.Unlock()
			written := stop()
			if err == nil {
				k.Written = written
			}
			return repair(start, k, err)
		}
	}
}

// track records the plan's objects while a recording runs; the caller
// holds a.mu.
func (a *Applier) track(p *Plan) {
	if a.tracked == nil {
		return
	}
	objs := &a.tracked.objs
	for _, l := range [][]Server{p.CreateServers, p.UpdateServers, p.DeleteServers} {
		for _, s := range l {
			put(&objs.Servers, s.VS, true)
		}
	}
	for _, l := range [][]Dest{p.CreateDests, p.UpdateDests, p.DeleteDests} {
		for _, d := range l {
			put(&objs.Dests, d.D, true)
		}
	}
	for _, l := range [][]netip.Addr{p.Bind, p.Unbind} {
		for _, b := range l {
			put(&objs.Bindings, b, true)
		}
	}
	for _, l := range [][]render.SetEntry{p.AddEntries, p.DelEntries} {
		for _, e := range l {
			put(&objs.Entries, e, true)
		}
	}
}
