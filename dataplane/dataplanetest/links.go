// Package dataplanetest holds test doubles for the dataplane: an in-memory
// dummy link (the build machines' kernel has no dummy links; the VM tests
// use the real one), and the one fake node of the IPVS sinks' tests and
// benchmarks (Node: netlinkraw's IPVS and ipset fakes with that link).
package dataplanetest

import (
	"net/netip"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/proxysinks/proxysinks/netlinkraw/link"
)

// Links is an in-memory dataplane.Links: one dummy link with its
// addresses, and the local routes through each link.
type Links struct {
	mu     sync.Mutex
	addrs  map[netip.Addr]bool
	routes map[string]map[netip.Addr]bool
}

// NewLinks returns an empty Links.
func NewLinks() *Links {
	return &Links{addrs: map[netip.Addr]bool{}, routes: map[string]map[netip.Addr]bool{}}
}

// EnsureDummy returns the link; it always exists.
func (f *Links) EnsureDummy(name string) (link.Link, error) { return link.Link{Name: name}, nil }

// Addresses returns the bound addresses, sorted.
func (f *Links) Addresses(string) ([]netip.Addr, error) { return f.list(f.addrs), nil }

// LocalRoutes returns the addresses of the local routes through the link,
// sorted.
func (f *Links) LocalRoutes(name string) ([]netip.Addr, error) { return f.list(f.routes[name]), nil }

func (f *Links) list(m map[netip.Addr]bool) []netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]netip.Addr, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// AddLocalRoutes adds local routes; present ones are not errors. As the
// kernel does for a link that is down, it refuses IPv6 ones (ENETDOWN),
// adding the others.
func (f *Links) AddLocalRoutes(name string, as []netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var failed []error
	if f.routes[name] == nil {
		f.routes[name] = map[netip.Addr]bool{}
	}
	for _, a := range as {
		if a.Is6() {
			failed = append(failed, &link.Error{Op: "add local route", Object: a.String() + " on " + name, Addr: a, Err: unix.ENETDOWN})
			continue
		}
		f.routes[name][a] = true
	}
	if failed != nil {
		return &link.BatchError{Errors: failed}
	}
	return nil
}

// DelLocalRoutes deletes local routes; absent ones are not errors.
func (f *Links) DelLocalRoutes(name string, as []netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range as {
		delete(f.routes[name], a)
	}
	return nil
}

// AddAddresses binds addresses; present ones are not errors.
func (f *Links) AddAddresses(_ string, as []netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range as {
		f.addrs[a] = true
	}
	return nil
}

// DelAddresses unbinds addresses; absent ones are not errors.
func (f *Links) DelAddresses(_ string, as []netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range as {
		delete(f.addrs, a)
	}
	return nil
}

// DeleteLink unbinds every address of the dummy link and deletes the
// routes through the link named name (the dummy itself always exists
// here).
func (f *Links) DeleteLink(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.addrs)
	delete(f.routes, name)
	return nil
}

// Has reports whether addr is bound.
func (f *Links) Has(addr netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addrs[addr]
}

// Len returns the number of bound addresses.
func (f *Links) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.addrs)
}
