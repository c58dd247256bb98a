// Package incremental is the IPVS incremental sink's controller: a
// client.Sink that, at every Sync, renders only the services touched since
// the last Sync (with dataplane/render, as the full-state sink does),
// updates reference counts of the kernel objects they want, and writes the
// objects whose count or value changed through the same dataplane.Applier.
// A change costs what the change costs, whatever the size of the cluster.
//
// Objects shared between services (a cluster IP bound by two services, a
// node-port set entry, a KUBE-LOOP-BACK entry of an endpoint behind two
// services) are counted: deleting one service never removes what another
// still needs. At the first Sync the controller adopts what the kernel
// already holds (dataplane.Node.Read), so a restart with an unchanged
// cluster writes nothing; Resync re-reads the kernel and repairs drift;
// writes that fail are retried at the next Sync or Resync. Terminating TCP
// destinations are the Applier's, as in the full-state sink; stale UDP
// conntrack flows are the sinks' runtime's (sinks/udpflows). The round around the decision (adoption, writes,
// reaping, resync, logs) is the controller core both IPVS sinks share
// (dataplane/controller).
package incremental

import (
	"cmp"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/proxysinks/proxysinks/client"
	"github.com/proxysinks/proxysinks/dataplane"
	"github.com/proxysinks/proxysinks/dataplane/controller"
	"github.com/proxysinks/proxysinks/dataplane/objects"
	"github.com/proxysinks/proxysinks/dataplane/render"
)

// Controller is an incremental IPVS sink. It is safe for concurrent use.
type Controller struct {
	cfg  render.Config
	core controller.Core
	// OnSync, when set, is called after every sync (metrics).
	OnSync func(dataplane.SyncStats)

	// services are by number, so that the reference counts name
	// services by a number, not by a key holding strings. A service
	// keeps its number while it has a service, endpoints or rendered
	// objects; the numbers of the others are reused (free).
	services []service
	ids      map[client.ServiceKey]uint32
	names    []client.ServiceKey // by number
	free     []uint32
	touched  []uint32 // numbers of the services touched since the last sync
	present  int      // services with a service or endpoints
	noLocal  int      // services with a Local policy and no local endpoint
	servers  *refStore[objects.ServerKey, render.ServerOptions]
	dests    *refStore[objects.DestKey, render.DestOptions]
	bindings *refStore[objects.AddrKey, struct{}]
	entries  *refStore[objects.EntryKey, struct{}]
	// scratch collects a rendering's objects, and se is the rendered
	// service; both reused between renderings.
	scratch []objRef
	se      client.ServiceEndpoints
}

// service is one service as the events left it, and the objects its last
// rendering emitted.
type service struct {
	svc *client.Service    // nil: deleted
	eps []*client.Endpoint // sorted by key
	// objs are the objects the last rendering emitted, in order: taking
	// them back needs no rendering and no key lookup.
	objs    []objRef
	touched bool
	present bool // counted in Controller.present
	noLocal bool
}

// objRef is a kind of object (the top two bits) and its slot in that
// kind's refStore.
type objRef uint32

const (
	kindServer objRef = iota << 30
	kindDest
	kindBinding
	kindEntry
	kindMask objRef = 3 << 30
)

func (o objRef) slot() int32 { return int32(o &^ kindMask) }

// New returns a controller that renders with cfg, writes through applier
// and adopts the kernel's state through reader (nil for none).
func New(cfg render.Config, applier *dataplane.Applier, reader controller.Reader, log *slog.Logger) *Controller {
	c := &Controller{cfg: cfg, ids: map[client.ServiceKey]uint32{}}
	greater := func(a, b uint32) bool { return c.names[a].Compare(c.names[b]) > 0 }
	c.servers = newRefStore[objects.ServerKey, render.ServerOptions](greater)
	c.dests = newRefStore[objects.DestKey, render.DestOptions](greater)
	c.bindings = newRefStore[objects.AddrKey, struct{}](greater)
	c.entries = newRefStore[objects.EntryKey, struct{}](greater)
	c.core.Init(applier, reader, log, controller.Records{Servers: c.servers, Dests: c.dests, Bindings: c.bindings, Entries: c.entries})
	c.core.ResyncServices = true
	c.core.OnSync = func(st dataplane.SyncStats) {
		if c.OnSync != nil {
			c.OnSync(st)
		}
	}
	return c
}

var _ client.Sink = (*Controller)(nil)

// get returns k's service, numbering it when new, and marks it touched.
func (c *Controller) get(k client.ServiceKey) *service {
	id, ok := c.ids[k]
	if !ok {
		if n := len(c.free); n > 0 {
			id = c.free[n-1]
			c.free = c.free[:n-1]
			c.names[id] = k
		} else {
			id = uint32(len(c.names))
			c.names = append(c.names, k)
			c.services = append(c.services, service{})
		}
		c.ids[k] = id
	}
	s := &c.services[id]
	if !s.touched {
		s.touched = true
		c.touched = append(c.touched, id)
	}
	return s
}

