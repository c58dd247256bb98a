package dataplane

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/proxysinks/proxysinks/dataplane/render"
	"github.com/proxysinks/proxysinks/netlinkraw/ipset"
	"github.com/proxysinks/proxysinks/netlinkraw/ipvs"
	"github.com/proxysinks/proxysinks/netlinkraw/link"
)

// Writer is where Apply writes: the kernel through netlinkraw, or the
// dry-run printer. Each method returns one error per object given, nil where
// the object was written; the writes of one call are batched.
type Writer interface {
	IPVS(ops []ipvs.Op) []error
	AddEntries(set string, entries []ipset.Entry) []error
	DelEntries(set string, entries []ipset.Entry) []error
	Bind(addrs []netip.Addr) []error
	Unbind(addrs []netip.Addr) []error
	// Destinations reads a virtual server's destinations with their
	// connection counts (graceful termination).
	Destinations(s ipvs.Service) ([]ipvs.DestinationEntry, error)
}

// Links is the part of netlinkraw/link the dataplane uses (a fake in unit
// tests: this build machine's kernel has no dummy links).
type Links interface {
	EnsureDummy(name string) (link.Link, error)
	Addresses(name string) ([]netip.Addr, error)
	AddAddresses(name string, addrs []netip.Addr) error
	DelAddresses(name string, addrs []netip.Addr) error
	// LocalRoutes, AddLocalRoutes and DelLocalRoutes are the local routes
	// through a link that make addresses local without binding them
	// (BindRoutes).
	LocalRoutes(name string) ([]netip.Addr, error)
	AddLocalRoutes(name string, addrs []netip.Addr) error
	DelLocalRoutes(name string, addrs []netip.Addr) error
	// DeleteLink deletes a link and its addresses; a missing link is not
	// an error.
	DeleteLink(name string) error
}

// Kernel writes through netlinkraw's clients, all in one network namespace.
type Kernel struct {
	IPVSConn *ipvs.Conn
	IPSet    ipset.Client
	Link     Links
	// Dummy is the link holding the bound addresses (kube-ipvs0).
	Dummy string
	// Binding is how virtual IPs are made local (the zero value:
	// addresses, as kube-proxy binds them).
	Binding Binding
}

// Binding is how the IPVS sinks make a virtual IP local to the node, so
// that packets to it reach IPVS.
type Binding int

const (
	// BindAddresses binds each virtual IP as a /32 or /128 address on the
	// dummy link, as kube-proxy's IPVS mode does (`ip addr show kube-ipvs0`
	// lists them).
	BindAddresses Binding = iota
	// BindRoutes gives each IPv4 virtual IP a local route (through
	// RouteLink, of protocol netlinkraw/link.RouteProtocol: `ip route show
	// table local proto 156`) instead of an address on the dummy link:
	// the same reachability (the same addresses are local, the same ARP
	// answers, the same source address for the node's own connections),
	// without the kernel walking the link's address list for every
	// insert. IPv6 virtual IPs stay addresses: the kernel refuses IPv6
	// local routes through a link that is down, as the dummy is, and an
	// IPv6 route's preferred source must be an address already bound.
	BindRoutes
)

// RouteLink is the link BindRoutes' local routes go through: the loopback,
// not the dummy link, because the kernel flushes every route through a
// link when the link's last IPv4 address is removed, which is what taking
// over the addresses kube-proxy (or BindAddresses) bound on kube-ipvs0
// does; lo keeps 127.0.0.1. Which link a local route names does not change
// where its packets go (they are the node's either way).
const RouteLink = "lo"

// Bindings are the values of --ipvs-vip-binding.
var Bindings = map[string]Binding{"addresses": BindAddresses, "routes": BindRoutes}

// String is the binding's flag value.
func (b Binding) String() string {
	for k, v := range Bindings {
		if v == b {
			return k
		}
	}
	return fmt.Sprintf("Binding(%d)", int(b))
}

// routed reports whether a is made local by a route under b.
func (b Binding) routed(a netip.Addr) bool { return b == BindRoutes && a.Is4() }

// BoundOtherWay is how Node.Read reports a virtual IP made local the other way
// than the binding in use (an address kube-proxy or the address binding
// left, under BindRoutes; a route, under BindAddresses): in its
// IPv4-mapped IPv6 form, a key the renderer never produces, so the sink
// sees it as one of its own objects nobody wants and removes it, after
// making the same address local the right way (bindings are added before
// removals). Unbind takes it back to the other kind.
func BoundOtherWay(a netip.Addr) netip.Addr { return netip.AddrFrom16(a.As16()) }

