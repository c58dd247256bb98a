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
}

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
		for i := range errs {
			errs[i] = err
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
		for i := range errs {
			errs[i] = err
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

func addrErrors(addrs []netip.Addr, err error) []error {
	errs := make([]error, len(addrs))
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// Bind adds the addresses to the dummy link.
func (k *Kernel) Bind(addrs []netip.Addr) []error {
	return addrErrors(addrs, k.Link.AddAddresses(k.Dummy, addrs))
}

// Unbind removes the addresses from the dummy link.
func (k *Kernel) Unbind(addrs []netip.Addr) []error {
	return addrErrors(addrs, k.Link.DelAddresses(k.Dummy, addrs))
}

// Destinations dumps a virtual server's destinations.
func (k *Kernel) Destinations(s ipvs.Service) ([]ipvs.DestinationEntry, error) {
	return k.IPVSConn.Destinations(s.Key())
}

// DryRun prints every write instead of making it, one line per object, in a
// stable order (with Applier.Ordered). It is the same code path as the kernel up to the write.
type DryRun struct {
	Out io.Writer
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
	lines := make([]string, len(as))
	for i, a := range as {
		lines[i] = "address " + op + " " + a.String()
	}
	d.print(lines)
	return make([]error, len(as))
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