// SetService adds or replaces a service (client.Sink).
func (c *Controller) SetService(svc *client.Service) {
	c.core.Mu.Lock()
	defer c.core.Mu.Unlock()
	c.get(svc.Key()).svc = svc
}

// DeleteService removes a service and its endpoints (client.Sink).
func (c *Controller) DeleteService(k client.ServiceKey) {
	c.core.Mu.Lock()
	defer c.core.Mu.Unlock()
	if _, ok := c.ids[k]; ok {
		s := c.get(k)
		s.svc = nil
		s.eps = nil
	}
}

// SetEndpoint adds or replaces an endpoint of a service (client.Sink).
func (c *Controller) SetEndpoint(k client.ServiceKey, ep *client.Endpoint) {
	c.core.Mu.Lock()
	defer c.core.Mu.Unlock()
	s := c.get(k)
	i, found := slices.BinarySearchFunc(s.eps, ep.Key, byKey)
	switch {
	case found:
		s.eps[i] = ep
	case cap(s.eps) == 0:
		// Endpoints come one at a time: room for a few at once.
		s.eps = append(make([]*client.Endpoint, 0, 8), ep)
	default:
		s.eps = slices.Insert(s.eps, i, ep)
	}
}

// DeleteEndpoint removes an endpoint of a service (client.Sink).
func (c *Controller) DeleteEndpoint(k client.ServiceKey, key client.EndpointKey) {
	c.core.Mu.Lock()
	defer c.core.Mu.Unlock()
	if _, ok := c.ids[k]; ok {
		s := c.get(k)
		if i, found := slices.BinarySearchFunc(s.eps, key, byKey); found {
			s.eps = slices.Delete(s.eps, i, i+1)
		}
	}
}

// SetNodeAddresses replaces the addresses NodePorts are served on
// (render.Config.NodeAddresses): every service is touched, and the next
// Sync renders them with the new addresses and writes what changed (the
// node-port virtual servers, and whatever else a node address decides:
// the binding of an external IP that is or was one).
func (c *Controller) SetNodeAddresses(addrs []netip.Addr) {
	c.core.Mu.Lock()
	defer c.core.Mu.Unlock()
	c.cfg.NodeAddresses = addrs
	for id := range c.services {
		if c.services[id].svc != nil {
			c.get(c.names[id])
		}
	}
}

// Sync renders the services touched since the last Sync and writes what
// changed (client.Sink).
func (c *Controller) Sync() {
	c.core.Mu.Lock()
	defer c.core.Mu.Unlock()
	c.core.Sync(c.decide)
}

// Resync re-reads the kernel and repairs what drifted from the wanted
// state, retries failed writes and removes terminated destinations. Before
// the first successful Sync it is that Sync.
func (c *Controller) Resync() dataplane.SyncStats {
	c.core.Mu.Lock()
	defer c.core.Mu.Unlock()
	return c.core.Resync(c.first, c.decide)
}

// Retry writes, alone, the objects the last rounds left unwritten whose
// quarantine retry is due (controller.Core.Retry), with the changes
// touched since the last Sync, if any.
func (c *Controller) Retry() dataplane.SyncStats {
	c.core.Mu.Lock()
	defer c.core.Mu.Unlock()
	return c.core.Retry(c.decide)
}

// first is a resync before the first successful Sync: that Sync, when
// there is something to sync.
func (c *Controller) first() dataplane.SyncStats {
	if len(c.touched) == 0 {
		return dataplane.SyncStats{Start: time.Now()}
	}
	return c.core.Sync(c.decide)
}

// StartResync begins a resync whose kernel read runs apart from the
// syncs, so that a change arriving meanwhile waits for no read of the
// whole kernel (controller.Core.StartResync). Before the first successful
// Sync, or without a reader, read does nothing and finish is Resync.
func (c *Controller) StartResync() (read func() (finish func() dataplane.SyncStats)) {
	return c.core.StartResync(c.Resync, c.decide)
}

// decide is how the incremental controller decides what changed: it
// renders the services touched since the last round, and counts the
// services.
func (c *Controller) decide() controller.Counts {
	return controller.Counts{RenderErrors: c.render(), Services: c.present, NoLocalEndpoints: c.noLocal}
}