// isBoundOtherWay reports whether a is in BoundOtherWay's form.
func isBoundOtherWay(a netip.Addr) bool { return a.Is4In6() }

// IPVS applies the operations in batches.
func (k *Kernel) IPVS(ops []ipvs.Op) []error {
	errs := make([]error, len(ops))
	err := k.IPVSConn.Apply(ops)
	var be *ipvs.BatchError
	switch {
	case err == nil:
	case errors.As(err, &be) && len(be.Errors) == len(ops):
		copy(errs, be.Errors)
	default:
		w := &WholeError{Err: err}
		for i := range errs {
			errs[i] = w
		}
	}
	return errs
}

func entryErrors(n int, err error) []error {
	errs := make([]error, n)
	var be *ipset.BatchError
	switch {
	case err == nil:
	case errors.As(err, &be):
		for _, f := range be.Failed {
			if f.Index >= 0 && f.Index < n {
				errs[f.Index] = fmt.Errorf("ipset: %s %s %s: %w", be.Op, be.Set, f.Entry, f.Err)
			}
		}
	default:
		w := &WholeError{Err: err}
		for i := range errs {
			errs[i] = w
		}
	}
	return errs
}

// AddEntries adds entries to a set; present entries are not errors.
func (k *Kernel) AddEntries(set string, entries []ipset.Entry) []error {
	return entryErrors(len(entries), k.IPSet.Add(set, entries, ipset.Exist))
}

// DelEntries deletes entries from a set; absent entries are not errors.
func (k *Kernel) DelEntries(set string, entries []ipset.Entry) []error {
	return entryErrors(len(entries), k.IPSet.Del(set, entries, ipset.Exist))
}

// bindGroups splits addrs by how b makes each local, and calls f once per
// non-empty group (routes, addresses) with the group's addresses, unmapped,
// and the index of each in addrs. When f fails for a group, f is called
// again for each of its addresses alone, and each gets its own error (f
// must take an address written already: the link batches do). Addresses in BoundOtherWay's form go to the other group than b puts
// them in.
func (b Binding) bindGroups(addrs []netip.Addr, f func(routes bool, group []netip.Addr) error) []error {
	errs := make([]error, len(addrs))
	var idx [2][]int
	var groups [2][]netip.Addr
	for i, a := range addrs {
		routes := b.routed(a.Unmap())
		if isBoundOtherWay(a) {
			routes = !routes
		}
		g := 0
		if routes {
			g = 1
		}
		idx[g] = append(idx[g], i)
		groups[g] = append(groups[g], a.Unmap())
	}
	for g := range groups {
		if len(groups[g]) == 0 {
			continue
		}
		err := f(g == 1, groups[g])
		if err == nil {
			continue
		}
		if len(groups[g]) == 1 {
			errs[idx[g][0]] = err
			continue
		}
		// A batch goes on past a refused address: find which by writing
		// each again alone (those written already are no errors).
		for j, a := range groups[g] {
			errs[idx[g][j]] = f(g == 1, []netip.Addr{a})
		}
	}
	return errs
}

// Bind makes the addresses local: bound on the dummy link, or given local
// routes (Binding).
func (k *Kernel) Bind(addrs []netip.Addr) []error {
	return k.Binding.bindGroups(addrs, func(routes bool, g []netip.Addr) error {
		if routes {
			return k.Link.AddLocalRoutes(RouteLink, g)
		}
		return k.Link.AddAddresses(k.Dummy, g)
	})
}

// Unbind undoes Bind; an address in BoundOtherWay's form is removed the other way.
func (k *Kernel) Unbind(addrs []netip.Addr) []error {
	return k.Binding.bindGroups(addrs, func(routes bool, g []netip.Addr) error {
		if routes {
			return k.Link.DelLocalRoutes(RouteLink, g)
		}
		return k.Link.DelAddresses(k.Dummy, g)
	})
}

// Destinations dumps a virtual server's destinations.
func (k *Kernel) Destinations(s ipvs.Service) ([]ipvs.DestinationEntry, error) {
	return k.IPVSConn.Destinations(s.Key())
}

// DryRun prints every write instead of making it, one line per object, in a
// stable order (with Applier.Ordered). It is the same code path as the kernel up to the write.
type DryRun struct {
	Out io.Writer
	// Binding is how the kernel writer would make addresses local.
	Binding Binding
}