// render takes the touched services' old objects back and adds their new
// ones, in key order, and returns how many problems rendering found.
func (c *Controller) render() (renderErrors int) {
	if len(c.touched) == 0 {
		return 0
	}
	ids := c.touched
	slices.SortFunc(ids, func(a, b uint32) int { return c.names[a].Compare(c.names[b]) })
	if c.servers.Len()+c.dests.Len()+c.bindings.Len()+c.entries.Len() == 0 {
		// A first sync: size the records for what a ClusterIP service
		// renders (a server, its destinations, a binding and three set
		// entries: KUBE-CLUSTER-IP, KUBE-IPVS-IPS and the server's
		// KUBE-PROXYSINKS-VS record), instead of growing them step by
		// step.
		n := 0
		for _, id := range ids {
			n += len(c.services[id].eps)
		}
		c.servers.reserve(len(ids))
		c.dests.reserve(n)
		c.bindings.reserve(len(ids))
		c.entries.reserve(3 * len(ids))
	}
	c.servers.begin()
	c.dests.begin()
	c.bindings.begin()
	c.entries.begin()
	for _, id := range ids {
		s := &c.services[id]
		s.touched = false
		c.takeBack(id, s)
		if s.noLocal {
			c.noLocal--
			s.noLocal = false
		}
		present := s.svc != nil || len(s.eps) > 0
		switch {
		case present && !s.present:
			c.present++
		case !present && s.present:
			c.present--
		}
		s.present = present
		if s.svc == nil {
			// Deleted; or endpoints whose service has not come yet,
			// kept until it does. A deleted service's number is free:
			// nothing refers to it any more.
			if !present {
				delete(c.ids, c.names[id])
				c.names[id] = client.ServiceKey{}
				*s = service{}
				c.free = append(c.free, id)
			}
			continue
		}
		se := &c.se
		se.Service, se.Endpoints = s.svc, s.eps
		c.scratch = c.scratch[:0]
		for _, err := range render.Render(se, c.cfg, collector{c, id}) {
			renderErrors++
			c.core.Log.Warn("service skipped in part", "error", err)
		}
		if se.NoLocalEndpoints() {
			s.noLocal = true
			c.noLocal++
		}
		se.Service, se.Endpoints = nil, nil
		if cap(s.objs) < len(c.scratch) || cap(s.objs) > 2*len(c.scratch)+8 {
			s.objs = make([]objRef, len(c.scratch))
		} else {
			s.objs = s.objs[:len(c.scratch)]
		}
		copy(s.objs, c.scratch)
	}
	c.resolve(ids)
	if cap(c.touched) > 4096 {
		// Let the list of a large sync go.
		c.touched = nil
	} else {
		c.touched = c.touched[:0]
	}
	if cap(c.scratch) > 4096 {
		c.scratch = nil
	}
	return renderErrors
}

// resolve indexes the objects the rendering of the services ids added in
// bulk, and points the services' records of duplicates that were merged
// at the slot that holds their object now.
func (c *Controller) resolve(ids []uint32) {
	var moved map[objRef]objRef
	move := func(kind objRef) func(from, to int32) {
		return func(from, to int32) {
			if moved == nil {
				moved = map[objRef]objRef{}
			}
			moved[kind|objRef(from)] = kind | objRef(to)
		}
	}
	c.servers.resolve(move(kindServer))
	c.dests.resolve(move(kindDest))
	c.bindings.resolve(move(kindBinding))
	c.entries.resolve(move(kindEntry))
	if moved == nil {
		return
	}
	for _, id := range ids {
		for i, o := range c.services[id].objs {
			if to, ok := moved[o]; ok {
				c.services[id].objs[i] = to
			}
		}
	}
}

// takeBack takes back the objects the service's last rendering emitted.
func (c *Controller) takeBack(id uint32, s *service) {
	for _, o := range s.objs {
		switch o & kindMask {
		case kindServer:
			c.servers.remove(o.slot(), id)
		case kindDest:
			c.dests.remove(o.slot(), id)
		case kindBinding:
			c.bindings.remove(o.slot(), id)
		default:
			c.entries.remove(o.slot(), id)
		}
	}
	s.objs = s.objs[:0]
}

func byKey(e *client.Endpoint, k client.EndpointKey) int { return cmp.Compare(e.Key, k) }

// collector adds one service's rendered objects and records their slots.
type collector struct {
	c   *Controller
	svc uint32
}

func (r collector) Server(vs render.VirtualServer, o render.ServerOptions) {
	i := r.c.servers.add(r.c.core.Keys.Server(vs), r.svc, o)
	r.c.scratch = append(r.c.scratch, kindServer|objRef(i))
}

func (r collector) Destination(d render.Destination, o render.DestOptions) {
	i := r.c.dests.add(r.c.core.Keys.Dest(d), r.svc, o)
	r.c.scratch = append(r.c.scratch, kindDest|objRef(i))
}

func (r collector) Bind(a netip.Addr) {
	i := r.c.bindings.add(r.c.core.Keys.Addr(a), r.svc, struct{}{})
	r.c.scratch = append(r.c.scratch, kindBinding|objRef(i))
}

func (r collector) Entry(e render.SetEntry) {
	i := r.c.entries.add(r.c.core.Keys.Entry(e), r.svc, struct{}{})
	r.c.scratch = append(r.c.scratch, kindEntry|objRef(i))
}

// Len returns the number of objects tracked: servers, destinations,
// bindings and set entries.
func (c *Controller) Len() (servers, dests, bindings, entries int) {
	c.core.Mu.Lock()
	defer c.core.Mu.Unlock()
	return c.core.Records.Len()
}