func (d DryRun) print(lines []string) {
	for _, l := range lines {
		fmt.Fprintln(d.Out, l)
	}
}

// IPVS prints the operations.
func (d DryRun) IPVS(ops []ipvs.Op) []error {
	lines := make([]string, len(ops))
	for i, op := range ops {
		lines[i] = "ipvs " + op.String() + ipvsDetail(op)
	}
	d.print(lines)
	return make([]error, len(ops))
}

func ipvsDetail(op ipvs.Op) string {
	switch op.Kind {
	case ipvs.OpCreateService, ipvs.OpUpdateService:
		s := " scheduler " + op.Service.Scheduler
		if op.Service.Flags&ipvs.FlagPersistent != 0 {
			s += fmt.Sprintf(" persistent %ds", op.Service.Timeout)
		}
		return s
	case ipvs.OpCreateDestination, ipvs.OpUpdateDestination:
		return fmt.Sprintf(" weight %d", op.Destination.Weight)
	}
	return ""
}

func (d DryRun) entries(op, set string, es []ipset.Entry) []error {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = "ipset " + op + " " + set + " " + e.String()
	}
	d.print(lines)
	return make([]error, len(es))
}

// AddEntries prints the entries.
func (d DryRun) AddEntries(set string, es []ipset.Entry) []error { return d.entries("add", set, es) }

// DelEntries prints the entries.
func (d DryRun) DelEntries(set string, es []ipset.Entry) []error { return d.entries("del", set, es) }

func (d DryRun) addrs(op string, as []netip.Addr) []error {
	return d.Binding.bindGroups(as, func(routes bool, g []netip.Addr) error {
		kind := "address"
		if routes {
			kind = "local route"
		}
		lines := make([]string, len(g))
		for i, a := range g {
			lines[i] = kind + " " + op + " " + a.String()
		}
		d.print(lines)
		return nil
	})
}

// Bind prints the addresses.
func (d DryRun) Bind(as []netip.Addr) []error { return d.addrs("bind", as) }

// Unbind prints the addresses.
func (d DryRun) Unbind(as []netip.Addr) []error { return d.addrs("unbind", as) }

// Destinations reports none: a dry run has no kernel to read.
func (d DryRun) Destinations(ipvs.Service) ([]ipvs.DestinationEntry, error) { return nil, nil }

// Service converts a rendered virtual server to the IPVS client's type.
func Service(vs render.VirtualServer, o render.ServerOptions) ipvs.Service {
	s := ipvs.Service{Protocol: ipvs.Protocol(vs.Protocol), Address: vs.Addr, Port: vs.Port, Scheduler: o.Scheduler}
	if vs.Addr.Is4() {
		s.Family, s.Netmask = ipvs.IPv4, 32
	} else {
		s.Family, s.Netmask = ipvs.IPv6, 128
	}
	if o.Persistent {
		s.Flags |= ipvs.FlagPersistent
		s.Timeout = o.Timeout
	}
	return s
}

// Destination converts a rendered destination to the IPVS client's type.
func Destination(d render.Destination, o render.DestOptions) ipvs.Destination {
	f := ipvs.IPv4
	if d.Addr.Is6() {
		f = ipvs.IPv6
	}
	return ipvs.Destination{Family: f, Address: d.Addr, Port: d.Port, Forward: ipvs.Masquerade, Weight: o.Weight}
}

// Entry converts a rendered set entry to the ipset client's type.
func Entry(e render.SetEntry) ipset.Entry {
	return ipset.Entry{IP: e.Addr, Proto: ipset.Proto(e.Protocol), Port: e.Port, IP2: e.Addr2, Net: e.Net}
}

// FromEntry converts an ipset entry listed from set back to a rendered entry.
func FromEntry(set string, e ipset.Entry) render.SetEntry {
	return render.SetEntry{Set: set, Addr: e.IP, Protocol: render.Protocol(e.Proto), Port: e.Port, Addr2: e.IP2, Net: e.Net}
}

// joinErrors joins the non-nil errors into one that names how many there
// are and keeps every one in its chain (errors.Is and errors.As see them
// all), or returns nil.
func joinErrors(errs []error) error {
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &joined{out}
}

// joined is several errors: the first five in its message, all in its
// chain.
type joined struct{ errs []error }

func (j *joined) Error() string {
	var b strings.Builder
	for i, e := range j.errs {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(j.errs)-5)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

func (j *joined) Unwrap() []error { return j.errs }
